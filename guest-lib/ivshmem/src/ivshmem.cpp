#include "wormhole/ivshmem.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

namespace fs = std::filesystem;

namespace wh::ivshmem {
namespace {

void set_err(std::string* err, std::string msg) {
  if (err) *err = std::move(msg);
}

std::string errno_str(const std::string& what, const std::string& path) {
  return what + " " + path + ": " + std::strerror(errno);
}

// Reads a sysfs id file ("0x1af4\n"). -1 when missing or malformed.
long read_hex_file(const fs::path& p) {
  std::ifstream in(p);
  std::string s;
  if (!(in >> s)) return -1;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s.c_str(), &end, 16);
  if (errno != 0 || end == s.c_str() || *end != '\0') return -1;
  return v;
}

bool is_ivshmem_dir(const fs::path& dir) {
  return read_hex_file(dir / "vendor") == static_cast<long>(kVendorId) &&
         read_hex_file(dir / "device") == static_cast<long>(kDeviceId);
}

// "0000:00:04.0" or "00:04.0" (domain optional), hex digits.
bool looks_like_bdf(std::string_view s) {
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  auto match = [&](std::string_view t) {
    // bb:dd.f
    return t.size() == 7 && hex(t[0]) && hex(t[1]) && t[2] == ':' && hex(t[3]) &&
           hex(t[4]) && t[5] == '.' && t[6] >= '0' && t[6] <= '7';
  };
  if (s.size() == 12)
    return hex(s[0]) && hex(s[1]) && hex(s[2]) && hex(s[3]) && s[4] == ':' &&
           match(s.substr(5));
  return match(s);
}

fs::path pci_devices_dir(std::string_view sysfs_root) {
  return fs::path(std::string(sysfs_root)) / "bus" / "pci" / "devices";
}

// A device that no driver enabled may have memory decoding off; then the
// BAR reads as all-ones. Ask the kernel to enable it (best effort).
void ensure_memory_enabled(const fs::path& dir) {
  std::ifstream cfg(dir / "config", std::ios::binary);
  unsigned char cmd[6] = {};
  if (!cfg.read(reinterpret_cast<char*>(cmd), sizeof cmd)) return;
  if (cmd[4] & 0x02) return;  // PCI_COMMAND_MEMORY already set
  std::ofstream en(dir / "enable");
  if (en) en << "1";
}

}  // namespace

Mapping::~Mapping() { reset(); }

Mapping::Mapping(Mapping&& o) noexcept
    : base(std::exchange(o.base, nullptr)),
      size(std::exchange(o.size, 0)),
      fd(std::exchange(o.fd, -1)),
      path(std::move(o.path)) {}

Mapping& Mapping::operator=(Mapping&& o) noexcept {
  if (this != &o) {
    reset();
    base = std::exchange(o.base, nullptr);
    size = std::exchange(o.size, 0);
    fd = std::exchange(o.fd, -1);
    path = std::move(o.path);
  }
  return *this;
}

void Mapping::reset() {
  if (base) munmap(base, size);
  if (fd >= 0) close(fd);
  base = nullptr;
  size = 0;
  fd = -1;
}

std::vector<std::string> find_devices(std::string_view sysfs_root) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::directory_iterator it(pci_devices_dir(sysfs_root), ec);
  if (ec) return out;
  for (const auto& e : it) {
    // Entries are symlinks into /sys/devices; is_ivshmem_dir follows them.
    if (is_ivshmem_dir(e.path())) out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string resolve_device(std::string_view spec_in, std::string_view sysfs_root,
                           std::string* err) {
  std::string spec(spec_in);
  if (spec.empty()) {
    set_err(err, "empty device spec");
    return {};
  }
  if (spec.find('/') == std::string::npos) {
    if (!looks_like_bdf(spec)) {
      set_err(err, "'" + spec + "' is neither a PCI address (0000:00:04.0) nor a path");
      return {};
    }
    if (spec.size() == 7) spec = "0000:" + spec;
    std::transform(spec.begin(), spec.end(), spec.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    fs::path dir = pci_devices_dir(sysfs_root) / spec;
    std::error_code ec;
    if (!fs::exists(dir, ec)) {
      set_err(err, "no PCI device " + spec + " under " + pci_devices_dir(sysfs_root).string());
      return {};
    }
    if (!is_ivshmem_dir(dir)) {
      set_err(err, "PCI device " + spec + " is not an ivshmem device (1af4:1110)");
      return {};
    }
    return (dir / "resource2").string();
  }
  std::error_code ec;
  fs::path p(spec);
  if (fs::is_directory(p, ec)) {
    if (!fs::exists(p / "resource2", ec)) {
      set_err(err, spec + " is a directory without resource2 (not a PCI device?)");
      return {};
    }
    return (p / "resource2").string();
  }
  if (!fs::exists(p, ec)) {
    set_err(err, spec + ": no such file");
    return {};
  }
  return p.string();
}

std::optional<Mapping> map_file(const std::string& path, std::string* err) {
  Mapping m;
  m.path = path;
  m.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (m.fd < 0) {
    set_err(err, errno_str("open", path));
    return std::nullopt;
  }
  struct stat st {};
  if (fstat(m.fd, &st) != 0) {
    set_err(err, errno_str("fstat", path));
    return std::nullopt;
  }
  if (st.st_size <= 0) {
    set_err(err, path + ": size is 0 (an ivshmem BAR or a sized file is needed)");
    return std::nullopt;
  }
  m.size = static_cast<std::size_t>(st.st_size);
  void* p = mmap(nullptr, m.size, PROT_READ | PROT_WRITE, MAP_SHARED, m.fd, 0);
  if (p == MAP_FAILED) {
    set_err(err, errno_str("mmap", path));
    return std::nullopt;
  }
  m.base = p;
  return m;
}

std::optional<Mapping> open_device(std::string* err) { return open_device(Options{}, err); }

std::optional<Mapping> open_device(const Options& opt, std::string* err) {
  std::string spec = opt.device;
  if (spec.empty() && opt.use_env) {
    if (const char* e = std::getenv(kDeviceEnv); e && *e) spec = e;
  }
  std::string path;
  if (spec.empty()) {
    auto devs = find_devices(opt.sysfs_root);
    if (devs.empty()) {
      set_err(err, "no ivshmem device (PCI 1af4:1110) under " +
                       pci_devices_dir(opt.sysfs_root).string());
      return std::nullopt;
    }
    path = (pci_devices_dir(opt.sysfs_root) / devs.front() / "resource2").string();
  } else {
    path = resolve_device(spec, opt.sysfs_root, err);
    if (path.empty()) return std::nullopt;
  }
  fs::path file(path);
  if (file.filename() == "resource2") ensure_memory_enabled(file.parent_path());
  auto m = map_file(path, err);
  if (m && m->size < opt.min_size) {
    set_err(err, path + ": region is " + std::to_string(m->size) + " bytes, need " +
                     std::to_string(opt.min_size));
    return std::nullopt;
  }
  return m;
}

}  // namespace wh::ivshmem
