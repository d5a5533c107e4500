// See progress.hpp.
#include "progress.hpp"

#include <mutex>
#include <unordered_map>

#include "connection.hpp"

namespace wh::guest {

namespace {

struct Mark {
  Connection* conn;
  uint64_t end;
};

struct Marks {
  std::mutex mu;
  std::unordered_map<uint64_t, Mark> streams, events;
};

Marks& marks() {
  static Marks* m = new Marks;  // never destroyed: queries may come from atexit handlers
  return *m;
}

void note(std::unordered_map<uint64_t, Mark>& t, Connection* c, uint64_t key, uint64_t end) {
  if (!end) return;  // no position (ucx://): nothing can be told locally
  std::lock_guard lk(marks().mu);
  t[key] = {c, end};
}

bool busy(std::unordered_map<uint64_t, Mark>& t, Connection* c, uint64_t key) {
  Mark m;
  {
    std::lock_guard lk(marks().mu);
    auto it = t.find(key);
    if (it == t.end()) return false;
    m = it->second;
  }
  return m.conn == c && !c->handled(m.end);
}

}  // namespace

void note_stream_end(Connection* c, uint64_t stream, uint64_t end) { note(marks().streams, c, stream, end); }
void note_event_end(Connection* c, uint64_t event, uint64_t end) { note(marks().events, c, event, end); }
bool stream_surely_busy(Connection* c, uint64_t stream) { return busy(marks().streams, c, stream); }
bool event_surely_busy(Connection* c, uint64_t event) { return busy(marks().events, c, event); }

void forget_stream(uint64_t stream) {
  std::lock_guard lk(marks().mu);
  marks().streams.erase(stream);
}
void forget_event(uint64_t event) {
  std::lock_guard lk(marks().mu);
  marks().events.erase(event);
}

}  // namespace wh::guest
