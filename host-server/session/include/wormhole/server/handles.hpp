// Handle tables: the only way a guest names a server object. A handle is
// (kind tag, generation, slot): a stale handle (freed slot, reused later)
// or one of another kind never resolves. Tables are bounded so a guest
// cannot exhaust server memory by creating objects.
#pragma once

#include <cstdint>
#include <algorithm>
#include <memory>
#include <vector>

namespace wh::server {

template <class T>
class HandleTable {
 public:
  HandleTable(uint8_t tag, uint32_t limit) : tag_(tag), limit_(limit) {}

  // 0 when the table is full.
  uint64_t add(std::unique_ptr<T> obj) {
    uint32_t idx;
    if (!free_.empty()) {
      idx = free_.back();
      free_.pop_back();
    } else {
      if (slots_.size() >= limit_) return 0;
      idx = uint32_t(slots_.size());
      slots_.emplace_back();
    }
    Slot& s = slots_[idx];
    s.gen = (s.gen + 1) & 0xFFFFFF;
    if (s.gen == 0) s.gen = 1;
    s.obj = std::move(obj);
    live_++;
    return (uint64_t(tag_) << 56) | (uint64_t(s.gen) << 32) | (idx + 1);
  }
  // A restore: `obj` under exactly the handle `h` it had. False when h is
  // not of this table, past its limit or its slot is taken.
  bool add_at(uint64_t h, std::unique_ptr<T> obj) {
    const uint64_t idx = h & 0xFFFFFFFF, gen = (h >> 32) & 0xFFFFFF;
    if ((h >> 56) != tag_ || idx == 0 || idx > limit_ || gen == 0 || !obj) return false;
    while (slots_.size() < idx) {
      free_.push_back(uint32_t(slots_.size()));
      slots_.emplace_back();
    }
    Slot& s = slots_[idx - 1];
    if (s.obj) return false;
    std::erase(free_, uint32_t(idx - 1));
    s.gen = uint32_t(gen);
    s.obj = std::move(obj);
    live_++;
    return true;
  }
  // A restore: the object made under `from` (by the usual create path, with
  // its checks) moves to the handle `to` it had.
  bool rename(uint64_t from, uint64_t to) {
    std::unique_ptr<T> obj = take(from);
    return obj && add_at(to, std::move(obj));
  }
  T* get(uint64_t h) const {
    const Slot* s = slot(h);
    return s ? s->obj.get() : nullptr;
  }
  std::unique_ptr<T> take(uint64_t h) {
    Slot* s = const_cast<Slot*>(slot(h));
    if (!s) return nullptr;
    free_.push_back(uint32_t((h & 0xFFFFFFFF) - 1));
    live_--;
    return std::move(s->obj);
  }
  template <class F> void for_each(F&& f) {
    for (size_t i = 0; i < slots_.size(); i++)
      if (slots_[i].obj)
        f((uint64_t(tag_) << 56) | (uint64_t(slots_[i].gen) << 32) | (i + 1), *slots_[i].obj);
  }
  size_t size() const { return live_; }
  void clear() {
    slots_.clear();
    free_.clear();
    live_ = 0;
  }

 private:
  struct Slot {
    std::unique_ptr<T> obj;
    uint32_t gen = 0;
  };
  const Slot* slot(uint64_t h) const {
    if ((h >> 56) != tag_) return nullptr;
    uint64_t idx = h & 0xFFFFFFFF;
    if (idx == 0 || idx > slots_.size()) return nullptr;
    const Slot& s = slots_[idx - 1];
    if (!s.obj || s.gen != ((h >> 32) & 0xFFFFFF)) return nullptr;
    return &s;
  }
  uint8_t tag_;
  uint32_t limit_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
  size_t live_ = 0;
};

}  // namespace wh::server
