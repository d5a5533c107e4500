// Region creation, mapping and validation of its header.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <random>
#include <utility>

#include "atomics.hpp"
#include "wormhole/ring.hpp"

namespace wh::ring {

namespace {
constexpr uint64_t kPage = 4096;
uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }
bool pow2(uint64_t v) { return v && !(v & (v - 1)); }
void set_err(std::string* err, std::string s) {
  if (err) *err = std::move(s);
}
uint32_t effective_max_msg(const RegionConfig& c) {
  uint32_t ring = std::min(c.req_size, c.resp_size);
  // A record plus a padding record must always fit into an empty ring.
  uint32_t cap = ring / 2 - sizeof(wh_msg_hdr);
  return c.max_msg ? std::min(c.max_msg, cap) : cap;
}
uint64_t chan_stride(const RegionConfig& c) {
  return round_up(WH_CHAN_HDR_SIZE + uint64_t(c.req_size) + c.resp_size, kPage) +
         round_up(c.data_size, kPage);
}
}  // namespace

const char* to_string(Status s) {
  switch (s) {
    case Status::Ok: return "ok";
    case Status::Empty: return "empty";
    case Status::Full: return "full";
    case Status::TooBig: return "message too big";
    case Status::Corrupt: return "channel corrupt";
    case Status::PeerDead: return "peer dead";
    case Status::Closed: return "channel closed";
    case Status::Timeout: return "timeout";
    case Status::Invalid: return "invalid argument";
  }
  return "?";
}

uint64_t Region::required_size(const RegionConfig& c) {
  return WH_REGION_HDR_SIZE + uint64_t(c.nchan) * chan_stride(c);
}

bool Region::format(void* base, size_t size, const RegionConfig& c, std::string* err) {
  if (!c.nchan || c.nchan > WH_MAX_CHANNELS) return set_err(err, "nchan out of range"), false;
  if (!pow2(c.req_size) || !pow2(c.resp_size) || c.req_size < 4096 || c.resp_size < 4096)
    return set_err(err, "ring sizes must be powers of two >= 4096"), false;
  if (c.hb_period_ms == 0 || c.hb_timeout_ms <= c.hb_period_ms)
    return set_err(err, "heartbeat timeout must exceed its period"), false;
  if (required_size(c) > size)
    return set_err(err, "region too small: need " + std::to_string(required_size(c)) +
                            " bytes, have " + std::to_string(size)),
           false;
  auto* h = static_cast<wh_region_hdr*>(base);
  // Invalidate first so a concurrent attacher never sees a half-made header.
  store_rel(&h->magic, 0u);
  std::memset(static_cast<uint8_t*>(base) + sizeof(uint32_t), 0, WH_REGION_HDR_SIZE - 4);
  h->version = WH_REGION_VERSION;
  h->hdr_size = WH_REGION_HDR_SIZE;
  h->features = c.features;
  h->region_size = size;
  h->nchan = c.nchan;
  h->chan_hdr_size = WH_CHAN_HDR_SIZE;
  h->chan_off = WH_REGION_HDR_SIZE;
  h->chan_stride = chan_stride(c);
  h->req_size = c.req_size;
  h->resp_size = c.resp_size;
  h->data_size = round_up(c.data_size, kPage);
  h->max_msg = effective_max_msg(c);
  h->hb_period_ms = c.hb_period_ms;
  h->hb_timeout_ms = c.hb_timeout_ms;
  h->server_epoch = std::random_device{}() | (uint64_t(std::random_device{}()) << 32);
  for (uint32_t i = 0; i < c.nchan; i++) {
    auto* ch = reinterpret_cast<wh_chan_hdr*>(static_cast<uint8_t*>(base) + h->chan_off +
                                              uint64_t(i) * h->chan_stride);
    std::memset(ch, 0, WH_CHAN_HDR_SIZE);
    ch->req_off = WH_CHAN_HDR_SIZE;
    ch->resp_off = WH_CHAN_HDR_SIZE + c.req_size;
    ch->data_off = round_up(WH_CHAN_HDR_SIZE + uint64_t(c.req_size) + c.resp_size, kPage);
    ch->generation = 1;
    store_rel(&ch->state, uint32_t(WH_CHAN_FREE));
  }
  store_rel(&h->magic, WH_REGION_MAGIC);
  return true;
}

bool Region::load_geometry(std::string* err) {
  if (size_ < WH_REGION_HDR_SIZE) return set_err(err, "region smaller than its header"), false;
  std::memcpy(&geo_, base_, sizeof(geo_));
  const auto& g = geo_;
  auto bad = [&](const char* what) { return set_err(err, std::string("bad region header: ") + what), false; };
  if (g.magic != WH_REGION_MAGIC) return bad("magic");
  if (g.version != WH_REGION_VERSION) return bad("layout version");
  if (g.hdr_size != WH_REGION_HDR_SIZE || g.chan_hdr_size != WH_CHAN_HDR_SIZE) return bad("header sizes");
  if (g.region_size > size_) return bad("region_size exceeds the mapping");
  if (!g.nchan || g.nchan > WH_MAX_CHANNELS) return bad("nchan");
  if (!pow2(g.req_size) || !pow2(g.resp_size) || g.req_size < 4096 || g.resp_size < 4096 ||
      g.req_size > (1u << 30) || g.resp_size > (1u << 30))
    return bad("ring sizes");
  if (g.chan_off < WH_REGION_HDR_SIZE || g.chan_off % kPage || g.chan_stride % kPage ||
      g.data_size % kPage || g.data_size > (1ull << 40))
    return bad("alignment");
  uint64_t min_stride = round_up(WH_CHAN_HDR_SIZE + uint64_t(g.req_size) + g.resp_size, kPage) + g.data_size;
  if (g.chan_stride < min_stride || g.chan_stride > (1ull << 41)) return bad("channel stride");
  // chan_off is a peer-written 64-bit word: bound it before adding, so the
  // sum cannot wrap around (nchan * chan_stride <= 2^8 * 2^41 cannot).
  if (g.chan_off > g.region_size ||
      uint64_t(g.nchan) * g.chan_stride > g.region_size - g.chan_off)
    return bad("channels exceed region");
  if (g.max_msg == 0 || g.max_msg > std::min(g.req_size, g.resp_size) / 2 - sizeof(wh_msg_hdr))
    return bad("max_msg");
  if (g.hb_period_ms == 0 || g.hb_timeout_ms <= g.hb_period_ms || g.hb_timeout_ms > 600000)
    return bad("heartbeat");
  return true;
}

wh_chan_hdr* Region::channel(uint32_t i) const {
  return reinterpret_cast<wh_chan_hdr*>(channel_base(i));
}
uint8_t* Region::channel_base(uint32_t i) const {
  if (i >= geo_.nchan) return nullptr;
  return base_ + geo_.chan_off + uint64_t(i) * geo_.chan_stride;
}

Region::Region(Region&& o) noexcept { *this = std::move(o); }
Region& Region::operator=(Region&& o) noexcept {
  if (this != &o) {
    this->~Region();
    base_ = std::exchange(o.base_, nullptr);
    size_ = std::exchange(o.size_, 0);
    fd_ = std::exchange(o.fd_, -1);
    owns_map_ = std::exchange(o.owns_map_, false);
    geo_ = o.geo_;
  }
  return *this;
}
Region::~Region() {
  if (owns_map_ && base_) munmap(base_, size_);
  if (fd_ >= 0) close(fd_);
  base_ = nullptr;
  fd_ = -1;
}

std::unique_ptr<Region> Region::adopt(void* base, size_t size, int fd, bool owns_map,
                                      bool do_format, const RegionConfig& cfg,
                                      std::string* err) {
  auto r = std::unique_ptr<Region>(new Region());
  r->base_ = static_cast<uint8_t*>(base);
  r->size_ = size;
  r->fd_ = fd;
  r->owns_map_ = owns_map;
  if (do_format && !format(base, size, cfg, err)) return nullptr;  // ~Region releases
  if (!r->load_geometry(err)) return nullptr;
  return r;
}

std::unique_ptr<Region> Region::attach_memory(void* base, size_t size, bool do_format,
                                              const RegionConfig& cfg, std::string* err) {
  if (!base || (reinterpret_cast<uintptr_t>(base) & (kPage - 1)))
    return set_err(err, "region memory must be page aligned"), nullptr;
  return adopt(base, size, -1, false, do_format, cfg, err);
}

static std::unique_ptr<Region> map_fd(int fd, uint64_t want_size, const RegionConfig* cfg,
                                      std::string* err) {
  if (want_size && ftruncate(fd, off_t(want_size)) != 0) {
    set_err(err, std::string("ftruncate: ") + strerror(errno));
    close(fd);
    return nullptr;
  }
  struct stat st{};
  if (fstat(fd, &st) != 0 || size_t(st.st_size) < WH_REGION_HDR_SIZE) {
    set_err(err, "region file missing or too small");
    close(fd);
    return nullptr;
  }
  size_t size = size_t(st.st_size);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    set_err(err, std::string("mmap: ") + strerror(errno));
    close(fd);
    return nullptr;
  }
  return Region::adopt(p, size, fd, true, cfg != nullptr, cfg ? *cfg : RegionConfig{}, err);
}

// The memfd goes to a client that may be hostile: sealed at its size, so
// that it can neither shrink it (the server's next touch of a lost page
// would be a SIGBUS, ending every session) nor grow it. Its bytes stay
// writable by both sides, which is what the region is for.
std::unique_ptr<Region> Region::create_memfd(const char* name, const RegionConfig& cfg,
                                             std::string* err) {
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return set_err(err, std::string("memfd_create: ") + strerror(errno)), nullptr;
  if (ftruncate(fd, off_t(required_size(cfg))) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    set_err(err, std::string("memfd size/seals: ") + strerror(errno));
    close(fd);
    return nullptr;
  }
  return map_fd(fd, 0, &cfg, err);
}

std::unique_ptr<Region> Region::create_file(const std::string& path, const RegionConfig& cfg,
                                            std::string* err) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return set_err(err, "open " + path + ": " + strerror(errno)), nullptr;
  struct stat st{};
  fstat(fd, &st);
  // An existing file (a QEMU memory-backend-file) keeps its size if large enough.
  uint64_t need = required_size(cfg);
  return map_fd(fd, uint64_t(st.st_size) >= need ? 0 : need, &cfg, err);
}

std::unique_ptr<Region> Region::attach_fd(int fd, std::string* err) {
  int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (dup < 0) return set_err(err, std::string("dup: ") + strerror(errno)), nullptr;
  return map_fd(dup, 0, nullptr, err);
}

std::unique_ptr<Region> Region::attach_file(const std::string& path, std::string* err) {
  int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return set_err(err, "open " + path + ": " + strerror(errno)), nullptr;
  return map_fd(fd, 0, nullptr, err);
}

}  // namespace wh::ring
