// Opcodes never move: every operation named in a lock file (proto/opcodes.lock
// for the session's own tables, libs/<name>/opcodes.lock for each library) keeps the
// opcode written there (a client built against an older table of the same
// protocol version must reach the same functions), every operation of the
// table is in the lock (a new one is appended to it with the opcode the
// table gave it), and each library's operations lie in its own block.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "wormhole/proto/wire.hpp"

using namespace wh::proto;

namespace {

struct Locked {
  unsigned code;
  std::string file;
};

// Every lock file (WH_OPCODES_LOCKS: paths separated by ';').
std::map<std::string, Locked> read_lock() {
  std::map<std::string, Locked> m;
  std::istringstream files(WH_OPCODES_LOCKS);
  std::string path;
  while (std::getline(files, path, ';')) {
    std::ifstream f(path);
    std::string line;
    while (std::getline(f, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream in(line);
      std::string name, code;
      in >> name >> code;
      m[name] = Locked{unsigned(std::stoul(code, nullptr, 16)), path};
    }
  }
  return m;
}

// The lock file of the library whose block holds `code`.
std::string lock_file_for(const std::map<std::string, Locked>& lock, unsigned code) {
  for (const auto& [name, l] : lock)
    if (l.code / kOpBlock == code / kOpBlock) return l.file;
  return "the lock file of its library";
}

TEST(Opcodes, LockedOpcodesNeverMove) {
  const auto lock = read_lock();
  ASSERT_GT(lock.size(), 100u) << "cannot read " << WH_OPCODES_LOCKS;
  std::map<std::string, unsigned> now;
  for (size_t i = 1; i < kOpCount; i++) now[op_name(kAllOps[i])] = kAllOps[i];
  for (const auto& [name, l] : lock) {
    const unsigned code = l.code;
    auto it = now.find(name);
    ASSERT_NE(it, now.end()) << name << " (locked at " << std::hex << code
                             << ") is gone from the table: an opcode is never removed or renamed";
    EXPECT_EQ(it->second, code) << name << " moved: add functions only at the end of their library's table";
  }
  for (const auto& [name, code] : now)
    EXPECT_TRUE(lock.count(name)) << name << " is new: append \"" << name << " 0x" << std::hex << code
                                  << "\" to " << lock_file_for(lock, code);
}

// A few ids written out, so that a change of the scheme itself is noticed
// here as well as in the lock.
TEST(Opcodes, KnownIds) {
  EXPECT_EQ(uint16_t(Op::GetDeviceCount), 0x0001);
  EXPECT_EQ(uint16_t(Op::BlasCreate), 0x0200);
  EXPECT_EQ(uint16_t(Op::FftPlan), 0x0400);
  EXPECT_EQ(uint16_t(Op::LtCreate), 0x0600);
  EXPECT_EQ(uint16_t(Op::RandCreate), 0x0800);
  EXPECT_EQ(uint16_t(Op::DnnCreate), 0x0A00);
  EXPECT_EQ(uint16_t(Op::DataAreaWrite), 0x0C00);
  EXPECT_EQ(uint16_t(Op::PeerTicket), 0x0E00);
  EXPECT_EQ(uint16_t(Op::NvmlUsage), 0x1000);
  EXPECT_EQ(op_index(0), 0);
  EXPECT_EQ(op_index(uint16_t(kOpBlock - 1)), -1);
  EXPECT_EQ(op_index(uint16_t(kOpLimit)), -1);
  EXPECT_EQ(op_index(0xFFFF), -1);
  for (size_t i = 0; i < kOpCount; i++) EXPECT_EQ(op_index(kAllOps[i]), int(i));
}

}  // namespace
