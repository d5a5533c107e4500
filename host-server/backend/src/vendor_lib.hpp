// Opens one of NVIDIA's libraries for the cuda backend (cuBLAS, cuFFT).
#pragma once

#include <dlfcn.h>

#include <string>

namespace wh::server {

// nullptr and *error when it cannot be loaded, or when the library found is
// Wormhole's own guest drop-in (on the server's library path it would send
// the server's calls back to itself; its connection symbol is searched in
// its dependencies too).
inline void* open_vendor_library(const char* soname, std::string* error) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *error = std::string("cannot load ") + soname + ": " + dlerror();
    return nullptr;
  }
  if (dlsym(h, "wh_guest_connection")) {
    *error = std::string(soname) + " on the server's library path is Wormhole's guest drop-in, not NVIDIA's";
    dlclose(h);
    return nullptr;
  }
  return h;
}

}  // namespace wh::server
