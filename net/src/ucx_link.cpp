// The ucx:// link: UCP's stream API on one worker per endpoint, loaded with
// dlopen so that only processes that use it load UCX.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <poll.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "wormhole/net.hpp"

namespace wh::net {

namespace {

struct Api {
  ucs_status_t (*config_read)(const char*, const char*, ucp_config_t**);
  void (*config_release)(ucp_config_t*);
  ucs_status_t (*init_version)(unsigned, unsigned, const ucp_params_t*, const ucp_config_t*, ucp_context_h*);
  void (*cleanup)(ucp_context_h);
  ucs_status_t (*worker_create)(ucp_context_h, const ucp_worker_params_t*, ucp_worker_h*);
  void (*worker_destroy)(ucp_worker_h);
  unsigned (*worker_progress)(ucp_worker_h);
  ucs_status_t (*worker_get_efd)(ucp_worker_h, int*);
  ucs_status_t (*worker_arm)(ucp_worker_h);
  ucs_status_t (*listener_create)(ucp_worker_h, const ucp_listener_params_t*, ucp_listener_h*);
  void (*listener_destroy)(ucp_listener_h);
  ucs_status_t (*listener_query)(ucp_listener_h, ucp_listener_attr_t*);
  ucs_status_t (*listener_reject)(ucp_listener_h, ucp_conn_request_h);
  ucs_status_t (*conn_request_query)(ucp_conn_request_h, ucp_conn_request_attr_t*);
  ucs_status_t (*ep_create)(ucp_worker_h, const ucp_ep_params_t*, ucp_ep_h*);
  ucs_status_ptr_t (*ep_close_nbx)(ucp_ep_h, const ucp_request_param_t*);
  ucs_status_ptr_t (*stream_send_nbx)(ucp_ep_h, const void*, size_t, const ucp_request_param_t*);
  ucs_status_ptr_t (*stream_recv_nbx)(ucp_ep_h, void*, size_t, size_t*, const ucp_request_param_t*);
  ucs_status_t (*request_check_status)(void*);
  ucs_status_t (*stream_recv_request_test)(void*, size_t*);
  void (*request_cancel)(ucp_worker_h, void*);
  void (*request_free)(void*);
  const char* (*status_string)(ucs_status_t);
  ucs_status_t (*mem_map)(ucp_context_h, const ucp_mem_map_params_t*, ucp_mem_h*);
  ucs_status_t (*mem_unmap)(ucp_context_h, ucp_mem_h);
};

const Api* api(std::string* err) {
  static std::string load_error;
  static const Api* a = []() -> const Api* {
    // UCX's own fatal-signal handlers would replace the program's: keep the
    // program's behaviour unless the user asked for UCX's.
    setenv("UCX_HANDLE_ERRORS", "none", 0);
    void* h = dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      load_error = std::string("cannot load UCX (libucp.so.0, Debian package libucx0): ") + dlerror();
      return nullptr;
    }
    auto* t = new Api{};
    bool ok = true;
    auto sym = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(h, name));
      if (!fn) ok = false, load_error = std::string("UCX lacks ") + name;
    };
    sym(t->config_read, "ucp_config_read");
    sym(t->config_release, "ucp_config_release");
    sym(t->init_version, "ucp_init_version");
    sym(t->cleanup, "ucp_cleanup");
    sym(t->worker_create, "ucp_worker_create");
    sym(t->worker_destroy, "ucp_worker_destroy");
    sym(t->worker_progress, "ucp_worker_progress");
    sym(t->worker_get_efd, "ucp_worker_get_efd");
    sym(t->worker_arm, "ucp_worker_arm");
    sym(t->listener_create, "ucp_listener_create");
    sym(t->listener_destroy, "ucp_listener_destroy");
    sym(t->listener_query, "ucp_listener_query");
    sym(t->listener_reject, "ucp_listener_reject");
    sym(t->conn_request_query, "ucp_conn_request_query");
    sym(t->ep_create, "ucp_ep_create");
    sym(t->ep_close_nbx, "ucp_ep_close_nbx");
    sym(t->stream_send_nbx, "ucp_stream_send_nbx");
    sym(t->stream_recv_nbx, "ucp_stream_recv_nbx");
    sym(t->request_check_status, "ucp_request_check_status");
    sym(t->stream_recv_request_test, "ucp_stream_recv_request_test");
    sym(t->request_cancel, "ucp_request_cancel");
    sym(t->request_free, "ucp_request_free");
    sym(t->status_string, "ucs_status_string");
    sym(t->mem_map, "ucp_mem_map");
    sym(t->mem_unmap, "ucp_mem_unmap");
    if (!ok) return nullptr;
    return t;
  }();
  if (!a && err) *err = load_error;
  return a;
}

std::string status_text(ucs_status_t s) {
  const Api* a = api(nullptr);
  return a ? a->status_string(s) : "UCX error " + std::to_string(int(s));
}

bool resolve(const Addr& a, sockaddr_storage* ss, socklen_t* len, std::string* err) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (a.host.empty() ? AI_PASSIVE : 0);
  std::string port = std::to_string(a.port);
  int rc = getaddrinfo(a.host.empty() ? nullptr : a.host.c_str(), port.c_str(), &hints, &res);
  if (rc != 0 || !res) {
    *err = "cannot resolve " + a.host + ": " + gai_strerror(rc);
    return false;
  }
  std::memcpy(ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return true;
}

std::string sockaddr_text(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  uint16_t port = 0;
  if (ss.ss_family == AF_INET) {
    auto* s = reinterpret_cast<const sockaddr_in*>(&ss);
    inet_ntop(AF_INET, &s->sin_addr, host, sizeof host);
    port = ntohs(s->sin_port);
    return std::string(host) + ":" + std::to_string(port);
  }
  if (ss.ss_family == AF_INET6) {
    auto* s = reinterpret_cast<const sockaddr_in6*>(&ss);
    inet_ntop(AF_INET6, &s->sin6_addr, host, sizeof host);
    port = ntohs(s->sin6_port);
    return "[" + std::string(host) + "]:" + std::to_string(port);
  }
  return "?";
}

}  // namespace

// One UCP context per process, shared by its workers.
class Context {
 public:
  static std::shared_ptr<Context> get(std::string* err) {
    static std::mutex mu;
    static std::weak_ptr<Context> weak;
    std::lock_guard lk(mu);
    if (auto c = weak.lock()) return c;
    const Api* a = api(err);
    if (!a) return nullptr;
    ucp_config_t* cfg = nullptr;
    if (ucs_status_t s = a->config_read(nullptr, nullptr, &cfg); s != UCS_OK) {
      *err = "UCX configuration: " + status_text(s);
      return nullptr;
    }
    ucp_params_t p{};
    p.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
    p.features = UCP_FEATURE_STREAM | UCP_FEATURE_WAKEUP;
    p.mt_workers_shared = 1;
    auto c = std::shared_ptr<Context>(new Context());
    ucs_status_t s = a->init_version(UCP_API_MAJOR, UCP_API_MINOR, &p, cfg, &c->ctx);
    a->config_release(cfg);
    if (s != UCS_OK) {
      *err = "UCX init: " + status_text(s);
      return nullptr;
    }
    weak = c;
    return c;
  }
  ~Context() {
    if (ctx) api(nullptr)->cleanup(ctx);
  }
  ucp_context_h ctx = nullptr;
};

bool parse_url(const std::string& url, Addr* a, std::string* err) {
  const std::string scheme = "ucx://";
  if (url.compare(0, scheme.size(), scheme) != 0) {
    *err = "not a ucx:// address: " + url;
    return false;
  }
  std::string rest = url.substr(scheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  size_t colon = rest.rfind(':');
  if (colon == std::string::npos || colon + 1 == rest.size()) {
    *err = "no port in " + url + " (ucx://HOST:PORT)";
    return false;
  }
  std::string host = rest.substr(0, colon), port = rest.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  char* end = nullptr;
  long p = strtol(port.c_str(), &end, 10);
  if (*end || p < 0 || p > 65535) {
    *err = "bad port in " + url;
    return false;
  }
  a->host = host;
  a->port = uint16_t(p);
  return true;
}

std::string to_string(const Addr& a) { return "ucx://" + a.host + ":" + std::to_string(a.port); }

// ---- Link ----------------------------------------------------------------

namespace {
void on_error(void* arg, ucp_ep_h, ucs_status_t status) {
  static_cast<Link*>(arg)->fail("connection lost (" + status_text(status) + ")");
}
void on_conn(ucp_conn_request_h req, void* arg) { static_cast<Listener*>(arg)->queue(req); }
}  // namespace

void Link::fail(const std::string& why) {
  if (!dead_) error_ = why;
  dead_ = true;
}

bool Link::make_worker(std::string* err) {
  const Api* a = api(err);
  if (!a) return false;
  if (!ctx_) ctx_ = Context::get(err);
  if (!ctx_) return false;
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;
  ucp_worker_h w = nullptr;
  if (ucs_status_t s = a->worker_create(ctx_->ctx, &wp, &w); s != UCS_OK) {
    *err = "UCX worker: " + status_text(s);
    return false;
  }
  worker_ = w;
  if (a->worker_get_efd(w, &efd_) != UCS_OK) efd_ = -1;  // then: progress by polling
  rbuf_.resize(1u << 20);
  return true;
}

std::unique_ptr<Link> Link::connect(const Addr& addr, std::string* err) {
  std::unique_ptr<Link> l(new Link());
  if (!l->make_worker(err)) return nullptr;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!resolve(addr, &ss, &len, err)) return nullptr;
  ucp_ep_params_t ep{};
  ep.field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                  UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
  ep.flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER;
  ep.sockaddr.addr = reinterpret_cast<const sockaddr*>(&ss);
  ep.sockaddr.addrlen = len;
  ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  ep.err_handler.cb = &on_error;
  ep.err_handler.arg = l.get();
  ucp_ep_h h = nullptr;
  if (ucs_status_t s = api(nullptr)->ep_create(static_cast<ucp_worker_h>(l->worker_), &ep, &h); s != UCS_OK) {
    *err = "cannot connect to " + to_string(addr) + ": " + status_text(s);
    return nullptr;
  }
  l->ep_ = h;
  l->peer_ = to_string(addr);
  return l;
}

Link::~Link() {
  const Api* a = api(nullptr);
  if (!a) return;
  auto* w = static_cast<ucp_worker_h>(worker_);
  if (rreq_) {
    a->request_cancel(w, rreq_);
    for (int i = 0; i < 1000 && a->request_check_status(rreq_) == UCS_INPROGRESS; i++) a->worker_progress(w);
    a->request_free(rreq_);
    rreq_ = nullptr;
  }
  bool closed = true;
  if (ep_) {
    // A live link is flushed (what we sent arrives) within a second; a dead
    // one, or one that never heard its peer (the connection was never
    // established: a flush would wait forever), is torn down at once.
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    p.flags = dead_ || received_ == 0 ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    ucs_status_ptr_t r = a->ep_close_nbx(static_cast<ucp_ep_h>(ep_), &p);
    if (UCS_PTR_IS_PTR(r)) {
      auto end = Clock::now() + std::chrono::seconds(1);
      while (a->request_check_status(r) == UCS_INPROGRESS && Clock::now() < end) {
        if (!a->worker_progress(w)) std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      if (a->request_check_status(r) == UCS_INPROGRESS) {
        // UCX 1.13 aborts in ucp_worker_destroy while a close's flush is
        // pending: leave this worker (and its endpoint) to the process.
        closed = false;
      } else {
        a->request_free(r);
      }
    }
  }
  if (w && closed) a->worker_destroy(w);
}

// Progresses the worker until done() or the deadline: a short spin (the
// answer of a quick call is usually there within microseconds), then
// sleeping on the worker's event fd.
bool Link::wait(bool (*done)(Link*, void*), void* arg, Clock::time_point deadline) {
  const Api* a = api(nullptr);
  auto* w = static_cast<ucp_worker_h>(worker_);
  // WORMHOLE_UCX_SPIN_US: how long to poll before sleeping (default 1000 us: waking from the
  // worker's event fd costs about a network round trip).
  static const long spin_us = [] {
    const char* e = std::getenv("WORMHOLE_UCX_SPIN_US");
    return e && *e ? std::max(0L, atol(e)) : 1000L;
  }();
  auto spin_end = Clock::now() + std::chrono::microseconds(spin_us);
  for (;;) {
    while (a->worker_progress(w)) {
    }
    if (done(this, arg)) return true;
    if (dead_) return false;
    auto now = Clock::now();
    if (now >= deadline) return false;
    if (now < spin_end || efd_ < 0) {
      // Polling yields the CPU between looks: the peer (or the server's
      // work) may be waiting for this core.
      if (efd_ < 0 && now >= spin_end) std::this_thread::sleep_for(std::chrono::microseconds(100));
      else std::this_thread::yield();
      continue;
    }
    ucs_status_t s = a->worker_arm(w);
    if (s == UCS_ERR_BUSY) continue;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
    pollfd p{efd_, POLLIN, 0};
    poll(&p, 1, int(std::min<long>(left, 50)));
  }
}

void* Link::register_memory(void* p, size_t n, std::string* err) {
  const Api* a = api(err);
  if (!a || !ctx_ || !p || !n) {
    if (err && err->empty()) *err = "nothing to register";
    return nullptr;
  }
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = p;
  mp.length = n;
  ucp_mem_h h = nullptr;
  if (ucs_status_t s = a->mem_map(ctx_->ctx, &mp, &h); s != UCS_OK) {
    if (err) *err = "ucp_mem_map: " + status_text(s);
    return nullptr;
  }
  return h;
}

void Link::deregister_memory(void* memh) {
  const Api* a = api(nullptr);
  if (a && ctx_ && memh) a->mem_unmap(ctx_->ctx, static_cast<ucp_mem_h>(memh));
}

bool Link::wait_request(void* r, Clock::time_point deadline) {
  struct Ctx {
    const Api* a;
    void* r;
  } c{api(nullptr), r};
  return wait([](Link*, void* x) {
    auto* c = static_cast<Ctx*>(x);
    return c->a->request_check_status(c->r) != UCS_INPROGRESS;
  }, &c, deadline);
}

bool Link::read_into(void* dst, size_t n, Clock::time_point deadline, void* memh) {
  auto* out = static_cast<uint8_t*>(dst);
  size_t have = std::min(n, wpos_ - rpos_);
  if (have) std::memcpy(out, rbuf_.data() + rpos_, have);
  rpos_ += have;
  if (have == n) return true;
  if (dead_) return false;
  if (rreq_) {  // (never: fill() leaves none behind after a success)
    fail("receive already in flight");
    return false;
  }
  const Api* a = api(nullptr);
  ucp_request_param_t p{};
  p.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  p.flags = UCP_STREAM_RECV_FLAG_WAITALL;
  if (memh) {
    p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    p.memh = static_cast<ucp_mem_h>(memh);
  }
  size_t got = 0;
  ucs_status_ptr_t r = a->stream_recv_nbx(static_cast<ucp_ep_h>(ep_), out + have, n - have, &got, &p);
  if (r == nullptr) {
    received_ += got;
    if (got != n - have) fail("short receive");
    return !dead_;
  }
  if (UCS_PTR_IS_ERR(r)) {
    fail("receive failed (" + status_text(UCS_PTR_STATUS(r)) + ")");
    return false;
  }
  bool ok = wait_request(r, deadline);
  if (!ok) {
    // The destination must not be written after we return.
    a->request_cancel(static_cast<ucp_worker_h>(worker_), r);
    for (int i = 0; i < 1000 && a->request_check_status(r) == UCS_INPROGRESS; i++)
      a->worker_progress(static_cast<ucp_worker_h>(worker_));
    a->request_free(r);
    fail(dead_ ? error_ : "receive timed out");
    return false;
  }
  ucs_status_t st = a->stream_recv_request_test(r, &got);
  a->request_free(r);
  if (st != UCS_OK || got != n - have) {
    fail("receive failed (" + status_text(st) + ")");
    return false;
  }
  received_ += got;
  return true;
}

bool Link::send(const void* buf, size_t n, Clock::time_point deadline, void* memh) {
  if (dead_) return false;
  const Api* a = api(nullptr);
  ucp_request_param_t p{};
  if (memh) {
    p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
    p.memh = static_cast<ucp_mem_h>(memh);
  }
  ucs_status_ptr_t r = a->stream_send_nbx(static_cast<ucp_ep_h>(ep_), buf, n, &p);
  if (r == nullptr) return true;
  if (UCS_PTR_IS_ERR(r)) {
    fail("send failed (" + status_text(UCS_PTR_STATUS(r)) + ")");
    return false;
  }
  bool ok = wait_request(r, deadline);
  ucs_status_t st = a->request_check_status(r);
  if (st == UCS_INPROGRESS) {
    a->request_cancel(static_cast<ucp_worker_h>(worker_), r);
    a->worker_progress(static_cast<ucp_worker_h>(worker_));
    fail(dead_ ? error_ : "send timed out");
    ok = false;
  } else if (st != UCS_OK) {
    fail("send failed (" + status_text(st) + ")");
    ok = false;
  }
  a->request_free(r);
  return ok;
}

bool Link::send(std::span<const std::span<const uint8_t>> parts, Clock::time_point deadline) {
  size_t total = 0;
  for (auto p : parts) total += p.size();
  thread_local std::vector<uint8_t> scratch;
  scratch.resize(total);
  size_t at = 0;
  for (auto p : parts) {
    if (!p.empty()) std::memcpy(scratch.data() + at, p.data(), p.size());
    at += p.size();
  }
  return send(scratch.data(), total, deadline);
}

bool Link::fill(size_t n, Clock::time_point deadline, size_t at_most) {
  timed_out_ = false;
  const Api* a = api(nullptr);
  for (;;) {
    if (wpos_ - rpos_ >= n) return true;
    if (dead_) return false;
    if (!rreq_) {
      // Room for the rest of the record at the buffer's end.
      if (rpos_ == wpos_) rpos_ = wpos_ = 0;
      if (rbuf_.size() - rpos_ < n || rbuf_.size() - wpos_ < 4096) {
        std::memmove(rbuf_.data(), rbuf_.data() + rpos_, wpos_ - rpos_);
        wpos_ -= rpos_;
        rpos_ = 0;
      }
      if (n > rbuf_.size()) {
        fail("record larger than the receive buffer");
        return false;
      }
      size_t got = 0;
      ucp_request_param_t p{};
      size_t room = rbuf_.size() - wpos_;
      if (at_most != SIZE_MAX) room = std::min(room, std::max(at_most, n) - (wpos_ - rpos_));
      ucs_status_ptr_t r = a->stream_recv_nbx(static_cast<ucp_ep_h>(ep_), rbuf_.data() + wpos_, room, &got, &p);
      if (r == nullptr) {
        wpos_ += got;
        received_ += got;
        continue;
      }
      if (UCS_PTR_IS_ERR(r)) {
        fail("receive failed (" + status_text(UCS_PTR_STATUS(r)) + ")");
        return false;
      }
      rreq_ = r;
    }
    struct Ctx {
      const Api* a;
    } c{a};
    bool done = wait([](Link* l, void* x) {
      return static_cast<Ctx*>(x)->a->request_check_status(l->rreq_) != UCS_INPROGRESS;
    }, &c, deadline);
    if (!done) {
      if (!dead_) timed_out_ = true;
      return false;
    }
    size_t got = 0;
    ucs_status_t st = a->stream_recv_request_test(rreq_, &got);
    a->request_free(rreq_);
    rreq_ = nullptr;
    if (st != UCS_OK) {
      fail("receive failed (" + status_text(st) + ")");
      return false;
    }
    wpos_ += got;
    received_ += got;
  }
}

// ---- Listener ------------------------------------------------------------


std::unique_ptr<Listener> Listener::listen(const Addr& addr, std::string* err) {
  const Api* a = api(err);
  if (!a) return nullptr;
  // A restarted server takes its port back at once, whatever connections of
  // its previous life linger in TIME_WAIT.
  setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
  std::unique_ptr<Listener> l(new Listener());
  l->ctx_ = Context::get(err);
  if (!l->ctx_) return nullptr;
  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SINGLE;
  ucp_worker_h w = nullptr;
  if (ucs_status_t s = a->worker_create(l->ctx_->ctx, &wp, &w); s != UCS_OK) {
    *err = "UCX worker: " + status_text(s);
    return nullptr;
  }
  l->worker_ = w;
  if (a->worker_get_efd(w, &l->efd_) != UCS_OK) l->efd_ = -1;
  sockaddr_storage ss{};
  socklen_t len = 0;
  if (!resolve(addr, &ss, &len, err)) return nullptr;
  ucp_listener_params_t lp{};
  lp.field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER;
  lp.sockaddr.addr = reinterpret_cast<const sockaddr*>(&ss);
  lp.sockaddr.addrlen = len;
  lp.conn_handler.cb = &on_conn;
  lp.conn_handler.arg = l.get();
  ucp_listener_h h = nullptr;
  if (ucs_status_t s = a->listener_create(w, &lp, &h); s != UCS_OK) {
    *err = "cannot listen on " + to_string(addr) + ": " + status_text(s);
    return nullptr;
  }
  l->listener_ = h;
  ucp_listener_attr_t at{};
  at.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR;
  if (a->listener_query(h, &at) == UCS_OK) {
    if (at.sockaddr.ss_family == AF_INET) l->port_ = ntohs(reinterpret_cast<sockaddr_in*>(&at.sockaddr)->sin_port);
    if (at.sockaddr.ss_family == AF_INET6)
      l->port_ = ntohs(reinterpret_cast<sockaddr_in6*>(&at.sockaddr)->sin6_port);
  }
  return l;
}

Listener::~Listener() {
  const Api* a = api(nullptr);
  if (!a) return;
  for (void* r : pending_) a->listener_reject(static_cast<ucp_listener_h>(listener_), static_cast<ucp_conn_request_h>(r));
  if (listener_) a->listener_destroy(static_cast<ucp_listener_h>(listener_));
  if (worker_) a->worker_destroy(static_cast<ucp_worker_h>(worker_));
}

std::vector<std::unique_ptr<Link>> Listener::accept(std::chrono::milliseconds timeout) {
  const Api* a = api(nullptr);
  auto* w = static_cast<ucp_worker_h>(worker_);
  std::vector<std::unique_ptr<Link>> out;
  auto deadline = Clock::now() + timeout;
  for (;;) {
    while (a->worker_progress(w)) {
    }
    if (!pending_.empty() || Clock::now() >= deadline) break;
    if (efd_ < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (a->worker_arm(w) == UCS_ERR_BUSY) continue;
    pollfd p{efd_, POLLIN, 0};
    poll(&p, 1, int(std::max<long>(
                     1, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count())));
  }
  for (void* req : std::exchange(pending_, {})) {
    auto* cr = static_cast<ucp_conn_request_h>(req);
    std::unique_ptr<Link> l(new Link());
    l->ctx_ = ctx_;
    std::string err;
    ucp_conn_request_attr_t at{};
    at.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR;
    if (a->conn_request_query(cr, &at) == UCS_OK) l->peer_ = sockaddr_text(at.client_address);
    if (!l->make_worker(&err)) {
      a->listener_reject(static_cast<ucp_listener_h>(listener_), cr);
      continue;
    }
    ucp_ep_params_t ep{};
    ep.field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                    UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE;
    ep.conn_request = cr;
    ep.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    ep.err_handler.cb = &on_error;
    ep.err_handler.arg = l.get();
    ucp_ep_h h = nullptr;
    if (a->ep_create(static_cast<ucp_worker_h>(l->worker_), &ep, &h) != UCS_OK) continue;
    l->ep_ = h;
    out.push_back(std::move(l));
  }
  return out;
}

}  // namespace wh::net
