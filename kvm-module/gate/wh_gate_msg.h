/* SPDX-License-Identifier: GPL-2.0 OR MIT */
/*
 * Wormhole exitless gate: what guest-lib's `vmfunc` transport and
 * wormhole-server put into the gate's slots and state page (wh_gate.h gives
 * the pages; this header gives their contents).  Little-endian, no pointers.
 *
 * A gate slot carries at most WH_SLOT_MAX (2032) bytes each way:
 *
 *   request  (mailbox -> channel by SUBMIT):  wh_gate_req + payload
 *   response (channel -> mailbox by POLL):    wh_gate_resp + payload
 *
 * `hdr` is the ring protocol's own 32-byte record header (region.h), so a
 * request that came through the gate is dispatched exactly like one read
 * from the VM channel's request ring.  Bulk data never crosses the gate: it
 * stays in the channel's data area (staging, pinned heap) as on the ivshmem
 * path, and requests only name offsets in it.
 *
 * The server copies a channel slot ONCE after seeing REQ_SEQ change, then
 * validates the copy (magic, kind, sizes, channel index and generation of
 * the binding): a guest can redirect the gate's stores inside its own view,
 * so the slot is guest input like any ring record.
 */
#ifndef WH_GATE_MSG_H
#define WH_GATE_MSG_H

#include <stdint.h>

#include "wh_gate.h"

#define WH_GATE_REQ_MAGIC 0x52474857u  /* "WHGR" */
#define WH_GATE_RESP_MAGIC 0x41474857u /* "WHGA" */
#define WH_GATE_STATE_MAGIC 0x53474857u /* "WHGS" */
#define WH_GATE_PROTO_VERSION 1

enum wh_gate_kind {
	/* Binds the slot to the VM channel the process claimed on the ivshmem
	 * region (chan, generation).  Answered with status 0, or a negative
	 * errno (-EINVAL unknown channel, -ESTALE generation mismatch). */
	WH_GATE_KIND_BIND = 1,
	/* A ring request (hdr + payload) for the bound channel's session. */
	WH_GATE_KIND_CALL = 2,
};

struct wh_gate_req {
	uint32_t magic;        /* WH_GATE_REQ_MAGIC */
	uint16_t kind;         /* enum wh_gate_kind */
	uint16_t version;      /* WH_GATE_PROTO_VERSION */
	uint32_t chan;         /* VM channel index (BIND; CALL: must match) */
	uint32_t pad;
	uint64_t generation;   /* the channel's generation (BIND; CALL: must match) */
	/* Ordering with the ring: the server handles this request only after
	 * it has consumed the channel's request ring up to this byte index
	 * (the ring tail the client saw after its own earlier posts). */
	uint64_t ring_barrier;
	uint8_t hdr[32];       /* struct wh_msg_hdr (CALL) */
	/* payload: hdr.len bytes */
};

struct wh_gate_resp {
	uint32_t magic;        /* WH_GATE_RESP_MAGIC */
	uint32_t req_seq;      /* the REQ_SEQ of the request answered */
	int32_t status;        /* BIND: 0 or -errno; CALL: 0 (see hdr.status) */
	uint32_t pad;
	uint8_t hdr[32];       /* struct wh_msg_hdr of the response (CALL) */
	/* payload: hdr.len bytes */
};

#define WH_GATE_REQ_PAYLOAD_MAX (WH_SLOT_MAX - sizeof(struct wh_gate_req))
#define WH_GATE_RESP_PAYLOAD_MAX (WH_SLOT_MAX - sizeof(struct wh_gate_resp))

/*
 * The state page (STATE, read-only in the view, answered by QUERY without
 * a round trip).  The server rewrites it after handling requests; QUERY
 * copies the first WH_SLOT_MAX bytes.  Consistency: the server writes
 * `begin_seq` (last 8 bytes of the copied part) first, then the records,
 * then `end_seq` (first 8 bytes).  The gate's copy runs forwards, so a copy
 * with end_seq == begin_seq (even) saw no update in between; each record
 * also carries a check word over its fields (fast-string copies may reorder
 * their accesses).  Anything else: ask the server instead.
 */
struct wh_gate_chan_state {
	uint64_t generation;   /* of the channel when published; 0 = unused */
	uint64_t handled;      /* requests of this channel handled (ring + gate) */
	uint64_t mem_free;     /* cudaMemGetInfo of the channel's session */
	uint64_t mem_total;
	int32_t pending_error; /* deferred error the next sync call would return */
	uint32_t idle;         /* 1: no posted work outstanding on any stream */
	uint64_t check;        /* wh_gate_state_check() of the fields above */
};

#define WH_GATE_STATE_CHANS 32
struct wh_gate_state {
	uint64_t end_seq;
	uint32_t magic;        /* WH_GATE_STATE_MAGIC: a server serves the gate */
	uint32_t version;      /* WH_GATE_PROTO_VERSION */
	uint32_t nchan;
	uint32_t pad;
	struct wh_gate_chan_state chan[WH_GATE_STATE_CHANS];
	uint8_t pad2[WH_SLOT_MAX - 24 - 8 - WH_GATE_STATE_CHANS * sizeof(struct wh_gate_chan_state)];
	uint64_t begin_seq;    /* at WH_SLOT_MAX - 8 */
};

static inline uint64_t wh_gate_state_check(const struct wh_gate_chan_state *c)
{
	uint64_t h = 0x9e3779b97f4a7c15ull;
	const uint64_t w[5] = {c->generation, c->handled, c->mem_free, c->mem_total,
			       ((uint64_t)(uint32_t)c->pending_error << 32) | c->idle};
	for (int i = 0; i < 5; i++) {
		h ^= w[i];
		h *= 0x100000001b3ull;
		h ^= h >> 29;
	}
	return h;
}

#ifdef __cplusplus
static_assert(sizeof(struct wh_gate_req) == 64, "gate req");
static_assert(sizeof(struct wh_gate_resp) == 48, "gate resp");
static_assert(sizeof(struct wh_gate_chan_state) == 48, "gate chan state");
static_assert(sizeof(struct wh_gate_state) == WH_SLOT_MAX, "gate state");
#endif
#endif
