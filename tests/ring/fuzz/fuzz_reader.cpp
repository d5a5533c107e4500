// libFuzzer target: RingReader over arbitrary bytes. The input is a script:
// a ring image (4096 bytes, in a buffer exactly that big so ASan catches any
// access outside it) followed by 8-byte tail values that a hostile producer
// publishes between reads. The reader must return Ok/Empty/Corrupt, never
// touch memory outside the ring, never hand out a payload above max_msg, and
// never move its head past the committed tail. The ring's tail block carries
// a copy (region.h, "The tail block's copy") whose words are the image's
// last WH_COPY_MAX bytes; a step with bit 30 set makes the copy claim the
// new tail.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "wormhole/ring.hpp"

using namespace wh::ring;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint32_t kRing = 4096, kMax = kRing / 2 - 32;
  if (size < 1) return 0;
  // Script: k (1 byte), k tail steps (4 bytes each), then the ring image.
  size_t k = data[0] & 15;
  data++;
  size--;
  if (size < 4 * k) return 0;
  uint32_t steps[16];
  std::memcpy(steps, data, 4 * k);
  data += 4 * k;
  size -= 4 * k;
  auto ring = std::make_unique<uint8_t[]>(kRing);  // exactly the ring: ASan bounds
  std::memset(ring.get(), 0, kRing);
  std::memcpy(ring.get(), data, size < kRing ? size : kRing);
  alignas(64) uint64_t line[WH_TAIL_BLOCK / 8] = {};  // tail, copy_tail, copy[]
  uint64_t& tail = line[0];
  uint64_t head = 0;
  std::memcpy(line + 2, ring.get() + kRing - WH_COPY_MAX, WH_COPY_MAX);
  RingReader r(ring.get(), kRing, &tail, &head, kMax, &line[1]);
  Message m;
  uint64_t last_head = 0;
  for (size_t j = 0; j < k; j++) {
    // Mostly plausible forward steps; a set top bit publishes a raw value.
    tail = (steps[j] & 0x80000000u) ? uint64_t(steps[j]) << (steps[j] & 31)
                                    : tail + (steps[j] & 0x1fff);
    if (steps[j] & 0x40000000u) line[1] = tail;
    for (int i = 0; i < 256; i++) {
      Status s = r.read(m);
      if (s == Status::Ok) {
        if (m.payload.size() > kMax || m.hdr.magic != WH_MSG_MAGIC || m.hdr.opcode == WH_OP_PAD)
          abort();
        if (head < last_head || head > tail || head - last_head > kRing) abort();
        last_head = head;
        continue;
      }
      if (s != Status::Empty && s != Status::Corrupt) abort();
      break;
    }
  }
  return 0;
}
