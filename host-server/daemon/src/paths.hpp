// Where the server's sockets are by default (shared by wormhole-server and
// wormholectl).
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <string>

namespace wh::server {

inline std::string default_socket_path() {
  if (const char* e = std::getenv("WORMHOLE_SOCKET")) return e;
  return "/tmp/wormhole-" + std::to_string(getuid()) + ".sock";
}

// The admin socket beside a client socket: X.sock -> X-admin.sock, else X-admin.
inline std::string admin_socket_beside(const std::string& socket_path) {
  const std::string ext = ".sock";
  if (socket_path.size() > ext.size() && socket_path.compare(socket_path.size() - ext.size(), ext.size(), ext) == 0)
    return socket_path.substr(0, socket_path.size() - ext.size()) + "-admin.sock";
  return socket_path + "-admin";
}

}  // namespace wh::server
