// peerCredentials(fd) -> { pid, uid, gid } of the process at the other end of a connected Unix
// domain socket, as the kernel recorded it when that process called connect(). The broker uses it
// to know who is asking without trusting anything the client says about itself.
//
// hardenProcess() -> { dumpable, coreLimit }: makes this process non-dumpable (Linux
// PR_SET_DUMPABLE 0, macOS PT_DENY_ATTACH) and sets its core file limit to 0, so another process of
// the same user can neither read its memory (/proc/<pid>/mem, ptrace, process_vm_readv) nor make
// it write a core file holding a decrypted credential. The values are read back, not assumed.
//
// lockFile(fd) -> true | false: flock(fd, LOCK_EX | LOCK_NB), the broker's one-per-data-directory
// lock. true: this open file now holds the exclusive lock until it is closed or the process dies
// (the kernel releases it then, whatever killed the process); false: another open file holds it.
// A SIGSTOPped holder still holds it: a stopped broker is not a dead one.
//
// Plain C against node_api.h (no node-addon-api, no NAN): N-API is ABI-stable, so the same build
// loads in Node and in Electron without a per-runtime rebuild.
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <unistd.h>
#include <node_api.h>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#if defined(__APPLE__)
#include <sys/un.h>
#include <sys/ptrace.h>
#endif

// Throws Error(message) with err.code = code; returns NULL so callers can `return throw_coded(...)`.
static napi_value throw_coded(napi_env env, const char* code, const char* message) {
  napi_throw_error(env, code, message);
  return NULL;
}

// Error(message) with err.code = PEERCRED_SYSCALL_FAILED and err.errno = the (positive) errno.
static napi_value throw_errno(napi_env env, const char* what, int error_number) {
  char message[256];
  snprintf(message, sizeof message, "%s failed: %s", what, strerror(error_number));
  napi_value code, text, error, number;
  if (napi_create_string_utf8(env, "PEERCRED_SYSCALL_FAILED", NAPI_AUTO_LENGTH, &code) != napi_ok
      || napi_create_string_utf8(env, message, NAPI_AUTO_LENGTH, &text) != napi_ok
      || napi_create_error(env, code, text, &error) != napi_ok
      || napi_create_int32(env, error_number, &number) != napi_ok
      || napi_set_named_property(env, error, "errno", number) != napi_ok) {
    return throw_coded(env, "PEERCRED_SYSCALL_FAILED", message);
  }
  napi_throw(env, error);
  return NULL;
}

// Reads the one argument as a file descriptor into *fd; 0 after throwing PEERCRED_BAD_ARGUMENT.
static int read_fd_argument(napi_env env, napi_callback_info info, const char* usage, int* fd) {
  size_t argc = 1;
  napi_value argv[1];
  napi_valuetype type;
  int64_t fd64;
  if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1
      || napi_typeof(env, argv[0], &type) != napi_ok || type != napi_number
      || napi_get_value_int64(env, argv[0], &fd64) != napi_ok || fd64 < 0 || fd64 > 0x7fffffff) {
    throw_coded(env, "PEERCRED_BAD_ARGUMENT", usage);
    return 0;
  }
  *fd = (int)fd64;
  return 1;
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

#if defined(__linux__) || defined(__APPLE__)
// The soft core limit as a JS number; RLIM_INFINITY becomes Infinity (it does not fit an int64).
static int set_core_limit(napi_env env, napi_value object) {
  struct rlimit now;
  if (getrlimit(RLIMIT_CORE, &now) != 0) return 0;
  double value = now.rlim_cur == RLIM_INFINITY ? INFINITY : (double)now.rlim_cur;
  napi_value number;
  if (napi_create_double(env, value, &number) != napi_ok) return 0;
  return napi_set_named_property(env, object, "coreLimit", number) == napi_ok;
}
#endif

static napi_value harden_process(napi_env env, napi_callback_info info) {
  (void)info;
#if defined(__linux__) || defined(__APPLE__)
  // Lowering a limit (soft and hard) never needs a privilege; the hard limit too, so nothing in
  // this process can raise it again later.
  struct rlimit none = {0, 0};
  if (setrlimit(RLIMIT_CORE, &none) != 0) return throw_errno(env, "setrlimit(RLIMIT_CORE)", errno);
  bool dumpable;
#if defined(__linux__)
  // Non-dumpable: /proc/<pid>/mem, maps, environ and ptrace attach need CAP_SYS_PTRACE, and the
  // kernel writes no core. Inherited by fork(), reset by execve() (children we exec start dumpable).
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return throw_errno(env, "prctl(PR_SET_DUMPABLE)", errno);
  int state = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  if (state < 0) return throw_errno(env, "prctl(PR_GET_DUMPABLE)", errno);
  dumpable = state != 0;
#else
  // macOS has no read-back for PT_DENY_ATTACH; success of the call is the answer. A process that is
  // already being debugged is killed by it (that is the point: a debugger is another reader).
  if (ptrace(PT_DENY_ATTACH, 0, 0, 0) != 0) return throw_errno(env, "ptrace(PT_DENY_ATTACH)", errno);
  dumpable = false;
#endif
  napi_value result;
  napi_value flag;
  if (napi_create_object(env, &result) != napi_ok) return NULL;
  if (napi_get_boolean(env, dumpable, &flag) != napi_ok || napi_set_named_property(env, result, "dumpable", flag) != napi_ok
      || !set_core_limit(env, result)) {
    return throw_coded(env, "PEERCRED_INTERNAL", "could not build the result object");
  }
  return result;
#else
  return throw_coded(env, "PEERCRED_UNSUPPORTED", "process hardening is not implemented on this platform");
#endif
}

static napi_value lock_file(napi_env env, napi_callback_info info) {
  int fd;
  if (!read_fd_argument(env, info, "lockFile(fd): fd must be a non-negative integer", &fd)) return NULL;
#if defined(__linux__) || defined(__APPLE__)
  int result;
  do {
    result = flock(fd, LOCK_EX | LOCK_NB);
  } while (result != 0 && errno == EINTR);
  if (result != 0 && errno != EWOULDBLOCK) return throw_errno(env, "flock(LOCK_EX | LOCK_NB)", errno);
  napi_value answer;
  if (napi_get_boolean(env, result == 0, &answer) != napi_ok) return NULL;
  return answer;
#else
  (void)fd;
  return throw_coded(env, "PEERCRED_UNSUPPORTED", "file locks are not implemented on this platform");
#endif
}

static int export_function(napi_env env, napi_value exports, const char* name, napi_callback callback) {
  napi_value fn;
  if (napi_create_function(env, name, NAPI_AUTO_LENGTH, callback, NULL, &fn) != napi_ok) return 0;
  return napi_set_named_property(env, exports, name, fn) == napi_ok;
}

static napi_value init(napi_env env, napi_value exports) {
  if (!export_function(env, exports, "peerCredentials", peer_credentials)) return NULL;
  if (!export_function(env, exports, "hardenProcess", harden_process)) return NULL;
  if (!export_function(env, exports, "lockFile", lock_file)) return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
