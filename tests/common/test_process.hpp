// Test helpers: child processes with captured output and timeouts, and a
// private wormhole-server per test (sim backend, its own socket).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace wh::test {

class Process {
 public:
  struct Result {
    int status = -1;  // exit code, or 128+signal, or -1 on timeout
    std::string output;
  };

  // stdout and stderr go to one pipe (output()), or stderr to `stderr_file`
  // when one is named (to tell the two streams apart).
  static Process spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       const std::string& stderr_file = {}) {
    Process p;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return p;
    p.pid_ = fork();
    if (p.pid_ == 0) {
      dup2(fds[1], 1);
      int efd = stderr_file.empty() ? fds[1] : open(stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (efd < 0) _exit(126);
      dup2(efd, 2);
      for (auto& e : env) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    p.fd_ = fds[0];
    return p;
  }

  static Result run(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                    std::chrono::seconds timeout, const std::string& stderr_file = {}) {
    Process p = spawn(argv, env, stderr_file);
    Result r;
    r.status = p.wait(timeout);
    r.output = p.output();
    return r;
  }

  Process() = default;
  Process(Process&& o) noexcept : pid_(o.pid_), fd_(o.fd_), out_(std::move(o.out_)) { o.pid_ = -1, o.fd_ = -1; }
  Process& operator=(Process&& o) noexcept {
    std::swap(pid_, o.pid_);
    std::swap(fd_, o.fd_);
    std::swap(out_, o.out_);
    return *this;
  }
  ~Process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) close(fd_);
  }

  // Reads what is available within `ms`.
  void pump(int ms) {
    if (fd_ < 0) return;
    pollfd p{fd_, POLLIN, 0};
    while (poll(&p, 1, ms) > 0) {
      char buf[4096];
      ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) {
        close(fd_);
        fd_ = -1;
        return;
      }
      out_.append(buf, size_t(n));
      ms = 0;
    }
  }
  bool wait_for_output(const std::string& needle, std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pump(50);
      if (out_.find(needle) != std::string::npos) return true;
      if (fd_ < 0) return false;
    }
    return false;
  }
  int wait(std::chrono::seconds timeout) {
    if (pid_ <= 0) return -1;  // never started (waitpid(-1) would reap any child)
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      pump(20);
      int st;
      pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        pump(0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      }
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
        out_ += "\n[test: killed after timeout]\n";
        return -1;
      }
    }
  }
  void kill(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  bool alive() {
    if (pid_ <= 0) return false;
    return waitpid(pid_, nullptr, WNOHANG) == 0;
  }
  const std::string& output() {
    pump(0);
    return out_;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string out_;
};

// Waits (about 6 s) until `path` exists; false as soon as `proc` has died.
inline bool wait_for_path(const std::string& path, Process& proc) {
  for (int i = 0; i < 300; i++) {
    struct stat st;
    if (stat(path.c_str(), &st) == 0) return true;
    proc.pump(20);
    if (!proc.alive()) return false;
  }
  return false;
}

// A wormhole-server on a private socket, stopped (SIGTERM) at destruction.
class Server {
 public:
  // With WH_TEST_STACKED=1 in the environment (ctest label `stacked`) the
  // server a test talks to runs the cuda backend over Wormhole's own drop-ins
  // (--allow-dropin-driver), which forward to a second, sim server: the sim
  // device's options go to that one, the rest to the first.
  static bool stacked() {
    const char* e = std::getenv("WH_TEST_STACKED");
    return e && *e && std::strcmp(e, "0") != 0;
  }
  bool start(const std::vector<std::string>& extra) {
    socket_ = "/tmp/wh-test-" + std::to_string(getpid()) + "-" + std::to_string(counter()++) + ".sock";
    // A server killed by an earlier test run may have left this name (pids
    // repeat): waiting for the path must not find that stale file.
    unlink(socket_.c_str());
    if (!stacked()) {
      std::vector<std::string> argv{WH_SERVER_BIN, "--backend", "sim", "--socket", socket_, "--sim-threads", "2"};
      argv.insert(argv.end(), extra.begin(), extra.end());
      proc_ = Process::spawn(argv, {});
      return wait_for_path(socket_, proc_);
    }
    static const char* const kSimOptions[] = {"--sim-memory-mb", "--sim-threads", "--kernel-timeout-ms",
                                              "--device-va-base"};
    std::vector<std::string> top{WH_SERVER_BIN, "--backend", "cuda", "--allow-dropin-driver", "--socket", socket_};
    std::vector<std::string> sim{WH_SERVER_BIN, "--backend", "sim", "--socket", sim_socket(), "--sim-threads", "2",
                                 "--log-level", "warn"};
    for (size_t i = 0; i < extra.size(); i++) {
      bool to_sim = std::find(std::begin(kSimOptions), std::end(kSimOptions), extra[i]) != std::end(kSimOptions);
      auto& into = to_sim ? sim : top;
      into.push_back(extra[i]);
      if (i + 1 < extra.size() && extra[i + 1].rfind("--", 0) != 0) into.push_back(extra[++i]);
    }
    unlink(sim_socket().c_str());
    // Both servers sleep as soon as they wait: three spinning parties (client,
    // two servers) on a two-core machine starve the one with work.
    sim_ = Process::spawn(sim, {"WORMHOLE_SPIN=0"});
    if (!wait_for_path(sim_socket(), sim_)) return false;
    proc_ = Process::spawn(top, {"WORMHOLE_SOCKET=" + sim_socket(), std::string("LD_LIBRARY_PATH=") + WH_GUEST_LIB_DIR,
                                 "WORMHOLE_SPIN=0"});
    return wait_for_path(socket_, proc_);
  }
  ~Server() {
    proc_.kill(SIGTERM);
    proc_.wait(std::chrono::seconds(10));
    if (stacked()) {
      sim_.kill(SIGTERM);
      sim_.wait(std::chrono::seconds(10));
      unlink(sim_socket().c_str());
    }
  }
  std::vector<std::string> client_env() const {
    std::vector<std::string> env{"WORMHOLE_SOCKET=" + socket_, std::string("LD_LIBRARY_PATH=") + WH_GUEST_LIB_DIR};
#ifdef WH_SANITIZER_PRELOAD
    // A sanitized drop-in library inside an uninstrumented nvcc program needs
    // the sanitizer's runtime loaded first.
    env.push_back(std::string("LD_PRELOAD=") + WH_SANITIZER_PRELOAD);
    env.push_back("ASAN_OPTIONS=verify_asan_link_order=0:detect_leaks=0");
#endif
    return env;
  }
  const std::string& socket() const { return socket_; }
  // The server's output (stacked: then the sim server's under it).
  std::string log() {
    if (!stacked()) return proc_.output();
    return proc_.output() + "\n--- the sim server under it:\n" + sim_.output();
  }
  bool alive() { return proc_.alive(); }
  // Stops the server; returns its exit status.
  int stop() {
    proc_.kill(SIGTERM);
    return proc_.wait(std::chrono::seconds(10));
  }

 private:
  std::string sim_socket() const { return socket_.substr(0, socket_.size() - 5) + "-sim.sock"; }
  static int& counter() {
    static int c = 0;
    return c;
  }
  std::string socket_;
  Process proc_;
  Process sim_;  // stacked: the sim server under proc_
};

// What the stacked runs leave out (docs/hardware.md lists each): the first
// three are the nature of Wormhole's own driver standing in for NVIDIA's, the
// last is what the cuda backend does on a GPU too.
namespace stacked_why {
inline constexpr const char* kHostMemory =
    "host memory of the cuda-backend server's process is not device memory of the sim server it forwards to "
    "(mapped, registered and managed memory)";
inline constexpr const char* kOneSession =
    "the drop-in driver's contexts share its process's one session: a fault, a runaway kernel or an address in "
    "one of the cuda-backend server's sessions reaches the others";
inline constexpr const char* kSassOnly = "a SASS-only image (-rdc=true's device-linked one): only a GPU runs it";
inline constexpr const char* kDeviceOutput =
    "cuda backend: kernel printf/assert text and fault details go to the server's own output, where the driver "
    "writes them";
}  // namespace stacked_why

}  // namespace wh::test

// In a stacked run (WH_TEST_STACKED=1): skips the rest of the test, saying why.
#define WH_EXCLUDE_WHEN_STACKED(why)                                                          \
  do {                                                                                      \
    if (::wh::test::Server::stacked()) GTEST_SKIP() << "excluded when stacked: " << (why); \
  } while (0)
