// The NVML service: what only the server knows of a session, for the
// drop-in libnvidia-ml.so.1 (nvml_api.def). It reads the session's own
// figures and nothing of another session's.
#include <chrono>

#include "wormhole/server/checkpoint.hpp"
#include "wormhole/server/service.hpp"
#include "wormhole/server/session.hpp"

namespace wh::server {

using namespace wh::proto;

class NvmlService final : public Service {
  using Service::Service;
  WH_SERVICE_TABLE(WH_NVML_OPS)

 public:
  // Stateless: it reads the session's figures.
  bool save(CheckpointWriter&) override { return true; }
  bool restore(CheckpointReader&, std::string*) override { return true; }
};

int32_t NvmlService::on_NvmlUsage(const NvmlUsageReq&, std::span<const uint8_t>, NvmlUsageResp& rs,
                                  std::vector<uint8_t>&) {
  rs.device_bytes = device_bytes();
  rs.kernel_ns = counters().kernel_ns.load(std::memory_order_relaxed);
  rs.kernels = counters().kernels.load(std::memory_order_relaxed);
  rs.timed = ctx_->launch_is_timed();
  rs.now_ns = uint64_t(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
  return cudaSuccess;
}

std::unique_ptr<Service> make_nvml_service(Session& s) { return std::make_unique<NvmlService>(s); }

}  // namespace wh::server
