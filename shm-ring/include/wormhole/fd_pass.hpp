// File descriptors over a Unix socket: one message carrying bytes and
// descriptors (SCM_RIGHTS). The server hands each client its region, and
// grown pinned segments, this way; a server hands a migrating session's
// region, client socket and checkpoint to another server.
#pragma once
#include <sys/types.h>

#include <cstddef>
#include <span>

namespace wh::ring {

// Sends n bytes from buf with fd attached (fd < 0: none); flags are added to
// MSG_NOSIGNAL. True when the whole message went.
bool send_with_fd(int sock, const void* buf, size_t n, int fd, int flags = 0);
// The same with up to kMaxPassedFds descriptors (Linux's SCM_MAX_FD: a
// migrating session's region, socket, checkpoint and grown pinned segments).
inline constexpr size_t kMaxPassedFds = 253;
bool send_with_fds(int sock, const void* buf, size_t n, std::span<const int> fds, int flags = 0);

// Receives up to n bytes into buf, and the descriptor attached to them in *fd
// (close-on-exec; -1 when none came: the caller owns one that did). Returns
// what recvmsg returns.
ssize_t recv_with_fd(int sock, void* buf, size_t n, int* fd, int flags = 0);
// The same for several: up to `max` descriptors into fds[], their number in
// *got; any beyond max are closed.
ssize_t recv_with_fds(int sock, void* buf, size_t n, int* fds, size_t max, size_t* got, int flags = 0);

}  // namespace wh::ring
