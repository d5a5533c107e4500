// The Prometheus endpoint (--metrics ADDR:PORT): GET /metrics answers the
// text exposition format, built from the server's counters at each scrape.
#include <httplib.h>
#include <spdlog/spdlog.h>

#include <sstream>

#include "server.hpp"
#include "wormhole/proto/dispatch.hpp"
#include "wormhole/ptx/engine.hpp"

namespace wh::server {

struct Server::Metrics {
  httplib::Server http;
};

namespace {

void head(std::ostringstream& o, const char* name, const char* type, const char* help) {
  o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n';
}

// A label value: backslash, quote and newline escaped.
std::string esc(const std::string& v) {
  std::string r;
  for (char c : v) {
    if (c == '\\' || c == '"') r += '\\', r += c;
    else if (c == '\n') r += "\\n";
    else r += c;
  }
  return r;
}

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

}  // namespace

std::string Server::metrics_text() {
  std::ostringstream o;
  const double k = Stats::ns_per_tick();
  struct Row {
    std::string labels;
    uint64_t calls, errors, in, out, device, kernels, kernel_ns, thread_instructions;
    double uptime;
  };
  std::vector<Row> rows;
  {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard lk(live_mu_);
    for (const Live& l : live_) {
      const SessionCounters& c = l.s->counters();
      std::string lab = "session=\"" + std::to_string(l.s->id()) + "\",pid=\"" + std::to_string(l.pid) + "\"";
      lab += ",vm=\"" + esc(l.vm) + "\"";
      rows.push_back({lab, c.calls.load(), c.errors.load(), c.bytes_in.load(), c.bytes_out.load(),
                      c.device_bytes.load(), c.kernels.load(), c.kernel_ns.load(), c.thread_instructions.load(),
                      std::chrono::duration<double>(now - l.since).count()});
    }
  }
  uint64_t device = 0;
  for (auto& r : rows) device += r.device;

  head(o, "wormhole_sessions", "gauge", "Sessions being served.");
  o << "wormhole_sessions " << rows.size() << '\n';
  head(o, "wormhole_sessions_started_total", "counter", "Sessions started since the server started.");
  o << "wormhole_sessions_started_total " << stats_.sessions.load() << '\n';
  head(o, "wormhole_draining", "gauge", "1 while the server refuses new sessions (wormholectl drain).");
  o << "wormhole_draining " << (draining_ ? 1 : 0) << '\n';
  head(o, "wormhole_device_memory_bytes", "gauge", "Device memory held by all sessions.");
  o << "wormhole_device_memory_bytes " << device << '\n';
  head(o, "wormhole_rejected_requests_total", "counter", "Malformed or invalid requests.");
  o << "wormhole_rejected_requests_total " << stats_.rejected.load() << '\n';
  head(o, "wormhole_copy_bytes_total", "counter", "Bytes copied by memcpy calls, by direction.");
  o << "wormhole_copy_bytes_total{direction=\"htod\"} " << stats_.bytes_htod.load() << '\n';
  o << "wormhole_copy_bytes_total{direction=\"dtoh\"} " << stats_.bytes_dtoh.load() << '\n';
  o << "wormhole_copy_bytes_total{direction=\"dtod\"} " << stats_.bytes_dtod.load() << '\n';
  head(o, "wormhole_peer_copy_bytes_total", "counter",
       "Bytes of peer copies between servers: received from other servers, pushed to them.");
  o << "wormhole_peer_copy_bytes_total{direction=\"in\"} " << stats_.bytes_peer_in.load() << '\n';
  o << "wormhole_peer_copy_bytes_total{direction=\"out\"} " << stats_.bytes_peer_out.load() << '\n';

  const auto cs = wh::ptx::compile_stats();
  head(o, "wormhole_ptx_compiled_kernels_total", "counter", "Kernels the sim device's PTX compiler compiled to native code.");
  o << "wormhole_ptx_compiled_kernels_total " << cs.kernels << '\n';
  head(o, "wormhole_ptx_compiled_instructions_total", "counter", "PTX instructions compiled to native code.");
  o << "wormhole_ptx_compiled_instructions_total " << cs.instructions << '\n';
  head(o, "wormhole_ptx_compile_seconds_total", "counter", "Time the PTX compiler spent compiling.");
  o << "wormhole_ptx_compile_seconds_total " << num(cs.seconds) << '\n';
  head(o, "wormhole_ptx_module_cache_hits_total", "counter",
       "Module loads that found the module parsed (and compiled as far as it ran) in the compile cache.");
  o << "wormhole_ptx_module_cache_hits_total " << cs.shared_loads << '\n';

  head(o, "wormhole_session_calls_total", "counter", "Calls a live session made.");
  for (auto& r : rows) o << "wormhole_session_calls_total{" << r.labels << "} " << r.calls << '\n';
  head(o, "wormhole_session_errors_total", "counter", "Calls of a live session that failed.");
  for (auto& r : rows) o << "wormhole_session_errors_total{" << r.labels << "} " << r.errors << '\n';
  head(o, "wormhole_session_received_bytes_total", "counter",
       "Bytes a live session sent: requests and staged host-to-device copies.");
  for (auto& r : rows) o << "wormhole_session_received_bytes_total{" << r.labels << "} " << r.in << '\n';
  head(o, "wormhole_session_sent_bytes_total", "counter",
       "Bytes a live session received: replies and staged device-to-host copies.");
  for (auto& r : rows) o << "wormhole_session_sent_bytes_total{" << r.labels << "} " << r.out << '\n';
  head(o, "wormhole_session_device_memory_bytes", "gauge", "Device memory a live session holds.");
  for (auto& r : rows) o << "wormhole_session_device_memory_bytes{" << r.labels << "} " << r.device << '\n';
  head(o, "wormhole_session_kernel_launches_total", "counter", "Kernels a live session launched.");
  for (auto& r : rows) o << "wormhole_session_kernel_launches_total{" << r.labels << "} " << r.kernels << '\n';
  head(o, "wormhole_session_kernel_seconds_total", "counter", "Time spent in a live session's kernel launches.");
  for (auto& r : rows)
    o << "wormhole_session_kernel_seconds_total{" << r.labels << "} " << num(double(r.kernel_ns) / 1e9) << '\n';
  head(o, "wormhole_session_thread_instructions_total", "counter",
       "Thread-instructions a live session's kernels executed (sim device; 0 on a GPU).");
  for (auto& r : rows)
    o << "wormhole_session_thread_instructions_total{" << r.labels << "} " << r.thread_instructions << '\n';
  head(o, "wormhole_session_uptime_seconds", "gauge", "Age of a live session.");
  for (auto& r : rows) o << "wormhole_session_uptime_seconds{" << r.labels << "} " << num(r.uptime) << '\n';

  const std::vector<OpFigures> ops = stats_.ops();
  auto by_op = [&](const char* name, const char* type, const char* help, uint64_t OpFigures::*f) {
    head(o, name, type, help);
    for (size_t i = 1; i < proto::kOpCount; i++)
      if (ops[i].calls) o << name << "{op=\"" << proto::op_name(proto::kAllOps[i]) << "\"} " << ops[i].*f << '\n';
  };
  by_op("wormhole_calls_total", "counter", "Calls served, by operation.", &OpFigures::calls);
  by_op("wormhole_call_errors_total", "counter", "Calls answered with an error, by operation.", &OpFigures::errors);
  by_op("wormhole_call_received_bytes_total", "counter", "Request message bytes, by operation.",
        &OpFigures::bytes_in);
  by_op("wormhole_call_sent_bytes_total", "counter", "Reply message bytes, by operation.", &OpFigures::bytes_out);
  head(o, "wormhole_call_duration_seconds", "histogram", "Service time of a call on the server, by operation.");
  for (size_t i = 1; i < proto::kOpCount; i++) {
    if (!ops[i].calls) continue;
    const std::string op = proto::op_name(proto::kAllOps[i]);
    uint64_t cum = 0;
    for (size_t b = 0; b < kLatencyBuckets; b++) {
      cum += ops[i].latency[b];
      o << "wormhole_call_duration_seconds_bucket{op=\"" << op << "\",le=\""
        << (b < kLatencyBounds.size() ? num(kLatencyBounds[b]) : std::string("+Inf")) << "\"} " << cum << '\n';
    }
    o << "wormhole_call_duration_seconds_sum{op=\"" << op << "\"} " << num(double(ops[i].ticks) * k / 1e9) << '\n';
    o << "wormhole_call_duration_seconds_count{op=\"" << op << "\"} " << cum << '\n';
  }
  return o.str();
}

bool Server::start_metrics() {
  if (cfg_.metrics_addr.empty()) return true;
  const auto colon = cfg_.metrics_addr.rfind(':');
  std::string host = cfg_.metrics_addr.substr(0, colon);
  const int port = std::stoi(cfg_.metrics_addr.substr(colon + 1));  // checked by main
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  metrics_ = std::make_shared<Metrics>();
  auto& h = metrics_->http;
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4; charset=utf-8");
  });
  h.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("wormhole-server: metrics at /metrics\n", "text/plain");
  });
  h.set_read_timeout(5, 0);
  h.set_write_timeout(5, 0);
  h.set_keep_alive_max_count(10);
  if (!h.bind_to_port(host, port)) {
    spdlog::error("--metrics {}: cannot listen there", cfg_.metrics_addr);
    metrics_.reset();
    return false;
  }
  metrics_thread_ = std::thread([this] { metrics_->http.listen_after_bind(); });
  spdlog::info("metrics (Prometheus): http://{}/metrics", cfg_.metrics_addr);
  return true;
}

void Server::stop_metrics() {
  if (!metrics_) return;
  metrics_->http.stop();
  if (metrics_thread_.joinable()) metrics_thread_.join();
  metrics_.reset();
}

}  // namespace wh::server
