#include "wormhole/fd_pass.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace wh::ring {

bool send_with_fds(int sock, const void* buf, size_t n, std::span<const int> fds, int flags) {
  if (fds.size() > kMaxPassedFds) return false;
  iovec iov{const_cast<void*>(buf), n};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  if (!fds.empty()) {
    m.msg_control = ctl;
    m.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  }
  return sendmsg(sock, &m, MSG_NOSIGNAL | flags) == ssize_t(n);
}

bool send_with_fd(int sock, const void* buf, size_t n, int fd, int flags) {
  return fd >= 0 ? send_with_fds(sock, buf, n, std::span<const int>(&fd, 1), flags)
                 : send_with_fds(sock, buf, n, {}, flags);
}

ssize_t recv_with_fds(int sock, void* buf, size_t n, int* fds, size_t max, size_t* got, int flags) {
  iovec iov{buf, n};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int) * kMaxPassedFds)];
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  *got = 0;
  const ssize_t r = recvmsg(sock, &m, MSG_CMSG_CLOEXEC | flags);
  if (r < 0) return r;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < k; i++) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (*got < max) fds[(*got)++] = fd;
      else close(fd);
    }
  }
  return r;
}

ssize_t recv_with_fd(int sock, void* buf, size_t n, int* fd, int flags) {
  size_t got = 0;
  *fd = -1;
  return recv_with_fds(sock, buf, n, fd, 1, &got, flags);
}

}  // namespace wh::ring
