#include "wormhole/fd_pass.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace wh::ring {

bool send_with_fd(int sock, const void* buf, size_t n, int fd, int flags) {
  iovec iov{const_cast<void*>(buf), n};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  return sendmsg(sock, &m, MSG_NOSIGNAL | flags) == ssize_t(n);
}

ssize_t recv_with_fd(int sock, void* buf, size_t n, int* fd, int flags) {
  iovec iov{buf, n};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  *fd = -1;
  const ssize_t r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | flags);
  if (r < 0) return r;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && *fd < 0) std::memcpy(fd, CMSG_DATA(c), sizeof *fd);
  return r;
}

}  // namespace wh::ring
