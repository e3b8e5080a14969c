// peerCredentials(fd) -> { pid, uid, gid } of the process at the other end of a connected Unix
// domain socket, as the kernel recorded it when that process called connect(). The broker uses it
// to know who is asking without trusting anything the client says about itself.
//
// Plain C against node_api.h (no node-addon-api, no NAN): N-API is ABI-stable, so the same build
// loads in Node and in Electron without a per-runtime rebuild.
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <unistd.h>
#include <node_api.h>

#if defined(__APPLE__)
#include <sys/un.h>
#endif

// Throws Error(message) with err.code = code; returns NULL so callers can `return throw_coded(...)`.
static napi_value throw_coded(napi_env env, const char* code, const char* message) {
  napi_throw_error(env, code, message);
  return NULL;
}

static napi_value throw_errno(napi_env env, const char* what, int error_number) {
  char message[256];
  snprintf(message, sizeof message, "%s failed: %s", what, strerror(error_number));
  return throw_coded(env, "PEERCRED_SYSCALL_FAILED", message);
}

static int set_int(napi_env env, napi_value object, const char* name, int64_t value) {
  napi_value number;
  if (napi_create_int64(env, value, &number) != napi_ok) return 0;
  return napi_set_named_property(env, object, name, number) == napi_ok;
}

static napi_value peer_credentials(napi_env env, napi_callback_info info) {
  size_t argc = 1;
  napi_value argv[1];
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1) {
    return throw_coded(env, "PEERCRED_BAD_ARGUMENT", "peerCredentials(fd) needs a file descriptor");
  }
  napi_valuetype type;
  if (napi_typeof(env, argv[0], &type) != napi_ok || type != napi_number) {
    return throw_coded(env, "PEERCRED_BAD_ARGUMENT", "peerCredentials(fd): fd must be a number");
  }
  int64_t fd64;
  if (napi_get_value_int64(env, argv[0], &fd64) != napi_ok || fd64 < 0 || fd64 > 0x7fffffff) {
    return throw_coded(env, "PEERCRED_BAD_ARGUMENT", "peerCredentials(fd): fd must be a non-negative integer");
  }
  int fd = (int)fd64;
  int64_t pid, uid, gid;

#if defined(__linux__)
  struct ucred credentials;
  socklen_t length = sizeof credentials;
  memset(&credentials, 0, sizeof credentials);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return throw_errno(env, "getsockopt(SO_PEERCRED)", errno);
  if (length != sizeof credentials) return throw_coded(env, "PEERCRED_SYSCALL_FAILED", "getsockopt(SO_PEERCRED) returned a short answer");
  // A socketpair or a peer that has not connected yet reports pid 0: no identity, so no answer.
  if (credentials.pid <= 0) return throw_coded(env, "PEERCRED_NO_PEER", "the socket has no peer process");
  pid = credentials.pid;
  uid = credentials.uid;
  gid = credentials.gid;
#elif defined(__APPLE__)
  uid_t peer_uid;
  gid_t peer_gid;
  if (getpeereid(fd, &peer_uid, &peer_gid) != 0) return throw_errno(env, "getpeereid", errno);
  pid_t peer_pid = 0;
  socklen_t length = sizeof peer_pid;
  if (getsockopt(fd, SOL_LOCAL, LOCAL_PEERPID, &peer_pid, &length) != 0) return throw_errno(env, "getsockopt(LOCAL_PEERPID)", errno);
  if (peer_pid <= 0) return throw_coded(env, "PEERCRED_NO_PEER", "the socket has no peer process");
  pid = peer_pid;
  uid = peer_uid;
  gid = peer_gid;
#else
  (void)fd;
  (void)pid;
  (void)uid;
  (void)gid;
  return throw_coded(env, "PEERCRED_UNSUPPORTED", "peer credentials are not implemented on this platform");
#endif

#if defined(__linux__) || defined(__APPLE__)
  napi_value result;
  if (napi_create_object(env, &result) != napi_ok) return NULL;
  if (!set_int(env, result, "pid", pid) || !set_int(env, result, "uid", uid) || !set_int(env, result, "gid", gid)) {
    return throw_coded(env, "PEERCRED_INTERNAL", "could not build the result object");
  }
  return result;
#endif
}

static napi_value init(napi_env env, napi_value exports) {
  napi_value fn;
  if (napi_create_function(env, "peerCredentials", NAPI_AUTO_LENGTH, peer_credentials, NULL, &fn) != napi_ok) return NULL;
  if (napi_set_named_property(env, exports, "peerCredentials", fn) != napi_ok) return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
