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
// listeningTcpInodes() -> number[]: the socket inodes of every TCP socket in LISTEN state, IPv4 and
// IPv6, of the CALLER's network namespace, from one NETLINK_SOCK_DIAG dump per family
// (inet_diag_req_v2 with idiag_states = 1 << TCP_LISTEN: the kernel walks only its listening hash,
// where reading /proc/net/tcp walks every established connection too). The broker matches them
// against a process's /proc/<pid>/fd socket links (node's inspector, opened by SIGUSR1, is one).
//
// Plain C against node_api.h (no node-addon-api, no NAN): N-API is ABI-stable, so the same build
// loads in Node and in Electron without a per-runtime rebuild.
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <unistd.h>
#include <node_api.h>

#if defined(__linux__)
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/uio.h>
#include <netinet/in.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/inet_diag.h>
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

#if defined(__linux__)
// TCP_LISTEN in include/net/tcp_states.h (not exported to user space under that name).
#define POSTERN_TCP_LISTEN 10
// One recv: the kernel sizes a dump's messages to the reader's buffer (up to 32 KiB each).
#define DIAG_BUFFER_BYTES 65536

// Growable list of inodes, filled by both families' dumps.
struct inode_list {
  uint32_t* items;
  size_t length;
  size_t capacity;
};

static int inode_list_push(struct inode_list* list, uint32_t inode) {
  if (list->length == list->capacity) {
    size_t capacity = list->capacity == 0 ? 64 : list->capacity * 2;
    uint32_t* items = realloc(list->items, capacity * sizeof *items);
    if (items == NULL) return 0;
    list->items = items;
    list->capacity = capacity;
  }
  list->items[list->length++] = inode;
  return 1;
}

// One SOCK_DIAG_BY_FAMILY dump of the LISTEN TCP sockets of `family` on the netlink socket `fd`,
// appended to `list`. 0 on success; otherwise a positive errno (EPROTO: an answer that does not
// parse, ENOMEM: no memory).
static int dump_listeners(int fd, unsigned char family, uint32_t sequence, unsigned char* buffer,
                          struct inode_list* list) {
  struct {
    struct nlmsghdr header;
    struct inet_diag_req_v2 request;
  } message;
  memset(&message, 0, sizeof message);
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  message.header.nlmsg_seq = sequence;
  message.request.sdiag_family = family;
  message.request.sdiag_protocol = IPPROTO_TCP;
  message.request.idiag_states = 1u << POSTERN_TCP_LISTEN;
  struct sockaddr_nl kernel;
  memset(&kernel, 0, sizeof kernel);
  kernel.nl_family = AF_NETLINK;
  ssize_t sent;
  do {
    sent = sendto(fd, &message, sizeof message, 0, (struct sockaddr*)&kernel, sizeof kernel);
  } while (sent < 0 && errno == EINTR);
  if (sent < 0) return errno;
  if ((size_t)sent != sizeof message) return EPROTO;
  for (;;) {
    struct iovec part = {buffer, DIAG_BUFFER_BYTES};
    struct sockaddr_nl from;
    struct msghdr received;
    memset(&received, 0, sizeof received);
    received.msg_name = &from;
    received.msg_namelen = sizeof from;
    received.msg_iov = &part;
    received.msg_iovlen = 1;
    ssize_t length;
    do {
      length = recvmsg(fd, &received, 0);
    } while (length < 0 && errno == EINTR);
    if (length < 0) return errno;
    // Only the kernel (port 0) answers; a truncated datagram would lose sockets.
    if (length == 0 || (received.msg_flags & MSG_TRUNC) != 0 || from.nl_pid != 0) return EPROTO;
    int remaining = (int)length;
    for (struct nlmsghdr* header = (struct nlmsghdr*)buffer; NLMSG_OK(header, remaining);
         header = NLMSG_NEXT(header, remaining)) {
      if (header->nlmsg_seq != sequence) return EPROTO;
      // A dump the kernel could not finish consistently (sockets changed under it): not the whole list.
      if ((header->nlmsg_flags & NLM_F_DUMP_INTR) != 0) return EAGAIN;
      if (header->nlmsg_type == NLMSG_DONE) {
        // A failed dump ends in DONE too, its error in the payload (no tcp_diag handler: -ENOENT): never "no listeners".
        if (header->nlmsg_len >= NLMSG_LENGTH(sizeof(int))) {
          int done;
          memcpy(&done, NLMSG_DATA(header), sizeof done);
          if (done < 0) return -done;
        }
        return 0;
      }
      if (header->nlmsg_type == NLMSG_ERROR) {
        if (header->nlmsg_len < NLMSG_LENGTH(sizeof(struct nlmsgerr))) return EPROTO;
        const struct nlmsgerr* error = NLMSG_DATA(header);
        return error->error < 0 ? -error->error : EPROTO;
      }
      if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY || header->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
        return EPROTO;
      const struct inet_diag_msg* socket_entry = NLMSG_DATA(header);
      if (socket_entry->idiag_state != POSTERN_TCP_LISTEN) continue;
      if (!inode_list_push(list, socket_entry->idiag_inode)) return ENOMEM;
    }
    if (remaining != 0) return EPROTO;
  }
}
#endif

static napi_value listening_tcp_inodes(napi_env env, napi_callback_info info) {
  (void)info;
#if defined(__linux__)
  int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) return throw_errno(env, "socket(NETLINK_SOCK_DIAG)", errno);
  unsigned char* buffer = malloc(DIAG_BUFFER_BYTES);
  struct inode_list list = {NULL, 0, 0};
  int failure = buffer == NULL ? ENOMEM : dump_listeners(fd, AF_INET, 1, buffer, &list);
  if (failure == 0) failure = dump_listeners(fd, AF_INET6, 2, buffer, &list);
  close(fd);
  free(buffer);
  if (failure != 0) {
    free(list.items);
    return throw_errno(env, "sock_diag dump of listening TCP sockets", failure);
  }
  napi_value result;
  napi_status status = napi_create_array_with_length(env, list.length, &result);
  for (size_t i = 0; status == napi_ok && i < list.length; i++) {
    napi_value inode;
    status = napi_create_uint32(env, list.items[i], &inode);
    if (status == napi_ok) status = napi_set_element(env, result, (uint32_t)i, inode);
  }
  free(list.items);
  if (status != napi_ok) return throw_coded(env, "PEERCRED_INTERNAL", "could not build the result array");
  return result;
#else
  return throw_coded(env, "PEERCRED_UNSUPPORTED", "sock_diag is Linux-only");
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
  if (!export_function(env, exports, "listeningTcpInodes", listening_tcp_inodes)) return NULL;
  return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
