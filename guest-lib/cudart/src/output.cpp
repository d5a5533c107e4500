// Device output: what kernels print (printf), device-assert messages and
// fault details, written to this process's stdout and stderr where a GPU's
// driver writes them: at synchronising calls and at kernel launches.
//
// The server keeps the text and bumps `output_seq` in the data area's
// status page; a synchronising call compares that word with the last one it
// saw (one load, no round trip) and only then fetches the text
// (FetchOutput). stdio, not write(2), so that the text lands in order with
// what the application printed before the call.
#include <atomic>
#include <cstdio>

#include "state.hpp"

namespace wh::guest {

using namespace wh::proto;

namespace {
std::mutex g_output_mu;                  // one fetcher at a time, so chunks stay in order
std::atomic<uint64_t> g_output_seen{0};  // output_seq of the last complete fetch (written under g_output_mu)
}  // namespace

void flush_device_output(Connection* c) {
  auto* st = reinterpret_cast<DataAreaStatus*>(c->data().data());
  const uint64_t seq = __atomic_load_n(&st->output_seq, __ATOMIC_ACQUIRE);
  if (seq == g_output_seen.load(std::memory_order_relaxed)) return;  // the common case: nothing new
  std::lock_guard lk(g_output_mu);
  if (seq == g_output_seen.load(std::memory_order_relaxed)) return;
  const uint32_t want = c->max_msg() - uint32_t(sizeof(FetchOutputResp));
  // The server's queue is bounded (kPendingOutputMax); so is this loop.
  const uint64_t max_fetches = kPendingOutputMax / 1024 + 16;
  std::vector<uint8_t> text;
  for (uint64_t i = 0; i < max_fetches; i++) {
    FetchOutputResp rs{};
    text.clear();
    if (c->call<Op::FetchOutput>({want, 0}, &rs, {}, &text) != cudaSuccess) return;
    if (text.size() > want || (rs.stream != kOutputStdout && rs.stream != kOutputStderr && !text.empty())) return;
    if (!text.empty()) {
      FILE* f = rs.stream == kOutputStdout ? stdout : stderr;
      std::fwrite(text.data(), 1, text.size(), f);
      std::fflush(f);
    }
    if (!rs.more) {
      g_output_seen.store(rs.seq, std::memory_order_relaxed);
      return;
    }
    if (text.empty()) return;  // no progress: try again at the next call
  }
}

}  // namespace wh::guest
