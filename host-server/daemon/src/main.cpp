// wormhole-server: serves forwarded CUDA calls from client processes and VMs.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <pwd.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <toml++/toml.h>

#include "server.hpp"
#include "wormhole/proto/wire.hpp"
#include "wormhole/ptx/engine.hpp"

namespace {
wh::server::Server* g_server = nullptr;
void on_signal(int) {
  if (g_server) g_server->stop();
}
// SIGUSR1: statistics to the log; SIGHUP: the configuration is read at start
// only, which the log says. Neither stops the server. The handler only sets
// a flag (the server's loop acts on it).
void on_info_signal(int sig) {
  if (g_server) g_server->request_report(sig == SIGHUP ? wh::server::Server::Report::Reload
                                                      : wh::server::Server::Report::Stats);
}

constexpr const char* kEnvironment = R"(
Environment of the guest libraries (read by the programs, not the server):
  WORMHOLE_SOCKET          the server's socket (default /tmp/wormhole-$UID.sock)
  WORMHOLE_TRANSPORT       auto | shm | ivshmem | vmfunc (default auto)
  WORMHOLE_DEVICE          the ivshmem device to use: a PCI address or a path
  WORMHOLE_GATE            the exitless gate device (default /dev/wormhole-gate)
  WORMHOLE_GATE_TIMEOUT_MS longest wait of one exitless gate call (0: none)
  WORMHOLE_VERBOSE         set: the libraries log the transport they chose
  WORMHOLE_LIB_DIR         wormhole-run: where the guest libraries are
Server environment:
  WORMHOLE_BLAS_THREADS    sim backend: OpenBLAS threads (default 1)
  WORMHOLE_PTX_JIT         sim backend: auto | always | off: compile kernels to native
                           code once they ran 100 ms interpreted, at first launch, or never
Signals: SIGTERM/SIGINT stop the server (running kernels are cancelled);
SIGUSR1 logs the statistics; SIGHUP logs that the configuration is read at
start only (restart to apply changes).)";

std::string dashed(std::string key) {
  std::replace(key.begin(), key.end(), '_', '-');
  return "--" + key;
}

// The config file: every key is a long option ('-' as '_'), checked by the
// option's own validators; the command line wins over the file; an unknown
// key, a value of the wrong type or an invalid value stops the start with
// the key and its line.
int apply_config(CLI::App& app, const std::string& path) {
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::fprintf(stderr, "wormhole-server: %s:%u: %s\n", path.c_str(), unsigned(e.source().begin.line),
                 std::string(e.description()).c_str());
    return 2;
  }
  for (auto&& [k, v] : t) {
    const std::string key(k.str());
    const unsigned line = unsigned(v.source().begin.line);
    auto fail = [&](const std::string& why) {
      std::fprintf(stderr, "wormhole-server: %s:%u: %s: %s\n", path.c_str(), line, key.c_str(), why.c_str());
      return 2;
    };
    CLI::Option* o = nullptr;
    try {
      o = app.get_option(dashed(key));
    } catch (const CLI::OptionNotFound&) {
    }
    if (!o || key == "config" || key == "help" || key == "version") return fail("unknown key");
    // Given on the command line too: the file's value is still checked, then
    // the command line's is applied again (it wins).
    const std::vector<std::string> from_cli = o->count() > 0 ? o->results() : std::vector<std::string>{};
    auto scalar = [](const toml::node& n, std::string* out) {
      if (auto s = n.value_exact<std::string>()) *out = *s;
      else if (auto i = n.value_exact<int64_t>()) *out = std::to_string(*i);
      else if (auto b = n.value_exact<bool>()) *out = *b ? "true" : "false";
      else return false;
      return true;
    };
    std::vector<std::string> vals;
    if (auto* arr = v.as_array()) {
      for (auto& e : *arr) {
        std::string s;
        if (!scalar(e, &s)) return fail("array elements must be strings or integers");
        vals.push_back(s);
      }
      if (o->get_items_expected_max() <= 1) return fail("takes one value, not an array");
    } else {
      std::string s;
      if (!scalar(v, &s)) return fail("wants a string, an integer or a boolean");
      vals.push_back(s);
    }
    try {
      o->clear();
      o->add_result(vals);
      o->run_callback();
    } catch (const CLI::Error& e) {
      return fail(e.what());
    }
    if (!from_cli.empty()) {
      o->clear();
      o->add_result(from_cli);
      o->run_callback();
    }
  }
  return 0;
}

// NAME=PATH[:CHANNELS] with CHANNELS a number in 1..kMaxVmChannels.
constexpr uint32_t kMaxVmChannels = 64;
bool parse_vm(const std::string& a, uint32_t default_channels, wh::server::VmSpec* vm) {
  auto eq = a.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == a.size()) return false;
  vm->channels = default_channels;
  vm->name = a.substr(0, eq);
  vm->path = a.substr(eq + 1);
  if (auto c = vm->path.rfind(':'); c != std::string::npos) {
    const std::string n = vm->path.substr(c + 1);
    if (n.empty() || n.size() > 3 || n.find_first_not_of("0123456789") != std::string::npos) return false;
    vm->channels = uint32_t(std::stoul(n));
    vm->path.resize(c);
  }
  return !vm->path.empty() && vm->channels >= 1 && vm->channels <= kMaxVmChannels;
}
// USER=MB: USER a uid or a user name known to the system.
bool parse_uid_quota(const std::string& a, uint32_t* uid, uint64_t* mb) {
  auto eq = a.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == a.size()) return false;
  const std::string user = a.substr(0, eq), n = a.substr(eq + 1);
  if (n.size() > 10 || n.find_first_not_of("0123456789") != std::string::npos) return false;
  *mb = std::stoull(n);
  if (*mb == 0 || *mb > (1ull << 30)) return false;
  if (user.find_first_not_of("0123456789") == std::string::npos) {
    if (user.size() > 10 || std::stoull(user) >= uint64_t(uid_t(-1))) return false;
    *uid = uint32_t(std::stoull(user));
    return true;
  }
  passwd* pw = getpwnam(user.c_str());
  if (!pw) return false;
  *uid = pw->pw_uid;
  return true;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wormhole-server: runs CUDA calls forwarded from guests on a GPU (or the sim device)"};
  std::string backend_name = "auto", config_path, log_level = "info";
  std::vector<std::string> vm_args, vm_gate_args;
  uint64_t quota_mb = 0, sim_memory_mb = 8192, pinned_mb = 256;
  unsigned sim_threads = 0;
  uint64_t kernel_timeout_ms = 0;
  bool stats_on_exit = true;
  wh::server::ServerConfig cfg;
  cfg.socket_path = wh::server::default_socket_path();

  app.set_version_flag("--version", "wormhole-server " WH_VERSION " (protocol " + std::to_string(wh::proto::kVersion) + ")");
  app.option_defaults()->always_capture_default();
  app.footer(kEnvironment);
  app.add_option("--config", config_path,
                 "TOML config file: keys as the long options with '_' for '-'; the command line wins")
      ->check(CLI::ExistingFile);
  app.add_option("--backend", backend_name, "cuda | sim | auto (cuda if a GPU is present)")
      ->check(CLI::IsMember({"auto", "cuda", "sim"}));
  app.add_option("--socket", cfg.socket_path, "unix socket clients rendezvous on (WORMHOLE_SOCKET in clients)");
  std::string socket_mode = "0600";
  app.add_option("--socket-mode", socket_mode, "permissions of the socket, octal (0660: the socket's group too)")
      ->check([](const std::string& m) {
        return m.size() >= 3 && m.size() <= 4 && m.find_first_not_of("01234567") == std::string::npos &&
                       std::stoul(m, nullptr, 8) <= 0777
                   ? std::string()
                   : std::string("an octal mode such as 0600 or 0660");
      });
  app.add_option("--socket-group", cfg.socket_group, "group of the socket (with --socket-mode 0660: its members connect)");
  // Sizes in MiB are bounded so that the byte counts (<< 20) cannot wrap.
  app.add_option("--quota-mb", quota_mb, "device memory per client session (0: the device's)")
      ->check(CLI::Range(uint64_t(0), uint64_t(1) << 30));
  std::vector<std::string> uid_quota_args;
  app.add_option("--uid-quota-mb", uid_quota_args,
                 "device memory all sessions of one user hold together: USER=MB (a uid or a user name; "
                 "repeatable; host clients only)");
  app.add_option("--max-clients", cfg.max_clients,
                 "socket clients served at once (sessions and handshakes); more are refused at connect")
      ->check(CLI::Range(1u, 65536u));
  app.add_option("--listen", cfg.listen_url,
                 "also serve network clients over UCX at ucx://HOST:PORT (needs --auth-key-file; docs/remote.md)");
  app.add_option("--auth-key-file", cfg.auth_key_files,
                 "shared secret network clients prove they hold (repeatable: one per credential; mode 0600; "
                 "its owner's --uid-quota-mb applies)");
  app.add_option("--remote-timeout-ms", cfg.remote_timeout_ms,
                 "a network client silent this long (no request, no keepalive) is dropped")
      ->check(CLI::Range(100u, 3600000u));
  app.add_option("--pinned-mb", pinned_mb, "pinned host memory per client (in its shared data area)")
      ->check(CLI::Range(uint64_t(1), uint64_t(1) << 16));
  // "auto" rather than a number as the default: the machine's memory
  // differs from one host to the next, and the shipped config shows it.
  std::string pinned_budget_arg = "auto";
  app.add_option("--pinned-budget-mb", pinned_budget_arg,
                 "pinned host memory past --pinned-mb that all clients of one user may add together, in shared "
                 "segments made on demand (auto: half of this machine's memory; 0: none, past --pinned-mb "
                 "pinned allocations are pageable memory)")
      ->check([](const std::string& v) {
        return v == "auto" || (!v.empty() && v.size() <= 10 && v.find_first_not_of("0123456789") == std::string::npos &&
                               std::stoull(v) <= (uint64_t(1) << 30))
                   ? std::string()
                   : std::string("auto, or MiB from 0 to 1073741824");
      });
  app.add_option("--sim-memory-mb", sim_memory_mb, "device memory of the sim device")
      ->check(CLI::Range(uint64_t(16), uint64_t(1) << 30));
  app.add_option("--sim-threads", sim_threads, "host threads running sim kernels (0: all cores)")
      ->check(CLI::Range(0u, 4096u));
  app.add_option("--kernel-timeout-ms", kernel_timeout_ms,
                 "sim device: a kernel running longer fails with cudaErrorLaunchTimeout (0: no limit)")
      ->check(CLI::Range(uint64_t(0), uint64_t(1) << 40));
  std::string va_base_arg;
  app.add_option("--device-va-base", va_base_arg,
                 "sim device: first device address of the sessions, a multiple of 2^40 (hex 0x...) from 2^48 to "
                 "0xF1 << 48; default a random one (servers one process uses together need distinct ones)")
      ->check([](const std::string& v) {
        char* end = nullptr;
        errno = 0;
        unsigned long long a = std::strtoull(v.c_str(), &end, 0);
        return !v.empty() && end && !*end && errno == 0 && (a & ((1ull << 40) - 1)) == 0 &&
                       a >= wh::server::kSimVaBaseMin && a < wh::server::kSimVaBaseEnd
                   ? std::string()
                   : std::string("a multiple of 2^40 from 0x1000000000000 to below 0xf1000000000000");
      });
  app.add_option("--vm", vm_args, "serve a VM's ivshmem region: NAME=PATH[:CHANNELS]");
  app.add_option("--vm-gate", vm_gate_args,
                 "serve a VM's exitless gate: NAME=PATH, PATH the file behind the memory-backend-file of "
                 "QEMU's -object wormhole-gate (NAME as in --vm)");
  uint32_t vm_channels = 8;
  app.add_option("--vm-channels", vm_channels, "default channels (guest processes at once) per VM region")
      ->check(CLI::Range(1u, kMaxVmChannels));
  app.add_option("--heartbeat-timeout-ms", cfg.heartbeat_timeout_ms,
                 "silence after which a client (or the server, as clients see it) is dead")
      ->check(CLI::Range(200u, 600000u));
  app.add_option("--vm-heartbeat-timeout-ms", cfg.vm_heartbeat_timeout_ms,
                 "silence after which a VM's process is dead (0: --heartbeat-timeout-ms; host processes are "
                 "watched through their pid instead)")
      ->check([](const std::string& v) {
        return v.find_first_not_of("0123456789") == std::string::npos && v.size() <= 7 &&
                       (std::stoul(v) == 0 || (std::stoul(v) >= 200 && std::stoul(v) <= 3600000))
                   ? std::string()
                   : std::string("0, or 200..3600000");
      });
  std::string admin_mode = "0600";
  app.add_option("--admin-socket", cfg.admin_socket_path,
                 "wormholectl's socket (default: beside --socket, NAME-admin.sock; 'off': none)");
  app.add_option("--admin-socket-mode", admin_mode, "permissions of the admin socket, octal")
      ->check([](const std::string& m) {
        return m.size() >= 3 && m.size() <= 4 && m.find_first_not_of("01234567") == std::string::npos &&
                       std::stoul(m, nullptr, 8) <= 0777
                   ? std::string()
                   : std::string("an octal mode such as 0600 or 0660");
      });
  app.add_option("--admin-socket-group", cfg.admin_group, "group of the admin socket (with mode 0660)");
  app.add_option("--metrics", cfg.metrics_addr, "serve Prometheus metrics at http://ADDR:PORT/metrics")
      ->check([](const std::string& a) {
        auto c = a.rfind(':');
        if (c == std::string::npos || c == 0 || c + 1 == a.size() || a.size() - c - 1 > 5 ||
            a.find_first_not_of("0123456789", c + 1) != std::string::npos || std::stoul(a.substr(c + 1)) > 65535)
          return std::string("ADDR:PORT, e.g. 127.0.0.1:9400");
        return std::string();
      });
  app.add_option("--log-level", log_level, "trace (every call) | debug (failed calls) | info | warn | error")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_flag("!--no-stats", stats_on_exit, "do not print forwarding statistics at exit");
  bool allow_dropin_driver = false;
  app.add_flag("--allow-dropin-driver", allow_dropin_driver,
               "testing: the cuda backend may load Wormhole's own libcuda.so.1 and library drop-ins as its "
               "driver; they forward to the server named by WORMHOLE_SOCKET/WORMHOLE_SERVER (a sim server: "
               "the cuda backend then runs without a GPU; docs/hardware.md)");
  CLI11_PARSE(app, argc, argv);

  if (!config_path.empty())
    if (int rc = apply_config(app, config_path); rc != 0) return rc;
  spdlog::set_level(spdlog::level::from_str(log_level));
  cfg.socket_mode = uint32_t(std::stoul(socket_mode, nullptr, 8));
  cfg.admin_mode = uint32_t(std::stoul(admin_mode, nullptr, 8));
  if (cfg.admin_socket_path.empty()) cfg.admin_socket_path = wh::server::admin_socket_beside(cfg.socket_path);
  cfg.quota_bytes = quota_mb << 20;
  cfg.pinned_bytes = pinned_mb << 20;
  cfg.pinned_budget_bytes =
      (pinned_budget_arg == "auto" ? wh::server::default_pinned_budget_mb() : std::stoull(pinned_budget_arg)) << 20;
  for (auto& a : uid_quota_args) {
    uint32_t uid = 0;
    uint64_t mb = 0;
    if (!parse_uid_quota(a, &uid, &mb)) {
      std::fprintf(stderr, "wormhole-server: --uid-quota-mb wants USER=MB (a uid or a known user name, MB in 1..%llu), "
                   "got '%s'\n", 1ull << 30, a.c_str());
      return 2;
    }
    cfg.uid_quota_bytes[uid] = mb << 20;
  }
  for (auto& a : vm_args) {
    wh::server::VmSpec vm;
    if (!parse_vm(a, vm_channels, &vm)) {
      std::fprintf(stderr, "wormhole-server: --vm wants NAME=PATH[:CHANNELS] with CHANNELS in 1..%u, got '%s'\n",
                   kMaxVmChannels, a.c_str());
      return 2;
    }
    cfg.vms.push_back(vm);
  }
  for (auto& a : vm_gate_args) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == a.size()) {
      std::fprintf(stderr, "wormhole-server: --vm-gate wants NAME=PATH, got '%s'\n", a.c_str());
      return 2;
    }
    std::string name = a.substr(0, eq);
    auto vm = std::find_if(cfg.vms.begin(), cfg.vms.end(), [&](const auto& v) { return v.name == name; });
    if (vm == cfg.vms.end()) {
      std::fprintf(stderr, "wormhole-server: --vm-gate %s: no VM named '%s' (give it with --vm %s=PATH)\n",
                   a.c_str(), name.c_str(), name.c_str());
      return 2;
    }
    if (!vm->gate_path.empty()) {
      std::fprintf(stderr, "wormhole-server: --vm-gate: VM '%s' has two gates (%s and %s)\n", name.c_str(),
                   vm->gate_path.c_str(), a.substr(eq + 1).c_str());
      return 2;
    }
    vm->gate_path = a.substr(eq + 1);
  }
  // One memory object per VM, and never a VM's ivshmem region: the server
  // writes both, each in its own layout.
  for (size_t i = 0; i < cfg.vms.size(); i++) {
    struct stat gs{};
    if (cfg.vms[i].gate_path.empty() || stat(cfg.vms[i].gate_path.c_str(), &gs) != 0) continue;
    for (size_t j = 0; j < cfg.vms.size(); j++) {
      struct stat os{};
      auto same = [&](const std::string& p) {
        return !p.empty() && stat(p.c_str(), &os) == 0 && os.st_dev == gs.st_dev && os.st_ino == gs.st_ino;
      };
      const char* clash = same(cfg.vms[j].path) ? "is the ivshmem region of VM" :
                          j != i && same(cfg.vms[j].gate_path) ? "is also the gate of VM" : nullptr;
      if (clash) {
        std::fprintf(stderr, "wormhole-server: --vm-gate %s=%s: that file %s '%s'\n", cfg.vms[i].name.c_str(),
                     cfg.vms[i].gate_path.c_str(), clash, cfg.vms[j].name.c_str());
        return 2;
      }
    }
  }

  if (allow_dropin_driver) {
    // The drop-ins must reach another server: through this one's own socket
    // every call would wait on itself.
    const char* remote = std::getenv("WORMHOLE_SERVER");
    const char* sock = std::getenv("WORMHOLE_SOCKET");
    std::string target = sock && *sock ? sock : wh::server::default_socket_path();
    struct stat a{}, b{};
    bool same = target == cfg.socket_path ||
                (stat(target.c_str(), &a) == 0 && stat(cfg.socket_path.c_str(), &b) == 0 && a.st_ino == b.st_ino &&
                 a.st_dev == b.st_dev);
    if (!(remote && *remote) && same) {
      std::fprintf(stderr, "wormhole-server: --allow-dropin-driver: the drop-ins would forward to this server's own "
                   "socket %s; set WORMHOLE_SOCKET (or WORMHOLE_SERVER) to another server\n", cfg.socket_path.c_str());
      return 2;
    }
    wh::server::allow_dropin_driver();
  }

  std::unique_ptr<wh::server::Backend> backend;
  std::string err;
  if (backend_name != "sim") {
    backend = wh::server::make_cuda_backend(&err);
    if (!backend && backend_name == "cuda") {
      spdlog::error("cuda backend unavailable: {}", err);
      return 1;
    }
    if (!backend) spdlog::info("no GPU ({}); using the sim backend", err);
  }
  if (!backend) {
    uint64_t va_base = va_base_arg.empty() ? 0 : std::strtoull(va_base_arg.c_str(), nullptr, 0);
    backend = wh::server::make_sim_backend(sim_threads, sim_memory_mb << 20, kernel_timeout_ms, va_base);
  } else if (!va_base_arg.empty()) {
    spdlog::warn("--device-va-base applies to the sim device only: the cuda backend's addresses are the driver's");
  }

  wh::server::Server server(cfg, *backend);
  g_server = &server;
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  struct sigaction si{};
  si.sa_handler = on_info_signal;
  sigaction(SIGUSR1, &si, nullptr);
  sigaction(SIGHUP, &si, nullptr);
  signal(SIGPIPE, SIG_IGN);
  int rc = server.run();
  if (stats_on_exit) std::printf("wormhole-server statistics:\n%s", server.stats().render().c_str());
  g_server = nullptr;
  if (wh::ptx::compile_in_progress()) {
    // Every session has ended; a background PTX compile would hold the exit
    // up until it finishes (seconds) for code nobody will run.
    spdlog::info("stopping without waiting for the PTX compile in progress");
    spdlog::default_logger()->flush();
    std::fflush(nullptr);
    std::_Exit(rc);
  }
  return rc;
}
