#include "connection.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdarg>
#include <cstring>
#include <set>

#include "wormhole/ivshmem.hpp"

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
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard lk(mu);
  if (seen.insert(msg).second) std::fprintf(stderr, "wormhole: %s\n", msg.c_str());
}

ring::Message& Connection::reply_buffer() {
  thread_local ring::Message m;
  return m;
}

cudaError_t Connection::link_error(ring::Status s) {
  log_once(std::string("link to wormhole-server lost: ") + ring::to_string(s) + " " + chan_->error());
  return cudaErrorDevicesUnavailable;
}

// A VM channel is reused by the VM's successive processes: forget the copy
// sequence numbers the previous owner's server published. The server only
// writes the page in answer to our requests, so nothing races with this.
void Connection::reset_status_page() {
  auto* st = reinterpret_cast<proto::DataAreaStatus*>(chan_->data().data());
  __atomic_store_n(&st->copy_done_seq, uint64_t(0), __ATOMIC_RELEASE);
  __atomic_store_n(&st->copy_error_seq, uint64_t(0), __ATOMIC_RELEASE);
}

Connection::~Connection() {
  chan_.reset();  // says goodbye to the server
  region_.reset();
  if (ivshmem_) delete static_cast<ivshmem::Mapping*>(ivshmem_);
  if (sock_ >= 0) close(sock_);
}

static std::string socket_path() {
  if (const char* e = std::getenv("WORMHOLE_SOCKET")) return e;
  return "/tmp/wormhole-" + std::to_string(getuid()) + ".sock";
}

bool Connection::connect_socket(std::string* err) {
  std::string path = socket_path();
  sock_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  if (connect(sock_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    *err = "cannot reach wormhole-server at " + path + ": " + strerror(errno);
    return false;
  }
  proto::Hello h{};
  h.magic = proto::kHelloMagic;
  h.min_version = proto::kMinVersion;
  h.max_version = proto::kVersion;
  h.pid = uint32_t(getpid());
  if (write(sock_, &h, sizeof h) != ssize_t(sizeof h)) {
    *err = "handshake write failed";
    return false;
  }
  proto::HelloReply rep{};
  iovec iov{&rep, sizeof rep};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(sizeof(int))];
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  ssize_t n = recvmsg(sock_, &m, MSG_CMSG_CLOEXEC);
  if (n != ssize_t(sizeof rep) || rep.magic != proto::kHelloMagic) {
    *err = "bad handshake reply";
    return false;
  }
  if (rep.status != 0) {
    rep.message[sizeof rep.message - 1] = 0;
    *err = std::string("server refused: ") + rep.message;
    return false;
  }
  int fd = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
  if (fd < 0) {
    *err = "server sent no region";
    return false;
  }
  region_ = ring::Region::attach_fd(fd, err);
  close(fd);
  if (!region_) return false;
  chan_ = ring::ClientChannel::claim(*region_, int(rep.channel), err);
  if (!chan_) return false;
  reset_status_page();
  uint8_t ok = 1;
  if (write(sock_, &ok, 1) != 1) {
    *err = "handshake write failed";
    return false;
  }
  version_ = rep.version;
  transport_ = "shm";
  return chan_->wait_attached(std::chrono::seconds(5)) == ring::Status::Ok ||
         (*err = "server did not attach", false);
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

Connection* Connection::get() {
  static Connection* conn = [] {
    auto* c = new Connection();
    std::string err;
    const char* t = std::getenv("WORMHOLE_TRANSPORT");
    std::string want = t ? t : "auto";
    bool ok = false;
    if (want == "ivshmem" || (want == "auto" && (std::getenv("WORMHOLE_DEVICE") ||
                                                 !ivshmem::find_devices().empty())))
      ok = c->connect_ivshmem(&err);
    else if (want == "shm" || want == "auto")
      ok = c->connect_socket(&err);
    else
      err = "unknown WORMHOLE_TRANSPORT '" + want + "' (shm, ivshmem)";
    if (!ok) {
      log("%s", err.c_str());
      delete c;
      return static_cast<Connection*>(nullptr);
    }
    if (std::getenv("WORMHOLE_VERBOSE")) log("connected over %s", c->transport_);
    return c;
  }();
  // Say goodbye at exit so the server frees this process's resources at once.
  static bool registered = conn && std::atexit([] { delete conn; }) == 0;
  (void)registered;
  return conn;
}

}  // namespace wh::guest
