// Opens one of NVIDIA's libraries for the cuda backend (cuBLAS, cuBLASLt,
// cuFFT, cuRAND) and loads the functions a backend calls.
#pragma once

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <string>
#include <utility>

namespace wh::server {

// Testing only (wormhole-server --allow-dropin-driver): Wormhole's own
// drop-ins may stand in for NVIDIA's libraries, so that the cuda backend runs
// against the sim device of the server they forward to (docs/hardware.md).
inline std::atomic<bool>& dropin_driver_allowed() {
  static std::atomic<bool> allowed{false};
  return allowed;
}

// Where a loaded library's symbol came from, for the server log.
inline std::string library_path_of(void* sym) {
  Dl_info info{};
  return sym && dladdr(sym, &info) && info.dli_fname ? info.dli_fname : "?";
}

// nullptr and *error when it cannot be loaded, or when the library found is
// Wormhole's own guest drop-in (on the server's library path it would send
// the server's calls back to itself; its connection symbol is searched in
// its dependencies too) and the drop-ins were not allowed as the driver.
inline void* open_vendor_library(const char* soname, std::string* error) {
  void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    *error = std::string("cannot load ") + soname + ": " + dlerror();
    return nullptr;
  }
  if (dlsym(h, "wh_guest_connection") && !dropin_driver_allowed()) {
    *error = std::string(soname) + " on the server's library path is Wormhole's guest drop-in, not NVIDIA's";
    dlclose(h);
    return nullptr;
  }
  return h;
}

// Loads `soname` and each (name, slot) into its function pointer; false and
// *error naming the first missing one.
inline bool load_vendor_symbols(const char* soname, void** handle,
                                std::initializer_list<std::pair<const char*, void*>> syms, std::string* error) {
  *handle = open_vendor_library(soname, error);
  if (!*handle) return false;
  for (const auto& [name, slot] : syms) {
    void* f = dlsym(*handle, name);
    if (!f) {
      *error = std::string(soname) + " lacks " + name;
      return false;
    }
    std::memcpy(slot, &f, sizeof f);  // a function pointer's bits, as dlsym returns them
  }
  return true;
}

}  // namespace wh::server

// One NVIDIA library's functions for a backend, loaded once per server
// process on first use. With FUNCS(X) listing X(cufftPlanMany) X(...):
//   WH_VENDOR_LIBRARY(Lib, lib, "libcufft.so.12", FUNCS)
// declares struct Lib { a pointer per function; void* h; std::string error;
// bool ok; } and Lib& lib() (ok false, error set, when the library or a
// function is missing).
#define WH_VENDOR_PTR(fn) decltype(&::fn) fn = nullptr;
#define WH_VENDOR_SYM(fn) {#fn, static_cast<void*>(&l.fn)},
#define WH_VENDOR_LIBRARY(Type, getter, soname, FUNCS)                                               \
  struct Type {                                                                                      \
    FUNCS(WH_VENDOR_PTR)                                                                             \
    void* h = nullptr;                                                                               \
    std::string error;                                                                               \
    bool ok = false;                                                                                 \
  };                                                                                                 \
  Type& getter() {                                                                                   \
    static Type l;                                                                                   \
    static std::once_flag once;                                                                      \
    std::call_once(once, [] {                                                                        \
      l.ok = ::wh::server::load_vendor_symbols(soname, &l.h, {FUNCS(WH_VENDOR_SYM)}, &l.error);      \
    });                                                                                              \
    return l;                                                                                        \
  }
