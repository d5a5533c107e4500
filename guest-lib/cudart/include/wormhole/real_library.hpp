// Where NVIDIA's copy of a library lives, for the drop-ins that drive it
// (libnvrtc.so.13, libnvJitLink.so.13). wormhole-run preloads the drop-ins,
// so a Python package's own copy (a pip wheel's) is never loaded in their
// place; they load it themselves. Paths, in the order to try:
//   1. $<env> (a file);
//   2. the `first` folders the caller names (nvJitLink: beside libnvvm.so.4);
//   3. folders of libraries in the process that hold a file of that name (a
//      wheel's nvidia/cu13/lib, from which PyTorch loaded others by path);
//   4. nvidia/cu13/lib of each site-packages a loaded library lies in (the
//      wheel installed, none of its libraries loaded yet);
//   5. LD_LIBRARY_PATH, then the toolkit's and the system's folders.
// The drop-in's own folder is left out; the caller still refuses a file
// that carries its marker (a copy of the drop-in elsewhere).
#pragma once
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace wh::guest_real {

inline std::vector<std::string> loaded_library_paths() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && info->dlpi_name[0] == '/')
          static_cast<std::vector<std::string>*>(out)->emplace_back(info->dlpi_name);
        return 0;
      },
      &paths);
  return paths;
}

inline std::vector<std::string> candidates(const char* soname, const char* env, const std::string& self_dir,
                                           const std::vector<std::string>& first, const char* cuda_lib64) {
  std::vector<std::string> out;
  auto add = [&](const std::string& dir) {
    if (dir.empty() || dir == self_dir) return;
    std::string p = dir + "/" + soname;
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  };
  if (const char* e = std::getenv(env); e && *e) out.push_back(e);
  for (auto& d : first) add(d);
  const auto loaded = loaded_library_paths();
  for (auto& p : loaded) {
    std::string d = p.substr(0, p.rfind('/'));
    if (access((d + "/" + soname).c_str(), F_OK) == 0) add(d);
  }
  for (auto& p : loaded)
    for (const char* sp : {"/site-packages/", "/dist-packages/"})
      if (size_t at = p.find(sp); at != std::string::npos) {
        std::string d = p.substr(0, at + std::string(sp).size()) + "nvidia/cu13/lib";
        if (access((d + "/" + soname).c_str(), F_OK) == 0) add(d);
      }
  if (const char* lp = std::getenv("LD_LIBRARY_PATH"))
    for (std::string rest = lp; !rest.empty();) {
      size_t c = rest.find(':');
      add(rest.substr(0, c));
      rest = c == std::string::npos ? "" : rest.substr(c + 1);
    }
  for (const char* d : {cuda_lib64, "/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib",
                        "/usr/lib/x86_64-linux-gnu", "/usr/lib64"})
    add(d);
  return out;
}

}  // namespace wh::guest_real
