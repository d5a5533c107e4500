// wormhole-server: serves forwarded CUDA calls from client processes and VMs.
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <thread>
#include <toml++/toml.h>

#include "server.hpp"

namespace {
wh::server::Server* g_server = nullptr;
void on_signal(int) {
  if (g_server) g_server->stop();
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

  app.add_option("--config", config_path, "TOML config file (keys as the long options, '-' as '_')");
  app.add_option("--backend", backend_name, "cuda | sim | auto (cuda if a GPU is present)")
      ->check(CLI::IsMember({"auto", "cuda", "sim"}));
  app.add_option("--socket", cfg.socket_path, "unix socket clients rendezvous on");
  app.add_option("--quota-mb", quota_mb, "device memory per client session (0: the device's)");
  app.add_option("--pinned-mb", pinned_mb, "pinned host memory per client (in its shared data area)");
  app.add_option("--sim-memory-mb", sim_memory_mb, "device memory of the sim device");
  app.add_option("--sim-threads", sim_threads, "host threads running sim kernels (0: all cores)");
  app.add_option("--kernel-timeout-ms", kernel_timeout_ms,
                 "sim device: a kernel running longer fails with cudaErrorLaunchTimeout (0: no limit)");
  app.add_option("--vm", vm_args, "serve a VM's ivshmem region: NAME=PATH[:CHANNELS]");
  app.add_option("--vm-gate", vm_gate_args,
                 "serve a VM's exitless gate: NAME=PATH, PATH the file behind the memory-backend-file of "
                 "QEMU's -object wormhole-gate (NAME as in --vm)");
  uint32_t vm_channels = 8;
  app.add_option("--vm-channels", vm_channels, "default channels (guest processes at once) per VM region");
  app.add_option("--heartbeat-timeout-ms", cfg.heartbeat_timeout_ms,
                 "silence after which a client (or the server, as clients see it) is dead")
      ->check(CLI::Range(200u, 600000u));
  app.add_option("--log-level", log_level, "trace|debug|info|warn|error");
  app.add_flag("!--no-stats", stats_on_exit, "do not print forwarding statistics at exit");
  CLI11_PARSE(app, argc, argv);

  if (!config_path.empty()) {
    try {
      auto t = toml::parse_file(config_path);
      backend_name = t["backend"].value_or(backend_name);
      cfg.socket_path = t["socket"].value_or(cfg.socket_path);
      quota_mb = t["quota_mb"].value_or(quota_mb);
      pinned_mb = t["pinned_mb"].value_or(pinned_mb);
      sim_memory_mb = t["sim_memory_mb"].value_or(sim_memory_mb);
      sim_threads = t["sim_threads"].value_or(sim_threads);
      kernel_timeout_ms = t["kernel_timeout_ms"].value_or(kernel_timeout_ms);
      vm_channels = t["vm_channels"].value_or(vm_channels);
      cfg.heartbeat_timeout_ms = t["heartbeat_timeout_ms"].value_or(cfg.heartbeat_timeout_ms);
      log_level = t["log_level"].value_or(log_level);
      if (auto* vms = t["vm"].as_array())
        for (auto& v : *vms)
          if (auto s = v.value<std::string>()) vm_args.push_back(*s);
      if (auto* gates = t["vm_gate"].as_array())
        for (auto& v : *gates)
          if (auto s = v.value<std::string>()) vm_gate_args.push_back(*s);
    } catch (const toml::parse_error& e) {
      std::fprintf(stderr, "wormhole-server: %s: %s\n", config_path.c_str(), e.what());
      return 2;
    }
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  cfg.quota_bytes = quota_mb << 20;
  cfg.pinned_bytes = pinned_mb << 20;
  for (auto& a : vm_args) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::fprintf(stderr, "wormhole-server: --vm wants NAME=PATH[:CHANNELS], got '%s'\n", a.c_str());
      return 2;
    }
    wh::server::VmSpec vm;
    vm.channels = vm_channels;
    vm.name = a.substr(0, eq);
    vm.path = a.substr(eq + 1);
    if (auto c = vm.path.rfind(':'); c != std::string::npos) {
      vm.channels = uint32_t(std::stoul(vm.path.substr(c + 1)));
      vm.path.resize(c);
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
  if (!backend) backend = wh::server::make_sim_backend(sim_threads, sim_memory_mb << 20, kernel_timeout_ms);

  wh::server::Server server(cfg, *backend);
  g_server = &server;
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  int rc = server.run();
  if (stats_on_exit) std::printf("wormhole-server statistics:\n%s", server.stats().render().c_str());
  g_server = nullptr;
  return rc;
}
