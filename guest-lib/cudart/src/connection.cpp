#include "connection.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstring>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "remote.hpp"
#include "state.hpp"
#include "wormhole/fd_pass.hpp"
#include "wormhole/ivshmem.hpp"
#include "wormhole/vmfunc.hpp"

namespace wh::guest {

void log(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "wormhole: %s\n", buf);
}

void log_once(const std::string& msg) {
  // Never destroyed: the exit handler that flushes device output can log
  // a lost link after static destructors ran (a set made after that handler
  // was registered is destroyed before it runs).
  static std::mutex& mu = *new std::mutex;
  static std::set<std::string>& seen = *new std::set<std::string>;
  std::lock_guard lk(mu);
  if (seen.insert(msg).second) std::fprintf(stderr, "wormhole: %s\n", msg.c_str());
}

ring::Message& Connection::reply_buffer() {
  // One buffer per thread, freed when the thread ends. A call made after
  // that on the same thread (an exit handler flushing kernel output once
  // the main thread's thread-locals are gone) gets a process-wide buffer
  // instead of a destroyed one; exit handlers run one at a time. The two
  // plain thread-locals stay valid to the end (nothing destroys them).
  thread_local ring::Message* mine = nullptr;
  thread_local bool ended = false;
  struct Owner {
    ~Owner() {
      delete mine;
      mine = nullptr;
      ended = true;
    }
  };
  if (ended) {
    static ring::Message* late = new ring::Message();
    return *late;
  }
  if (!mine) {
    mine = new ring::Message();
    thread_local Owner owner;
    (void)owner;
  }
  return *mine;
}

std::span<uint8_t> Connection::data() const { return remote_ ? remote_->data() : chan_->data(); }
uint32_t Connection::max_msg() const { return remote_ ? remote_->max_msg() : chan_->max_msg(); }
bool Connection::handled(uint64_t end) const {
  if (!end || remote_) return true;
  const auto* st = reinterpret_cast<const proto::DataAreaStatus*>(chan_->data().data());
  return __atomic_load_n(&st->handled_pos, __ATOMIC_ACQUIRE) >= end;
}
bool Connection::alive() const { return remote_ ? remote_->alive() : chan_->status() == ring::Status::Ok; }

ring::Status Connection::remote_post(uint16_t op, std::span<const std::span<const uint8_t>> parts) {
  return remote_->post(op, parts);
}

// ---- ucx:// (docs/remote.md): a network server; nothing is shared.
std::string Connection::url() const { return remote_ ? remote_->url() : std::string(); }

bool Connection::connect_remote(const std::string& url, std::string* err) {
  remote_ = RemoteLink::connect(url, err);
  if (!remote_) return false;
  version_ = remote_->version();
  transport_ = "ucx";
  return true;
}

cudaError_t Connection::link_error(ring::Status s) {
  std::string why = remote_ ? remote_->error() : gate_ && gate_->dead() ? gate_->error() : chan_->error();
  log_once(std::string("link to wormhole-server lost: ") + ring::to_string(s) + " " + why);
  return cudaErrorDevicesUnavailable;
}

// ---- vmfunc transport (docs/exitless.md "The vmfunc transport") ----------
// Synchronous calls whose request and response fit a gate slot go through
// the gate (SUBMIT, then POLL: no VM exit); posted calls, bulk data and
// larger messages use the VM's ivshmem channel as before. A gate request
// carries the request ring's tail, so the server handles it only after the
// posted requests this process wrote before it (program order).
ring::Status Connection::transmit(uint16_t op, std::span<const std::span<const uint8_t>> parts,
                                  ring::Message& m, size_t resp_max) {
  issued_.fetch_add(1, std::memory_order_relaxed);
  if (remote_) return remote_->call(op, parts, m);
  if (gate_) {
    if (gate_->dead()) return ring::Status::Closed;
    size_t len = 0;
    for (auto p : parts) len += p.size();
    sync_calls_.fetch_add(1, std::memory_order_relaxed);
    if (vmfunc::Link::fits(len, resp_max)) {
      uint64_t barrier = __atomic_load_n(&region_->channel(chan_->index())->req_tail, __ATOMIC_ACQUIRE);
      ring::Status s = gate_->call(op, 0, version_, parts, barrier, m);
      if (s != ring::Status::Full) {
        gate_calls_.fetch_add(1, std::memory_order_relaxed);
        return s;
      }
      // Full: another thread of this process holds the slot.
      ring_busy_.fetch_add(1, std::memory_order_relaxed);
      log_once("vmfunc: a synchronous call took the ring: the gate slot was busy with another thread's call");
    } else if (resp_max == SIZE_MAX) {
      ring_variable_.fetch_add(1, std::memory_order_relaxed);  // an answer of any length: the ring by design
    } else {
      ring_too_large_.fetch_add(1, std::memory_order_relaxed);
      log_once("vmfunc: a synchronous call took the ring: its request or answer is larger than a gate slot");
    }
  }
  return chan_->call(op, 0, parts, m, version_);
}

bool Connection::note_posted() {
  issued_.fetch_add(1, std::memory_order_relaxed);
  return !(gate_ && gate_->dead());
}

// The published record counts as our answer only when the server has
// handled every request we sent (it then says what a round trip would).
bool Connection::local_mem_info(uint64_t* free, uint64_t* total) {
  wh_gate_chan_state st;
  if (!gate_->query(&st) || st.handled != issued_.load(std::memory_order_relaxed) || st.pending_error)
    return false;
  *free = st.mem_free;
  *total = st.mem_total;
  return true;
}

// The default stream is complete when all our work was handled, nothing is
// outstanding on any stream, and no deferred error waits to be reported.
bool Connection::local_idle() {
  wh_gate_chan_state st;
  return gate_->query(&st) && st.handled == issued_.load(std::memory_order_relaxed) && st.idle &&
         st.pending_error == 0;
}

bool Connection::connect_vmfunc(std::unique_ptr<vmfunc::Device> dev, bool fallback, std::string* err) {
  if (!connect_ivshmem(err)) return false;
  vmfunc::Options o;
  if (const char* t = std::getenv("WORMHOLE_GATE_TIMEOUT_MS")) o.timeout = std::chrono::milliseconds(atol(t));
  o.server_heartbeat = &region_->channel(chan_->index())->server_heartbeat;
  o.hb_timeout_ms = region_->geometry().hb_timeout_ms;
  std::string gerr;
  gate_ = vmfunc::Link::bind(std::move(dev), chan_->index(), chan_->generation(), o, &gerr);
  if (!gate_) {
    if (!fallback) {
      *err = "vmfunc: " + gerr;
      return false;
    }
    log("vmfunc gate not usable (%s): using ivshmem", gerr.c_str());
    return true;  // transport_ stays "ivshmem"
  }
  transport_ = "vmfunc";
  return true;
}

// A VM channel is reused by the VM's successive processes: forget the copy
// sequence numbers the previous owner's server published. The server only
// writes the page in answer to our requests, so nothing races with this.
void Connection::reset_status_page() {
  auto* st = reinterpret_cast<proto::DataAreaStatus*>(chan_->data().data());
  __atomic_store_n(&st->copy_done_seq, uint64_t(0), __ATOMIC_RELEASE);
  __atomic_store_n(&st->copy_error_seq, uint64_t(0), __ATOMIC_RELEASE);
  __atomic_store_n(&st->output_seq, uint64_t(0), __ATOMIC_RELEASE);
  __atomic_store_n(&st->copy_error, int32_t(0), __ATOMIC_RELEASE);
  __atomic_store_n(&st->handled_pos, uint64_t(0), __ATOMIC_RELEASE);
}

// What the vmfunc transport did with this process's synchronous calls
// (WORMHOLE_VERBOSE): each counted once, as the gate or the ring took it.
// Calls whose answer has a variable length take the ring by design; the
// other two reasons are fallbacks (each logged once when it first happens).
void Connection::report_gate_use() const {
  const auto n = [](const std::atomic<uint64_t>& a) { return (unsigned long long)a.load(std::memory_order_relaxed); };
  log("vmfunc: %llu synchronous calls, %llu through the gate, %llu on the ring (%llu with a variable-length "
      "answer; fallbacks: %llu larger than a slot, %llu while the slot was busy)",
      n(sync_calls_), n(gate_calls_), n(ring_variable_) + n(ring_too_large_) + n(ring_busy_), n(ring_variable_),
      n(ring_too_large_), n(ring_busy_));
}

Connection::~Connection() {
  if (gate_ && std::getenv("WORMHOLE_VERBOSE")) report_gate_use();
  gate_.reset();  // closes the gate slot
  chan_.reset();  // says goodbye to the server
  remote_.reset();  // sends what is batched, then closes
  region_.reset();
  if (ivshmem_) delete static_cast<ivshmem::Mapping*>(ivshmem_);
  if (sock_ >= 0) close(sock_);
  if (region_fd_ >= 0) close(region_fd_);
}

static std::string socket_path() {
  if (const char* e = std::getenv("WORMHOLE_SOCKET")) return e;
  return "/tmp/wormhole-" + std::to_string(getuid()) + ".sock";
}

// A socket connected to the server at `path`, or -1 (errno says why).
static int connect_server(const std::string& path) {
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (s >= 0 && connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return s;
  const int e = errno;
  if (s >= 0) close(s);
  errno = e;
  return -1;
}

// This process's hello (`flags`: proto::kHelloResume bits).
static proto::Hello client_hello(uint32_t flags) {
  proto::Hello h{};
  h.magic = proto::kHelloMagic;
  h.min_version = proto::kMinVersion;
  h.max_version = proto::kVersion;
  h.pid = uint32_t(getpid());
  h.reserved = flags;
  return h;
}

bool Connection::connect_socket(std::string* err) {
  std::string path = socket_path();
  sock_ = connect_server(path);
  if (sock_ < 0) {
    *err = "cannot reach wormhole-server at " + path + ": " + strerror(errno);
    return false;
  }
  // The handshake is bounded: a stopped server, or something else listening
  // on the path, must not hang the program's first CUDA call.
  timeval limit{5, 0};
  setsockopt(sock_, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  setsockopt(sock_, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  proto::Hello h = client_hello(0);
  // MSG_NOSIGNAL: a library must not raise SIGPIPE in the program. A server
  // that refuses at connect (too many clients) answers and closes before it
  // reads the hello: its answer is still read below.
  if (::send(sock_, &h, sizeof h, MSG_NOSIGNAL) != ssize_t(sizeof h) && errno != EPIPE && errno != ECONNRESET) {
    *err = "handshake write failed";
    return false;
  }
  proto::HelloReply rep{};
  int fd = -1;
  const ssize_t n = ring::recv_with_fd(sock_, &rep, sizeof rep, &fd);
  if ((n != ssize_t(sizeof rep) || rep.magic != proto::kHelloMagic || rep.status != 0) && fd >= 0) close(fd);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    *err = "no handshake reply from " + path + " within 5 s (is wormhole-server stopped, or is another program "
           "listening there?)";
    return false;
  }
  if (n != ssize_t(sizeof rep) || rep.magic != proto::kHelloMagic) {
    *err = "bad handshake reply from " + path + " (not a wormhole-server of this version?)";
    return false;
  }
  if (rep.status != 0) {
    rep.message[sizeof rep.message - 1] = 0;
    *err = std::string("server refused: ") + rep.message;
    return false;
  }
  if (fd < 0) {
    *err = "server sent no region";
    return false;
  }
  region_ = ring::Region::attach_fd(fd, err);
  region_fd_ = fd;  // kept: a server that restores the session takes the region back
  if (!region_) return false;
  chan_ = ring::ClientChannel::claim(*region_, int(rep.channel), err);
  if (!chan_) return false;
  reset_status_page();
  chan_->set_server_lost([this] { return resume_session(); });
  uint8_t ok = 1;
  if (::send(sock_, &ok, 1, MSG_NOSIGNAL) != 1) {
    *err = "handshake write failed";
    return false;
  }
  timeval none{0, 0};  // from here on the socket only tells liveness
  setsockopt(sock_, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
  setsockopt(sock_, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
  version_ = rep.version;
  transport_ = "shm";
  return chan_->wait_attached(std::chrono::seconds(5)) == ring::Status::Ok ||
         (*err = "server did not attach", false);
}

bool Connection::resume_session() {
  auto* st = reinterpret_cast<proto::DataAreaStatus*>(chan_->data().data());
  if (__atomic_load_n(&st->held, __ATOMIC_ACQUIRE) != 1 || region_fd_ < 0) return false;
  struct {
    proto::Hello h;
    proto::ResumeHello r;
  } msg{client_hello(proto::kHelloResume), {}};
  std::memcpy(msg.r.token, st->resume_token, sizeof msg.r.token);
  const char* t = std::getenv("WORMHOLE_RESUME_TIMEOUT_S");
  const int secs = t && *t ? atoi(t) : 300;
  const std::string path = socket_path();
  log("wormhole-server went away holding this session for a restore: waiting up to %d s for the server at %s to "
      "restore it",
      secs, path.c_str());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(secs);
  for (; std::chrono::steady_clock::now() < deadline; usleep(200000)) {
    const int s = connect_server(path);
    if (s < 0) continue;  // no server there yet
    timeval limit{120, 0};  // restoring a large session takes a while
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    proto::HelloReply rep{};
    int fd = -1;
    std::vector<int> fds = {region_fd_};
    for (int f : grown_segment_fds()) fds.push_back(f);
    const bool sent = ring::send_with_fds(s, &msg, sizeof msg, fds);
    const ssize_t n = sent ? ring::recv_with_fd(s, &rep, sizeof rep, &fd) : -1;
    if (fd >= 0) close(fd);
    if (n != ssize_t(sizeof rep) || rep.magic != proto::kHelloMagic) {
      close(s);
      continue;
    }
    if (rep.status == 0) {
      timeval none{0, 0};  // from here on the socket only tells liveness
      setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
      if (sock_ >= 0) close(sock_);
      sock_ = s;
      log("session resumed from its checkpoint (session %llu on the new server)", (unsigned long long)rep.session_id);
      return true;
    }
    close(s);
    if (rep.status == cudaErrorNotReady) continue;  // not restored there yet
    rep.message[sizeof rep.message - 1] = 0;
    log("resuming the session was refused: %s", rep.message);
    return false;
  }
  log("no server restored this session within %d s", secs);
  return false;
}

int Connection::receive_segment(uint64_t index, uint64_t size) {
  for (;;) {
    // Sent before the answer we hold: already here, unless the server broke.
    pollfd p{sock_, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) return -1;
    proto::PinnedSegmentNote note{};
    int fd = -1;
    const ssize_t n = ring::recv_with_fd(sock_, &note, sizeof note, &fd, MSG_DONTWAIT);
    if (n <= 0) return -1;
    if (n == ssize_t(sizeof note) && note.magic == proto::kPinnedNoteMagic && note.segment == index &&
        note.size == size && fd >= 0)
      return fd;
    if (fd >= 0) close(fd);  // an older segment's, given up on
  }
}

bool Connection::connect_ivshmem(std::string* err) {
  auto map = ivshmem::open_device(err);
  if (!map) return false;
  auto* keep = new ivshmem::Mapping(std::move(*map));
  ivshmem_ = keep;
  // The server formatted the region; wait for it if the VM started first.
  for (int i = 0; i < 500; i++) {
    region_ = ring::Region::attach_memory(keep->base, keep->size, false, {}, err);
    if (region_) break;
    usleep(10000);
  }
  if (!region_) return false;
  chan_ = ring::ClientChannel::claim(*region_, -1, err);
  if (!chan_) return false;
  reset_status_page();
  transport_ = "ivshmem";
  if (chan_->wait_attached(std::chrono::seconds(10)) != ring::Status::Ok) {
    *err = "server did not attach to the VM channel";
    return false;
  }
  return true;
}

namespace {
// Set in the child of a fork() after this process connected: the child
// shares the parent's channel and mapping, and must never use or close them
// (a child that exits would otherwise say goodbye for its parent, and one
// that calls CUDA would interleave with the parent's requests). CUDA itself
// does not support the parent's context in a fork child either; the child's
// calls fail with cudaErrorInitializationError.
std::atomic<bool> g_forked_child{false};
}  // namespace

bool Connection::in_forked_child() { return g_forked_child.load(std::memory_order_relaxed); }

thread_local int t_current_device = 0;
std::atomic<int> g_device_count{1};

namespace {
// Several servers: device k's connection. g_device_count > 1 only then; with one
// server (or any other transport) get() never looks here.
Connection* g_conns[kMaxDevices] = {};

// "ucx://h1:p1,ucx://h2:p2" or "ucx://h1:p1,h2:p2": the list of URLs (an
// item without a scheme takes the first one's).
std::vector<std::string> split_servers(const std::string& list) {
  std::vector<std::string> out;
  std::string scheme = "ucx://";
  size_t at = 0;
  while (at <= list.size()) {
    size_t comma = list.find(',', at);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(at, comma - at);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) {
      size_t sep = item.find("://");
      if (sep == std::string::npos) item = scheme + item;
      else if (out.empty()) scheme = item.substr(0, sep + 3);
      out.push_back(item);
    }
    at = comma + 1;
  }
  return out;
}
}  // namespace

Connection* Connection::of(int device) {
  if (devices() <= 1) return device == 0 ? get() : nullptr;
  return device >= 0 && device < devices() ? g_conns[device] : nullptr;
}

Connection* Connection::get() {
  if (in_forked_child()) {
    static std::once_flag once;
    std::call_once(once, [] {
      log("CUDA used in a child of fork(): not supported (as with CUDA); the parent's session is untouched");
    });
    return nullptr;
  }
  static Connection* conn = [] {
    auto* c = new Connection();
    std::string err;
    // WORMHOLE_SERVER=ucx://HOST:PORT: a server on another machine; a
    // comma-separated list: several, as devices 0..N-1.
    if (const char* srv = std::getenv("WORMHOLE_SERVER"); srv && *srv) {
      std::vector<std::string> urls = split_servers(srv);
      if (urls.empty()) urls.push_back(srv);
      if (urls.size() > size_t(kMaxDevices)) {
        log("WORMHOLE_SERVER lists %zu servers: at most %d", urls.size(), kMaxDevices);
        delete c;
        return static_cast<Connection*>(nullptr);
      }
      if (!c->connect_remote(urls[0], &err)) {
        log("%s", err.c_str());
        delete c;
        return static_cast<Connection*>(nullptr);
      }
      if (urls.size() > 1) {
        g_conns[0] = c;
        for (size_t i = 1; i < urls.size(); i++) {
          auto* o = new Connection();
          o->index_ = int(i);
          if (!o->connect_remote(urls[i], &err)) {
            log("device %zu: %s", i, err.c_str());
            delete o;
            for (size_t j = 0; j < i; j++) delete g_conns[j];
            return static_cast<Connection*>(nullptr);
          }
          g_conns[i] = o;
        }
        g_device_count.store(int(urls.size()));
      }
      if (std::getenv("WORMHOLE_VERBOSE")) log("connected over %s to %s", c->transport_, srv);
      pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true, std::memory_order_relaxed); });
      return c;
    }
    const char* t = std::getenv("WORMHOLE_TRANSPORT");
    std::string want = t && *t ? t : "auto";
    // vmfunc: the gate device must exist and answer INFO (the module loads
    // only where the VMM set up a gate). A missing device is silent (the
    // usual case); one that exists but fails is logged.
    std::unique_ptr<vmfunc::Device> gate;
    std::string gerr;
    if (want == "auto" || want == "vmfunc") {
      std::string path = vmfunc::device_path();
      gate = vmfunc::open_device(path, &gerr);
      if (!gate && want == "auto" && access(path.c_str(), F_OK) == 0)
        log("vmfunc gate not usable (%s): using ivshmem", gerr.c_str());
    }
    bool ivsh = std::getenv("WORMHOLE_DEVICE") || !ivshmem::find_devices().empty();
    vmfunc::Choice ch = vmfunc::choose(t, gate != nullptr, ivsh);
    bool ok = false;
    switch (ch.transport) {
      case vmfunc::Transport::Vmfunc:
        if (gate) ok = c->connect_vmfunc(std::move(gate), ch.fallback_to_ivshmem, &err);
        else err = "WORMHOLE_TRANSPORT=vmfunc: " + gerr;
        break;
      case vmfunc::Transport::Ivshmem: ok = c->connect_ivshmem(&err); break;
      case vmfunc::Transport::Shm: ok = c->connect_socket(&err); break;
      default: err = ch.error;
    }
    if (!ok) {
      log("%s", err.c_str());
      delete c;
      return static_cast<Connection*>(nullptr);
    }
    if (std::getenv("WORMHOLE_VERBOSE")) log("connected over %s", c->transport_);
    pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true, std::memory_order_relaxed); });
    return c;
  }();
  // Say goodbye at exit so the server frees this process's resources at once.
  static bool registered = conn && std::atexit([] {
    if (in_forked_child()) return;  // the parent's channel: not ours to close
    const int n = devices();
    for (int d = 0; d < n; d++) flush_device_output(n > 1 ? g_conns[d] : conn);  // printed since the last sync
    // Later exit handlers (a static CUDA runtime's, unloading its modules
    // through libcuda.so.1) find no connection instead of a freed one.
    Connection* gone = conn;
    conn = nullptr;
    g_device_count.store(1);
    if (n > 1)
      for (int d = 1; d < n; d++) delete std::exchange(g_conns[d], nullptr);
    g_conns[0] = nullptr;
    delete gone;
  }) == 0;
  (void)registered;
  // Several servers: the calling thread's current device (cudaSetDevice
  // keeps it below devices()). One server: one relaxed load more.
  if (g_device_count.load(std::memory_order_relaxed) > 1) [[unlikely]]
    return g_conns[t_current_device];
  return conn;
}

}  // namespace wh::guest
