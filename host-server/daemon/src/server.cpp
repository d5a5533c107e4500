#include "server.hpp"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <functional>

#include "wormhole/proto/dispatch.hpp"
#include "wormhole/ring.hpp"

namespace wh::server {

using namespace std::chrono_literals;

std::string default_socket_path() {
  if (const char* e = std::getenv("WORMHOLE_SOCKET")) return e;
  return "/tmp/wormhole-" + std::to_string(getuid()) + ".sock";
}

Server::Server(ServerConfig cfg, Backend& backend) : cfg_(std::move(cfg)), backend_(backend) {}

Server::~Server() {
  stop();
  std::lock_guard lk(threads_mu_);
  for (auto& t : threads_)
    if (t.t.joinable()) t.t.join();
}

void Server::stop() {
  if (stopping_.exchange(true)) return;
  if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
}

void Server::track(std::function<void()> fn) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::lock_guard lk(threads_mu_);
  for (auto it = threads_.begin(); it != threads_.end();) {
    if (it->done->load()) {
      it->t.join();
      it = threads_.erase(it);
    } else {
      ++it;
    }
  }
  threads_.push_back({std::thread([fn = std::move(fn), done] {
                        fn();
                        done->store(true);
                      }),
                      done});
}

namespace {

enum class End { ClientClosed, ClientDied, Corrupt, Violations, Stopping, ReplyFailed };
const char* to_string(End e) {
  switch (e) {
    case End::ClientClosed: return "client closed";
    case End::ClientDied: return "client died";
    case End::Corrupt: return "channel corrupt";
    case End::Violations: return "too many malformed requests";
    case End::Stopping: return "server stopping";
    case End::ReplyFailed: return "client does not take its replies";
  }
  return "?";
}

// The request loop of one session, shared by socket clients and VM channels.
End serve_channel(ring::ServerChannel& ch, Session& s, uint32_t max_violations,
                  const std::atomic<bool>& stopping, const std::function<bool()>& client_gone) {
  ring::Message msg;
  proto::DispatchResult res;
  for (;;) {
    ring::Status st = ch.recv(msg, 100ms);
    if (st == ring::Status::Timeout) {
      if (stopping) return End::Stopping;
      if (client_gone && client_gone()) return End::ClientDied;
      continue;
    }
    if (st == ring::Status::Closed) return End::ClientClosed;
    if (st == ring::Status::PeerDead) return End::ClientDied;
    if (st != ring::Status::Ok) return End::Corrupt;
    const auto& h = msg.hdr;
    if (h.version != proto::kVersion || (h.flags & WH_MSG_F_RESPONSE)) {
      res.status = proto::kBadRequest;
      res.fixed.clear();
      res.tail.clear();
      if (!(h.flags & WH_MSG_F_POSTED)) {
        std::span<const uint8_t> none;
        std::array<std::span<const uint8_t>, 1> parts{none};
        ch.reply(h.call_id, h.opcode, res.status, 0, parts);
      }
      s.note_violation();  // counts toward the limit like any malformed request
      if (s.violations() > max_violations) return End::Violations;
      continue;
    }
    bool respond = s.handle(h.opcode, h.flags, msg.payload, ch.max_msg(), res);
    if (respond) {
      std::array<std::span<const uint8_t>, 2> parts{std::span<const uint8_t>(res.fixed),
                                                   std::span<const uint8_t>(res.tail)};
      if (ch.reply(h.call_id, h.opcode, res.status, 0, parts) != ring::Status::Ok) return End::ReplyFailed;
    }
    if (s.violations() > max_violations) return End::Violations;
  }
}

bool read_full(int fd, void* buf, size_t n, int timeout_ms) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n) {
    pollfd pfd{fd, POLLIN, 0};
    if (poll(&pfd, 1, timeout_ms) <= 0) return false;
    ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

bool send_with_fd(int sock, const void* buf, size_t n, int fd) {
  iovec iov{const_cast<void*>(buf), n};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
  if (fd >= 0) {
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  return sendmsg(sock, &m, MSG_NOSIGNAL) == ssize_t(n);
}

}  // namespace

void Server::serve_socket_client(int fd) {
  proto::Hello hello{};
  proto::HelloReply rep{};
  rep.magic = proto::kHelloMagic;
  auto refuse = [&](int32_t status, const std::string& why) {
    rep.status = status;
    std::snprintf(rep.message, sizeof rep.message, "%s", why.c_str());
    send_with_fd(fd, &rep, sizeof rep, -1);
    spdlog::warn("refused a client: {}", why);
    close(fd);
  };
  if (!read_full(fd, &hello, sizeof hello, 2000) || hello.magic != proto::kHelloMagic)
    return refuse(cudaErrorInvalidValue, "bad hello");
  if (hello.max_version < proto::kMinVersion || hello.min_version > proto::kVersion)
    return refuse(cudaErrorInsufficientDriver, "no common protocol version");
  rep.version = std::min<uint16_t>(hello.max_version, proto::kVersion);

  ring::RegionConfig rc;
  rc.nchan = 1;
  rc.data_size = proto::kPinnedHeapOffset + cfg_.pinned_bytes;
  rc.hb_timeout_ms = cfg_.heartbeat_timeout_ms;
  std::string err;
  auto region = ring::Region::create_memfd("wormhole-client", rc, &err);
  if (!region) return refuse(cudaErrorMemoryAllocation, "region: " + err);
  ContextLimits lim;
  lim.memory_quota = cfg_.quota_bytes;
  auto ctx = backend_.create_context(0, lim, &err);
  if (!ctx) return refuse(cudaErrorDevicesUnavailable, "context: " + err);

  uint64_t sid = next_session_++;
  rep.status = 0;
  rep.channel = 0;
  rep.session_id = sid;
  if (!send_with_fd(fd, &rep, sizeof rep, region->fd())) {
    close(fd);
    return;
  }
  uint8_t claimed = 0;
  std::unique_ptr<ring::ServerChannel> ch;
  if (read_full(fd, &claimed, 1, 5000)) ch = ring::ServerChannel::attach(*region, 0, &err);
  if (!ch) {
    spdlog::warn("session {}: client never claimed its channel ({})", sid, err);
    close(fd);
    return;
  }
  live_sessions_++;
  {
    Session session(sid, backend_, std::move(ctx), ch->data(), stats_);
    spdlog::info("session {}: client pid {} connected ({} backend)", sid, hello.pid, backend_.name());
    auto gone = [fd] {
      pollfd p{fd, POLLIN | POLLRDHUP, 0};
      return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
    };
    End why = serve_channel(*ch, session, cfg_.max_violations, stopping_, gone);
    spdlog::info("session {}: ended ({}); freeing {} bytes of device memory", sid, to_string(why),
                 session.device_bytes());
  }
  live_sessions_--;
  close(fd);
}

void Server::serve_vm(const VmSpec& vm) {
  std::string err;
  ring::RegionConfig rc;
  rc.nchan = vm.channels;
  rc.features = 0;  // the guest runs another kernel: no futex across the boundary
  rc.data_size = proto::kPinnedHeapOffset + cfg_.pinned_bytes;
  rc.hb_timeout_ms = cfg_.heartbeat_timeout_ms;
  // QEMU maps the file as the guest's BAR when the VM starts, and a BAR
  // cannot grow: when the file already exists, fit the channels' data
  // areas (their pinned heaps) into its size instead of growing it.
  struct stat st{};
  if (stat(vm.path.c_str(), &st) == 0 && st.st_size > 0 &&
      ring::Region::required_size(rc) > uint64_t(st.st_size)) {
    ring::RegionConfig probe = rc;
    probe.data_size = 0;
    uint64_t fixed = ring::Region::required_size(probe);
    uint64_t per = uint64_t(st.st_size) > fixed ? (uint64_t(st.st_size) - fixed) / rc.nchan : 0;
    per &= ~uint64_t(4095);
    if (per < proto::kPinnedHeapOffset + (1u << 20)) {
      spdlog::error("vm {}: {} ({} MiB) is too small for {} channels; each needs at least {} MiB", vm.name,
                    vm.path, st.st_size >> 20, rc.nchan,
                    (ring::Region::required_size(probe) / rc.nchan + proto::kPinnedHeapOffset + (1u << 20)) >> 20);
      return;
    }
    rc.data_size = per;
  }
  auto region = ring::Region::create_file(vm.path, rc, &err);
  if (!region) {
    spdlog::error("vm {}: cannot serve {}: {}", vm.name, vm.path, err);
    return;
  }
  spdlog::info("vm {}: serving {} channels in {} ({} MiB)", vm.name, vm.channels, vm.path,
               region->size() >> 20);
  std::vector<std::thread> sessions;
  std::vector<std::atomic<bool>> busy(vm.channels);
  while (!stopping_) {
    for (uint32_t i = 0; i < vm.channels; i++) {
      if (busy[i].load()) continue;
      auto* chh = region->channel(i);
      if (__atomic_load_n(&chh->state, __ATOMIC_ACQUIRE) != WH_CHAN_CLAIMED) continue;
      auto ch = ring::ServerChannel::attach(*region, i, &err);
      if (!ch) continue;
      ContextLimits lim;
      lim.memory_quota = cfg_.quota_bytes;
      auto ctx = backend_.create_context(0, lim, &err);
      if (!ctx) {
        ch->reclaim();
        continue;
      }
      busy[i] = true;
      uint64_t sid = next_session_++;
      sessions.emplace_back([this, &busy, i, sid, &vm, ch = std::move(ch), ctx = std::move(ctx)]() mutable {
        live_sessions_++;
        {
          Session session(sid, backend_, std::move(ctx), ch->data(), stats_);
          spdlog::info("session {}: vm {} channel {} (guest pid {})", sid, vm.name, i, ch->client_pid());
          End why = serve_channel(*ch, session, cfg_.max_violations, stopping_, nullptr);
          spdlog::info("session {}: ended ({}); freeing {} bytes of device memory", sid, to_string(why),
                       session.device_bytes());
        }
        // The channel is free for the VM's next process: nothing of this
        // session's copy bookkeeping may leak into the next one.
        std::memset(ch->data().data(), 0, sizeof(proto::DataAreaStatus));
        ch->reclaim();
        live_sessions_--;
        busy[i] = false;
      });
    }
    std::this_thread::sleep_for(2ms);
  }
  for (auto& t : sessions) t.join();
}

int Server::run() {
  for (const auto& vm : cfg_.vms) track([this, vm] { serve_vm(vm); });

  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (cfg_.socket_path.size() >= sizeof addr.sun_path) {
    spdlog::error("socket path too long: {}", cfg_.socket_path);
    return 2;
  }
  std::strcpy(addr.sun_path, cfg_.socket_path.c_str());
  unlink(cfg_.socket_path.c_str());
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(listen_fd_, 64) != 0) {
    spdlog::error("cannot listen on {}: {}", cfg_.socket_path, strerror(errno));
    return 2;
  }
  chmod(cfg_.socket_path.c_str(), 0600);
  spdlog::info("wormhole-server: {} backend, {} device(s), listening on {}", backend_.name(),
               backend_.device_count(), cfg_.socket_path);
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    track([this, fd] { serve_socket_client(fd); });
  }
  close(listen_fd_);
  unlink(cfg_.socket_path.c_str());
  {
    std::lock_guard lk(threads_mu_);
    for (auto& t : threads_)
      if (t.t.joinable()) t.t.join();
    threads_.clear();
  }
  return 0;
}

}  // namespace wh::server
