// A region's file descriptor over a Unix socket: one message carrying bytes
// and at most one descriptor (SCM_RIGHTS). The server hands each client its
// region, and grown pinned segments, this way; the client takes them.
#pragma once
#include <sys/types.h>

#include <cstddef>

namespace wh::ring {

// Sends n bytes from buf with fd attached (fd < 0: none); flags are added to
// MSG_NOSIGNAL. True when the whole message went.
bool send_with_fd(int sock, const void* buf, size_t n, int fd, int flags = 0);

// Receives up to n bytes into buf, and the descriptor attached to them in *fd
// (close-on-exec; -1 when none came: the caller owns one that did). Returns
// what recvmsg returns.
ssize_t recv_with_fd(int sock, void* buf, size_t n, int* fd, int flags = 0);

}  // namespace wh::ring
