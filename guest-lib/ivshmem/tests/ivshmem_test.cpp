// wh_ivshmem against a fake sysfs tree: discovery, WORMHOLE_DEVICE forms,
// and mapping (a plain file stands in for resource2).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "wormhole/ivshmem.hpp"

namespace fs = std::filesystem;
using namespace wh::ivshmem;

namespace {

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("wh-ivshmem-test-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "bus/pci/devices");
    ::unsetenv(kDeviceEnv);
  }
  void TearDown() override {
    ::unsetenv(kDeviceEnv);
    fs::remove_all(root_);
  }
  static void write(const fs::path& p, const std::string& s) {
    std::ofstream(p) << s;
  }
  // Like the kernel: the real directory lives under devices/, bus/pci/devices
  // holds a symlink to it.
  fs::path add_dev(const std::string& bdf, const std::string& vendor, const std::string& device,
                   std::size_t bar2 = 0, bool mem_enabled = true) {
    fs::path real = root_ / "devices/pci0000:00" / bdf;
    fs::create_directories(real);
    write(real / "vendor", vendor + "\n");
    write(real / "device", device + "\n");
    std::string cfg(64, '\0');
    cfg[4] = mem_enabled ? 0x02 : 0x00;
    std::ofstream(real / "config", std::ios::binary).write(cfg.data(), cfg.size());
    if (bar2) {
      std::ofstream f(real / "resource2", std::ios::binary);
      f.seekp(static_cast<std::streamoff>(bar2 - 1));
      f.put('\0');
    }
    fs::create_directory_symlink(real, root_ / "bus/pci/devices" / bdf);
    return real;
  }
  fs::path root_;
};

TEST_F(FakeSysfs, FindsOnlyIvshmemDevicesSorted) {
  add_dev("0000:00:01.0", "0x8086", "0x7000");        // ISA bridge
  add_dev("0000:00:05.0", "0x1af4", "0x1110", 4096);  // ivshmem
  add_dev("0000:00:03.0", "0x1af4", "0x1000");        // virtio-net: same vendor
  add_dev("0000:00:04.0", "0x1af4", "0x1110", 4096);  // ivshmem
  auto devs = find_devices(root_.string());
  ASSERT_EQ(devs.size(), 2u);
  EXPECT_EQ(devs[0], "0000:00:04.0");
  EXPECT_EQ(devs[1], "0000:00:05.0");
}

TEST_F(FakeSysfs, NoTreeOrNoDevice) {
  EXPECT_TRUE(find_devices((root_ / "nope").string()).empty());
  add_dev("0000:00:02.0", "0x1234", "0x1111");
  EXPECT_TRUE(find_devices(root_.string()).empty());
  Options o;
  o.sysfs_root = root_.string();
  std::string err;
  EXPECT_FALSE(open_device(o, &err));
  EXPECT_NE(err.find("no ivshmem device"), std::string::npos) << err;
}

TEST_F(FakeSysfs, MalformedIdFilesAreIgnored) {
  add_dev("0000:00:04.0", "garbage", "0x1110");
  add_dev("0000:00:05.0", "", "");
  EXPECT_TRUE(find_devices(root_.string()).empty());
}

TEST_F(FakeSysfs, OpensFirstDeviceAndMapsWholeBar) {
  add_dev("0000:00:04.0", "0x1af4", "0x1110", 1 << 16);
  add_dev("0000:00:05.0", "0x1af4", "0x1110", 1 << 12);
  Options o;
  o.sysfs_root = root_.string();
  std::string err;
  auto m = open_device(o, &err);
  ASSERT_TRUE(m) << err;
  EXPECT_EQ(m->size, 1u << 16);
  EXPECT_NE(m->path.find("0000:00:04.0/resource2"), std::string::npos);
  EXPECT_GE(m->fd, 0);
  // Writes reach the file: it is a shared mapping.
  static_cast<char*>(m->base)[100] = 'W';
  std::ifstream f(root_ / "bus/pci/devices/0000:00:04.0/resource2", std::ios::binary);
  f.seekg(100);
  EXPECT_EQ(f.get(), 'W');
}

TEST_F(FakeSysfs, EnvSelectsByBdfShortBdfAndPath) {
  add_dev("0000:00:04.0", "0x1af4", "0x1110", 4096);
  fs::path d5 = add_dev("0000:00:05.0", "0x1af4", "0x1110", 8192);
  Options o;
  o.sysfs_root = root_.string();
  std::string err;
  for (const char* spec : {"0000:00:05.0", "00:05.0", "0000:00:05.0"}) {
    ::setenv(kDeviceEnv, spec, 1);
    auto m = open_device(o, &err);
    ASSERT_TRUE(m) << spec << ": " << err;
    EXPECT_EQ(m->size, 8192u) << spec;
  }
  ::setenv(kDeviceEnv, d5.c_str(), 1);  // device directory
  auto m = open_device(o, &err);
  ASSERT_TRUE(m) << err;
  EXPECT_EQ(m->size, 8192u);
  ::setenv(kDeviceEnv, (d5 / "resource2").c_str(), 1);  // the file itself
  m = open_device(o, &err);
  ASSERT_TRUE(m) << err;
  EXPECT_EQ(m->size, 8192u);
  // Options::device wins over the environment.
  o.device = "00:04.0";
  m = open_device(o, &err);
  ASSERT_TRUE(m) << err;
  EXPECT_EQ(m->size, 4096u);
}

TEST_F(FakeSysfs, EnvRejectsWrongDevices) {
  add_dev("0000:00:03.0", "0x1af4", "0x1000", 4096);  // virtio, not ivshmem
  Options o;
  o.sysfs_root = root_.string();
  std::string err;
  ::setenv(kDeviceEnv, "0000:00:03.0", 1);
  EXPECT_FALSE(open_device(o, &err));
  EXPECT_NE(err.find("not an ivshmem"), std::string::npos) << err;
  ::setenv(kDeviceEnv, "0000:00:09.0", 1);
  EXPECT_FALSE(open_device(o, &err));
  EXPECT_NE(err.find("no PCI device"), std::string::npos) << err;
  ::setenv(kDeviceEnv, "banana", 1);
  EXPECT_FALSE(open_device(o, &err));
  EXPECT_NE(err.find("neither"), std::string::npos) << err;
  ::setenv(kDeviceEnv, (root_ / "missing-file").c_str(), 1);
  EXPECT_FALSE(open_device(o, &err));
  ::setenv(kDeviceEnv, root_.c_str(), 1);  // a directory without resource2
  EXPECT_FALSE(open_device(o, &err));
  EXPECT_NE(err.find("resource2"), std::string::npos) << err;
}

TEST_F(FakeSysfs, PlainFileAsDeviceAndMinSize) {
  fs::path f = root_ / "shm-file";
  {
    std::ofstream o(f, std::ios::binary);
    o.seekp((1 << 20) - 1);
    o.put('\0');
  }
  Options o;
  o.sysfs_root = root_.string();
  o.device = f.string();
  std::string err;
  auto m = open_device(o, &err);
  ASSERT_TRUE(m) << err;
  EXPECT_EQ(m->size, 1u << 20);
  o.min_size = 2 << 20;
  EXPECT_FALSE(open_device(o, &err));
  EXPECT_NE(err.find("need"), std::string::npos) << err;
  // An empty file cannot be mapped.
  std::ofstream(root_ / "empty");
  o.device = (root_ / "empty").string();
  o.min_size = 0;
  EXPECT_FALSE(open_device(o, &err));
}

TEST_F(FakeSysfs, DisabledDeviceIsEnabledThroughSysfs) {
  fs::path d = add_dev("0000:00:04.0", "0x1af4", "0x1110", 4096, /*mem_enabled=*/false);
  write(d / "enable", "0\n");
  Options o;
  o.sysfs_root = root_.string();
  std::string err;
  ASSERT_TRUE(open_device(o, &err)) << err;
  std::ifstream en(d / "enable");
  std::string v;
  en >> v;
  EXPECT_EQ(v, "1");
}

TEST(Mapping, MoveOnlyAndReset) {
  fs::path f = fs::temp_directory_path() / ("wh-ivshmem-move-" + std::to_string(::getpid()));
  {
    std::ofstream o(f, std::ios::binary);
    o.seekp(4095);
    o.put('\0');
  }
  std::string err;
  auto m = map_file(f.string(), &err);
  ASSERT_TRUE(m) << err;
  Mapping a = std::move(*m);
  EXPECT_EQ(m->base, nullptr);
  EXPECT_EQ(m->fd, -1);
  ASSERT_NE(a.base, nullptr);
  Mapping b;
  b = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_TRUE(b);
  b.reset();
  EXPECT_FALSE(b);
  EXPECT_EQ(b.size, 0u);
  fs::remove(f);
}

}  // namespace
