// wh_ivshmem: find QEMU's ivshmem-plain device (PCI 1af4:1110) and map its
// BAR2, the memory that the host shares with this guest.
//
// Inside a guest the BAR is mapped through sysfs
// (/sys/bus/pci/devices/<bdf>/resource2): no kernel driver is needed.
// WORMHOLE_DEVICE selects a device explicitly:
//   * a PCI address: "0000:00:04.0" or "00:04.0"
//   * a path: a sysfs device directory (…/0000:00:04.0), its resource2 file,
//     or any plain file (e.g. the host's /dev/shm/<file> backing a VM),
//     which lets the same code run on the host side and in tests.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace wh::ivshmem {

inline constexpr unsigned kVendorId = 0x1af4;  // Red Hat, Inc. (virtio/QEMU)
inline constexpr unsigned kDeviceId = 0x1110;  // Inter-VM shared memory
inline constexpr std::string_view kDefaultSysfsRoot = "/sys";
inline constexpr const char* kDeviceEnv = "WORMHOLE_DEVICE";

// A shared mapping; move-only, unmapped and closed on destruction.
struct Mapping {
  void* base = nullptr;
  std::size_t size = 0;
  int fd = -1;
  std::string path;  // the file that was mapped (resource2 or a plain file)

  Mapping() = default;
  ~Mapping();
  Mapping(Mapping&& o) noexcept;
  Mapping& operator=(Mapping&& o) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  explicit operator bool() const { return base != nullptr; }
  void reset();  // unmap and close now
};

struct Options {
  std::string sysfs_root{kDefaultSysfsRoot};  // parameter for tests
  // BDF or path as WORMHOLE_DEVICE takes it; empty = read WORMHOLE_DEVICE,
  // and if that is unset too, pick the first ivshmem device found.
  std::string device;
  bool use_env = true;          // consult WORMHOLE_DEVICE when device is empty
  std::size_t min_size = 0;     // fail if the region is smaller
};

// PCI addresses ("0000:00:04.0") of all ivshmem devices under
// <sysfs_root>/bus/pci/devices, sorted.
std::vector<std::string> find_devices(std::string_view sysfs_root = kDefaultSysfsRoot);

// The file to map for a device spec (BDF or path, see above). Empty and
// *err set when it does not resolve.
std::string resolve_device(std::string_view spec, std::string_view sysfs_root,
                           std::string* err);

// Map a file read/write shared, its whole length (st_size; for a sysfs
// resource file that is the BAR length).
std::optional<Mapping> map_file(const std::string& path, std::string* err);

// Find (or take WORMHOLE_DEVICE's) device and map its BAR2.
std::optional<Mapping> open_device(std::string* err);
std::optional<Mapping> open_device(const Options& opt, std::string* err);

}  // namespace wh::ivshmem
