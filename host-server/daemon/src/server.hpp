// The wormhole-server daemon: rendezvous on a unix socket, one shared
// region (memfd) and one session thread per client process; plus one
// shared region per VM (a QEMU ivshmem memory-backend-file) whose channels
// are served as guest processes claim them.
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "paths.hpp"
#include "pinned_segments.hpp"
#include "wormhole/net.hpp"
#include "wormhole/ring.hpp"
#include "wormhole/server/backend.hpp"
#include "wormhole/server/checkpoint.hpp"
#include "wormhole/server/session.hpp"

namespace wh::server {

struct VmSpec {
  std::string name;
  std::string path;        // the file QEMU maps as the ivshmem BAR
  uint32_t channels = 8;  // client processes the VM may run at once
  // The VM's exitless gate memory object (the file behind the
  // memory-backend-file of QEMU's -object wormhole-gate); empty: no gate.
  std::string gate_path;
};

struct ServerConfig {
  std::string socket_path;
  uint32_t socket_mode = 0600;  // who may connect: the owner only, by default
  std::string socket_group;     // group of the socket (empty: the server's)
  uint64_t quota_bytes = 0;         // per-session device memory (0: device size)
  // Device memory all host clients of one uid hold together (SO_PEERCRED);
  // uids not listed have no such limit. VM channels have no uid.
  std::map<uint32_t, uint64_t> uid_quota_bytes;
  uint64_t pinned_bytes = 256ull << 20;  // per-client pinned heap in the data area
  // Pinned memory socket clients may add past their data area (shared
  // segments), all sessions of one uid together; 0: none.
  uint64_t pinned_budget_bytes = 0;
  uint32_t max_violations = 64;     // malformed requests before a client is dropped
  // Socket connections served at once (sessions and handshakes in progress):
  // each holds a thread, so a flood of idle connections is refused, not served.
  uint32_t max_clients = 256;
  uint32_t heartbeat_timeout_ms = 600;  // silence after which a peer is dead
  // A VM's process whose heartbeat stood still this long is dead (host
  // processes are watched through their pid and socket instead); 0: the
  // heartbeat timeout.
  uint32_t vm_heartbeat_timeout_ms = 0;
  std::string admin_socket_path;  // wormholectl's socket ("off": none)
  uint32_t admin_mode = 0600;
  std::string admin_group;
  std::string metrics_addr;       // ADDR:PORT of the Prometheus endpoint (empty: none)
  std::vector<VmSpec> vms;
  // Network clients over UCX (docs/remote.md): ucx://HOST:PORT, empty: none.
  std::string listen_url;
  std::vector<std::string> auth_key_files;  // each a credential; required with listen_url
  uint32_t remote_timeout_ms = 10000;       // silence after which a network client is dropped
};

class GateVm;

class Server {
 public:
  Server(ServerConfig cfg, Backend& backend);
  ~Server();
  // Serves until stop() (or a signal handler calling it). Returns 0 on a
  // clean stop, 2 when the socket or a VM's gate memory object is unusable.
  int run();
  void stop();
  const Stats& stats() const { return stats_; }
  // Async-signal-safe: the accept loop logs the statistics (Stats) or that
  // the configuration is read at start only (Reload).
  enum class Report { None, Stats, Reload };
  void request_report(Report r) { report_.store(r); }
  // Refuses new sessions; run() returns once the last one ended.
  void drain() { draining_ = true; }
  // One admin request (a JSON object) and its answer (admin.cpp).
  // `fds`: descriptors that came with it (a migrating session's, "adopt").
  std::string admin_request(const std::string& line, int64_t peer_uid, const std::vector<int>& fds = {});
  // The Prometheus text exposition of the counters (metrics.cpp).
  std::string metrics_text();

 private:
  void serve_socket_client(int fd);
  // A socket client's session: what serves it, owned by its thread (or, while
  // a migrated session is adopted, by the admin thread).
  struct SocketSession {
    int fd = -1;     // the client's socket: liveness, pinned segments
    int pidfd = -1;  // the client's process
    ucred cred{};
    std::unique_ptr<ring::Region> region;
    std::unique_ptr<ring::ServerChannel> ch;
    std::unique_ptr<SocketPinnedSource> pinned;
    std::unique_ptr<Session> session;
    ~SocketSession();
  };
  void run_socket_session(std::unique_ptr<SocketSession> ss);
  // An operator's request to move a session (wormholectl migrate), served
  // by the session's thread between two requests.
  struct Migration {
    // Move: to another server; Checkpoint: to a file, then the session is
    // held (not served) until this server goes or Resume continues it here.
    enum class Kind { Move, Checkpoint, Resume } kind = Kind::Move;
    std::string to;  // Move: the destination server's admin socket; Checkpoint: the file
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::string error;  // empty: moved
    uint64_t new_id = 0;
    void finish(std::string err, uint64_t id) {
      std::lock_guard lk(mu);
      error = std::move(err);
      new_id = id;
      done = true;
      cv.notify_all();
    }
  };
  // Migration (migrate.cpp). The source's side, on the session's thread:
  // saves the session and hands it, with its region and client socket, to
  // the destination; true once the destination serves it (the session then
  // ends here), false (m.error) with the session untouched, or *lost when a
  // destination that did not answer had taken the channel over (it read or
  // answered requests): the session must end here without serving again.
  bool migrate_out(SocketSession& ss, Migration& m, bool* lost);
  // Checkpoint: the session saved to m.to and marked held in its status
  // page (its client resumes from the file when this server goes); false
  // (m.error) with the session untouched.
  bool checkpoint_out(SocketSession& ss, Migration& m);
  // Restores a checkpoint as the session of the client whose region and
  // socket these are, taking over its channel; *out serves it.
  std::string adopt_session(int region_fd, int client_fd, const CheckpointHeader& hdr, std::span<const uint8_t> content,
                            int64_t peer_uid, std::unique_ptr<SocketSession>* out,
                            std::span<const int> segment_fds = {});
  // A context for a session being restored: of this server's device kind, at
  // its saved device-address window, with the uid's budget and room for the
  // device memory it holds; null and *err (for the operator) otherwise.
  std::unique_ptr<Context> restore_context(const CheckpointHeader& hdr, uint32_t uid, std::string* err);
  // wormholectl restore FILE: a checkpoint waiting for its client, which
  // reconnects with its token (proto::kHelloResume).
  std::string restore_file(const std::string& path, CheckpointHeader* hdr);
  struct PendingRestore {
    CheckpointHeader hdr;
    Bytes content;
  };
  std::mutex restores_mu_;
  std::map<std::pair<uint64_t, uint64_t>, PendingRestore> restores_;  // by token
  // A resuming client's hello (serve_socket_client).
  void resume_client(int fd, const ucred& cred, const proto::ResumeHello& rh, std::span<const int> passed);
  // The destination's side, on the admin thread: a session handed over with
  // its descriptors (region, client socket, checkpoint), restored and served.
  std::string adopt(const std::vector<int>& fds, int64_t peer_uid, uint64_t* sid);
  // wormholectl migrate: waits for the session's thread to move it.
  // wait_s: give up (the session going on) when it has not stopped within
  // that many seconds; 0: a network client's session 60, others no limit.
  std::string migrate_session(uint64_t id, Migration::Kind kind, const std::string& to, int64_t peer_uid,
                              uint64_t* new_id, uint32_t wait_s = 0);
  // Network clients over UCX (remote.cpp): the listener is made at start
  // (a bad address or key stops the start), then served by its own thread.
  bool start_remote();
  void serve_remote_listener();
  void serve_remote_client(std::shared_ptr<net::Link> link);
  // A network client's session and its data area (private to the server).
  struct RemoteSession {
    uint8_t* data = nullptr;
    size_t data_size = 0;
    std::unique_ptr<Session> session;
    ~RemoteSession();
  };
  // Serves an authenticated network client's session until it ends or
  // moves (`how`: for the log).
  void run_remote_session(std::shared_ptr<net::Link> link, std::unique_ptr<RemoteSession> rs,
                          uint32_t client_timeout_ms, const net::Key& key, uint32_t pid);
  // A private data area for a network session, or null.
  std::unique_ptr<RemoteSession> remote_data_area();
  // Moving network sessions between servers (remote_migrate.cpp). The
  // source, on the session's thread before a synchronous request: saves the
  // session and hands it to the destination over its own authenticated
  // link; true (and the notice the client follows) once the destination
  // holds it, false (m.error) with the session untouched.
  bool migrate_remote_out(Session& s, Migration& m, const net::Key& key, uint32_t pid, proto::MovedNotice* notice);
  // The destination: a server presenting a move (net::kMoveMagic) with the
  // key `key`; the session is restored and waits for its client.
  void receive_moved_session(net::Link& link, const net::Challenge& ch, const net::Proof& pr, const net::Key& key);
  // Moved sessions waiting for their client (net::kResumeMagic), by token;
  // dropped when it does not come within kArrivalWaitS.
  struct Arrival {
    std::unique_ptr<RemoteSession> rs;
    std::vector<uint8_t> secret;  // the credential it belongs to
    uint32_t pid = 0;
    std::chrono::steady_clock::time_point expires;
  };
  std::unique_ptr<RemoteSession> take_arrival(const net::Proof& pr, const net::Key& key, std::string* why);
  void expire_arrivals(bool all);
  std::mutex arrivals_mu_;
  std::map<std::pair<uint64_t, uint64_t>, Arrival> arrivals_;
  // Peer copies (proto/peer_api.def): a server pushing to one of our
  // sessions, and our pushes to another server.
  void serve_peer(net::Link& link, const net::PeerOffer& offer);
  int32_t peer_push(const std::string& url, const PeerTickets::Ticket& t, uint64_t dst,
                    std::span<const uint8_t> bytes);
  PeerTickets peer_tickets_;
  // Links to other servers kept for the next push there (one user at a
  // time: a push takes its link out of the map and puts it back after).
  std::mutex peer_mu_;
  std::map<std::string, std::unique_ptr<net::Link>> peer_links_;
  std::unique_ptr<net::Listener> remote_listener_;
  std::vector<net::Key> remote_keys_;
  // A VM's region, sized to fit a file QEMU already maps; null and `err`
  // when it cannot be served (the server then does not start).
  std::unique_ptr<ring::Region> open_vm_region(const VmSpec& vm, std::string* err);
  void serve_vm(const VmSpec& vm, GateVm* gate, std::shared_ptr<ring::Region> region);
  // Binds the socket; refuses a path another live server listens on.
  int listen_socket();
  // Runs fn on a thread of its own; joins threads that already finished
  // (a finished, unjoined thread keeps its stack: one per past client).
  void track(std::function<void()> fn);
  // Sessions being served, so that a kernel still running when its client
  // is gone (or the server stops) can be cancelled from the accept loop.
  struct Live {
    Session* s;
    std::function<bool()> gone;  // the client's socket hung up (null: not known)
    int64_t pid = 0;             // host process (SO_PEERCRED) or the guest's own word
    int64_t uid = -1;            // host process: SO_PEERCRED; -1 in a VM
    std::string vm;              // empty: a host process
    uint32_t channel = 0;
    std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
    std::atomic<bool>* killed = nullptr;  // set by `wormholectl kill` (owned by the session's thread)
    // Socket clients: set by `wormholectl migrate` with `migration` (null:
    // the session cannot migrate).
    std::atomic<bool>* migrate = nullptr;
    bool network = false;  // a ucx:// client's: moves to ucx:// servers only
    std::shared_ptr<Migration> migration;  // under live_mu_
  };
  std::list<Live>::iterator watch(Session& s, Live info);
  void unwatch(std::list<Live>::iterator it);
  void cancel_orphaned_kernels(bool all);
  // The admin socket and the metrics endpoint (admin.cpp, metrics.cpp):
  // false and a logged reason when they cannot be served.
  bool start_admin();
  void serve_admin();
  bool start_metrics();
  void stop_metrics();
  bool kill_session(uint64_t id);

  ServerConfig cfg_;
  Backend& backend_;
  std::map<uint32_t, std::shared_ptr<SharedQuota>> uid_budgets_;  // from cfg_.uid_quota_bytes, made at start
  PinnedBudget pinned_budget_{cfg_.pinned_budget_bytes};          // grown pinned memory, per uid
  Stats stats_;
  std::atomic<bool> stopping_{false};
  std::atomic<Report> report_{Report::None};
  // The socket file this server created (device, inode): only that one is
  // removed at exit, never one another server put there since.
  uint64_t sock_dev_ = 0, sock_ino_ = 0;
  std::atomic<uint64_t> next_session_{1};
  std::atomic<int> live_sessions_{0};
  std::atomic<uint32_t> connections_{0};  // socket clients being served (handshake or session)
  std::atomic<bool> draining_{false};
  int admin_fd_ = -1;
  uint64_t admin_dev_ = 0, admin_ino_ = 0;
  std::thread admin_thread_, metrics_thread_;
  struct Metrics;
  std::shared_ptr<Metrics> metrics_;  // (shared_ptr: Metrics is complete in metrics.cpp only)
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  int listen_fd_ = -1;
  std::mutex threads_mu_;
  struct Tracked {
    std::thread t;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Tracked> threads_;
  std::vector<std::unique_ptr<GateVm>> gates_;
  std::mutex live_mu_;
  std::list<Live> live_;  // per cfg_.vms entry; null: no gate
};


}  // namespace wh::server
