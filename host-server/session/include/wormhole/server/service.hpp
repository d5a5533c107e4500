// wormhole/server/service.hpp - a forwarded library's part of a session.
//
// Each library with a server part (libs/<name>/server/) is a Service: its
// handle tables and the handlers of its API table (on_Name, declared and
// dispatched by WH_SERVICE_TABLE). A session makes a library's service at
// the first call in that library's opcode block (services.cpp) and destroys
// it before its device context. A service reaches the session only through
// the checks below.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "wormhole/proto/dispatch.hpp"
#include "wormhole/server/backend.hpp"

namespace wh::server {

class Session;
struct SessionCounters;
class CheckpointWriter;
class CheckpointReader;

class Service {
 public:
  explicit Service(Session& s);  // a library's service inherits it
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;
  virtual ~Service() = default;
  // One request of this library's opcode block (decoded and checked by the
  // generated dispatch before a handler sees it).
  virtual void dispatch(uint16_t opcode, std::span<const uint8_t> payload, uint32_t max_msg,
                        proto::DispatchResult& out) = 0;
  // Checkpoint (docs/migration.md): writes the library's state, or says
  // false: it holds state no checkpoint carries yet (the default; the
  // session then names the library). restore() reads what save() wrote
  // into a new service of a restored session; false and *why otherwise.
  virtual bool save(CheckpointWriter&) { return false; }
  virtual bool restore(CheckpointReader&, std::string* why) {
    *why = "a library's state in the checkpoint that this server cannot restore";
    return false;
  }

 protected:
  // The session's stream named by a guest handle (0: the default stream).
  Err resolve_stream(uint64_t h, Stream** out);
  // [addr, addr + n) lies inside one of the session's allocations.
  bool device_range(uint64_t addr, uint64_t n) const;
  // The session's figures: its calls, its kernels and their time; the
  // device memory it holds.
  const SessionCounters& counters() const;
  uint64_t device_bytes() const;

  Context* const ctx_;  // the session's device context (outlives the service)
  const uint64_t id_;   // the session's id, for messages

 private:
  Session& session_;
};

// In a service's class: the handler of every operation of Table and the
// dispatch() that decodes, checks and runs them.
#define WH_SERVICE_TABLE(Table)                                                                    \
 public:                                                                                           \
  void dispatch(uint16_t opcode, std::span<const uint8_t> payload, uint32_t max_msg,              \
                ::wh::proto::DispatchResult& out) override {                                       \
    auto& h = *this;                                                                               \
    WH_DISPATCH_BODY(Table)                                                                        \
  }                                                                                                \
  WH_DECLARE_HANDLERS(Table)

// The service of the library whose opcode block holds `opcode`, made for
// session `s`; null when no library service owns that block (the session's
// own tables: runtime, driver, remote, peer).
std::unique_ptr<Service> make_service(uint16_t opcode, Session& s);
// The library whose block holds `opcode` ("cuBLAS"...), for messages.
const char* service_name(uint16_t opcode);

}  // namespace wh::server
