// wh-png-check FILE.png [MIN_WIDTH MIN_HEIGHT]: exits 0 when FILE is a
// well-formed PNG that decodes, and prints its size and colours; 1 (with the
// reason) otherwise. Checked: the signature; every chunk's length and CRC;
// IHDR first with a valid size, bit depth and colour type (8-bit, no
// interlace: what gnuplot writes); the IDAT data inflates to exactly the
// rows the header announces, each with a valid filter byte; IEND last. The
// rows are unfiltered and the distinct pixel values counted: a plot has
// more than one (a blank image fails). Used by the training tests on the
// loss plots of wh-cnn and wh-gpt.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <vector>

static int fail(const std::string& why) {
  std::fprintf(stderr, "wh-png-check: %s\n", why.c_str());
  return 1;
}
static uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) return fail("usage: wh-png-check FILE.png [MIN_WIDTH MIN_HEIGHT]");
  std::ifstream f(argv[1], std::ios::binary);
  if (!f) return fail(std::string("cannot open ") + argv[1]);
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (b.size() < 8 || std::memcmp(b.data(), sig, 8) != 0) return fail("no PNG signature");
  size_t off = 8;
  uint32_t w = 0, h = 0;
  int depth = 0, ctype = -1, chunks = 0;
  bool iend = false;
  std::vector<uint8_t> idat;
  while (off < b.size()) {
    if (iend) return fail("data after IEND");
    if (b.size() - off < 12) return fail("truncated chunk at byte " + std::to_string(off));
    const uint32_t len = be32(&b[off]);
    if (len > b.size() - off - 12) return fail("chunk length past the end at byte " + std::to_string(off));
    const std::string type(reinterpret_cast<const char*>(&b[off + 4]), 4);
    const uint32_t crc = uint32_t(crc32(0L, &b[off + 4], len + 4));
    if (crc != be32(&b[off + 8 + len])) return fail("bad CRC in chunk " + type);
    const uint8_t* d = &b[off + 8];
    if (chunks == 0 && type != "IHDR") return fail("first chunk is " + type + ", not IHDR");
    if (type == "IHDR") {
      if (chunks != 0 || len != 13) return fail("bad IHDR");
      w = be32(d), h = be32(d + 4), depth = d[8], ctype = d[9];
      if (w == 0 || h == 0 || w > 20000 || h > 20000) return fail("bad size");
      if (d[10] != 0 || d[11] != 0) return fail("unknown compression or filter method");
      if (d[12] != 0) return fail("interlaced (not checked by this tool)");
      if (depth != 8 || (ctype != 0 && ctype != 2 && ctype != 3 && ctype != 4 && ctype != 6))
        return fail("colour type " + std::to_string(ctype) + " depth " + std::to_string(depth) + " not handled");
    } else if (type == "IDAT") {
      idat.insert(idat.end(), d, d + len);
    } else if (type == "IEND") {
      iend = true;
    }
    chunks++;
    off += 12 + size_t(len);
  }
  if (!iend) return fail("no IEND");
  if (idat.empty()) return fail("no IDAT");
  const int channels = ctype == 0 || ctype == 3 ? 1 : ctype == 4 ? 2 : ctype == 2 ? 3 : 4;
  const size_t stride = size_t(w) * channels, want = (stride + 1) * h;
  std::vector<uint8_t> raw(want + 1);
  uLongf got = uLongf(raw.size());
  if (uncompress(raw.data(), &got, idat.data(), uLong(idat.size())) != Z_OK) return fail("IDAT does not inflate");
  if (got != want) return fail("IDAT holds " + std::to_string(got) + " bytes, the header wants " + std::to_string(want));
  // Unfilter (PNG filter types 0-4) and count distinct pixels.
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  std::set<std::string> colours;
  for (uint32_t y = 0; y < h; y++) {
    const uint8_t ft = raw[y * (stride + 1)];
    const uint8_t* src = &raw[y * (stride + 1) + 1];
    if (ft > 4) return fail("bad filter type in row " + std::to_string(y));
    for (size_t i = 0; i < stride; i++) {
      const int a = i >= size_t(channels) ? cur[i - channels] : 0, up = prev[i],
                c = i >= size_t(channels) ? prev[i - channels] : 0;
      int p = 0;
      switch (ft) {
        case 0: p = 0; break;
        case 1: p = a; break;
        case 2: p = up; break;
        case 3: p = (a + up) / 2; break;
        case 4: {
          const int e = a + up - c, pa = std::abs(e - a), pb = std::abs(e - up), pc = std::abs(e - c);
          p = pa <= pb && pa <= pc ? a : pb <= pc ? up : c;
          break;
        }
      }
      cur[i] = uint8_t(src[i] + p);
    }
    if (colours.size() < 1000)
      for (uint32_t x = 0; x < w; x++) colours.insert(std::string(reinterpret_cast<char*>(&cur[x * channels]), channels));
    prev.swap(cur);
  }
  if (colours.size() < 2) return fail("every pixel has the same value: a blank image");
  if (argc == 4 && (w < uint32_t(std::atoi(argv[2])) || h < uint32_t(std::atoi(argv[3]))))
    return fail("image " + std::to_string(w) + "x" + std::to_string(h) + " smaller than " + argv[2] + "x" + argv[3]);
  std::printf("%s: PNG %ux%u, colour type %d, %d chunks, %s%zu distinct pixel values\n", argv[1], w, h, ctype, chunks,
              colours.size() >= 1000 ? ">= " : "", colours.size());
  return 0;
}
