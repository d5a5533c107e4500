// Where the last launch of each stream and the last record of each event
// end in the request stream, so that cudaStreamQuery / cudaEventQuery can
// answer "not ready" without a round trip while the server has not even
// reached them (on the sim device the server's session thread runs the
// kernel before it reads the next request: a query would wait for it).
// "Ready" is never decided here: the server answers it, as before.
#pragma once

#include <cstdint>

namespace wh::guest {

class Connection;

void note_stream_end(Connection* c, uint64_t stream, uint64_t end);
void note_event_end(Connection* c, uint64_t event, uint64_t end);
// True when the stream's last launch / the event's last record is certainly
// not handled yet by the server of `c`.
bool stream_surely_busy(Connection* c, uint64_t stream);
bool event_surely_busy(Connection* c, uint64_t event);
void forget_stream(uint64_t stream);
void forget_event(uint64_t event);

}  // namespace wh::guest
