// A kernel whose tcp_diag handler is unavailable (module not loaded and not loadable, or built without it), for
// broker/host/native-addon.test.ts: preloaded (LD_PRELOAD) into a node that calls the addon's listeningTcpInodes, it
// rewrites the sock_diag request's protocol to one no handler serves, so the real kernel answers the way such a kernel
// does: a dump that ends in NLMSG_DONE carrying -ENOENT.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <string.h>
#include <sys/socket.h>

ssize_t sendto(int fd, const void* buffer, size_t length, int flags, const struct sockaddr* to, socklen_t to_length) {
  static ssize_t (*real)(int, const void*, size_t, int, const struct sockaddr*, socklen_t);
  if (real == NULL) real = dlsym(RTLD_NEXT, "sendto");
  struct request {
    struct nlmsghdr header;
    struct inet_diag_req_v2 body;
  } request;
  if (length == sizeof request && ((const struct nlmsghdr*)buffer)->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
    memcpy(&request, buffer, sizeof request);
    request.body.sdiag_protocol = 200;
    return real(fd, &request, sizeof request, flags, to, to_length);
  }
  return real(fd, buffer, length, flags, to, to_length);
}
