// The library services (wormhole/server/service.hpp), by opcode block.
// A library with a server part adds one line here: its factory, defined in
// libs/<name>/server/, and the first operation of its table.
#include "wormhole/server/service.hpp"

#include "wormhole/server/session.hpp"

namespace wh::server {

std::unique_ptr<Service> make_blas_service(Session&);    // libs/cublas
std::unique_ptr<Service> make_fft_service(Session&);     // libs/cufft
std::unique_ptr<Service> make_blaslt_service(Session&);  // libs/cublaslt
std::unique_ptr<Service> make_rand_service(Session&);    // libs/curand
std::unique_ptr<Service> make_dnn_service(Session&);     // libs/cudnn
std::unique_ptr<Service> make_nvml_service(Session&);    // libs/nvml

namespace {

struct ServiceEntry {
  proto::Op first;  // any operation of the library's table names its block
  std::unique_ptr<Service> (*make)(Session&);
  const char* name;
};
const ServiceEntry kServices[] = {
    {proto::Op::BlasCreate, make_blas_service, "cuBLAS"}, {proto::Op::FftPlan, make_fft_service, "cuFFT"},
    {proto::Op::LtCreate, make_blaslt_service, "cuBLASLt"}, {proto::Op::RandCreate, make_rand_service, "cuRAND"},
    {proto::Op::DnnCreate, make_dnn_service, "cuDNN"},      {proto::Op::NvmlUsage, make_nvml_service, "NVML"},
};

}  // namespace

std::unique_ptr<Service> make_service(uint16_t opcode, Session& s) {
  for (const ServiceEntry& e : kServices)
    if (uint16_t(e.first) / proto::kOpBlock == opcode / proto::kOpBlock) return e.make(s);
  return nullptr;
}

const char* service_name(uint16_t opcode) {
  for (const ServiceEntry& e : kServices)
    if (uint16_t(e.first) / proto::kOpBlock == opcode / proto::kOpBlock) return e.name;
  return "?";
}

Service::Service(Session& s) : ctx_(&s.context()), id_(s.id()), session_(s) {}

Err Service::resolve_stream(uint64_t h, Stream** out) { return session_.resolve_stream(h, out); }

bool Service::device_range(uint64_t addr, uint64_t n) const { return session_.device_range(addr, n); }

const SessionCounters& Service::counters() const { return session_.counters(); }

uint64_t Service::device_bytes() const { return session_.device_bytes(); }

}  // namespace wh::server
