/*
 * wormhole/region.h - the shared-region ABI.
 *
 * One region is a block of memory shared by a client side (a process, or a
 * whole guest VM) and wormhole-server. It may be a memfd, a /dev/shm file, or
 * a QEMU ivshmem-plain BAR; the two sides may run under different kernels,
 * so the region holds:
 *   - no pointers, only byte offsets from the region's start;
 *   - no process-shared mutexes, only naturally aligned 32/64-bit words that
 *     are accessed with atomic loads/stores (acquire/release).
 * Everything one side reads from the region was written by a peer it does
 * not trust: every index, length and offset is validated before use.
 *
 *   offset 0            struct wh_region_hdr           (WH_REGION_HDR_SIZE)
 *   chan_off            channel 0 ─┐
 *   chan_off + stride   channel 1  │ nchan channels, each chan_stride bytes
 *   ...                            ┘
 *
 * A channel joins one client process to the server (a "peer pair"):
 *
 *   +0                   struct wh_chan_hdr  (WH_CHAN_HDR_SIZE: control words,
 *                                              each side's on its own line)
 *   +req_off             request ring bytes   (req_size,  a power of two)
 *   +resp_off            response ring bytes  (resp_size, a power of two)
 *   +data_off            data area            (data_size; bulk payloads,
 *                                              pinned host memory)
 *
 * Rings.  A ring is a byte array of size 2^k plus a producer index (tail)
 * and a consumer index (head): free-running 64-bit byte counters, position
 * = index & (size - 1).  Bytes [head, tail) hold committed records.  The
 * producer writes a record, then publishes tail with a release store; the
 * consumer reads tail with an acquire load, consumes, then publishes head.
 * Each side keeps a private copy of the index it owns and only ever writes
 * it to the region, never reads it back: a peer scribbling over our index
 * cannot confuse us.
 *
 * Records.  Every record is a struct wh_msg_hdr followed by `len` payload
 * bytes, padded to 8.  A record never wraps: when it does not fit before the
 * ring's end, the producer writes a padding record (opcode WH_OP_PAD, its
 * len covering the rest of the ring) and the record starts at position 0.
 * It may also pad early, once past the first 4 KiB, when the consumer has
 * drained the ring: a latency-bound channel then keeps reusing the same few
 * hot KiB (RingWriter::kHotWindow).
 * When fewer than sizeof(wh_msg_hdr) bytes remain before the end, both
 * sides skip them implicitly (no room for a padding header).  The same header
 * frames messages on stream transports (TCP), so it is also the wire
 * protocol's fixed header.
 *
 * The tail block's copy.  A ring's tail heads a block of four cache lines
 * (WH_TAIL_BLOCK bytes) whose other words hold a copy of the newest record
 * when that record is small (header and payload within WH_COPY_MAX bytes):
 * copy_tail names the tail the copy belongs to, copy[] holds the record.
 * The producer publishes such a record in the copy first and writes its
 * ring bytes after the tail; so the consumer takes the newest record from
 * the copy whenever the copy holds it, and a latency-bound exchange moves
 * only the lines it polls, always the same few, instead of fresh ring lines
 * each time (docs/benchmarks.md). The copy is a seqlock: the producer sets
 * copy_tail to 0 (release), writes copy[], sets copy_tail to the new tail,
 * then publishes the tail. Invariant: every committed record is in the
 * ring, except the newest while copy_tail equals its end; the producer
 * finishes a record's ring bytes before it touches the copy again. The
 * consumer, about to read a record that may be the newest (the tail is
 * within WH_COPY_MAX of its head), checks the copy first, and uses it only
 * if copy_tail equals the tail both before and after reading copy[] and
 * the copy is a well-formed record spanning exactly [head, tail).
 * Otherwise it reads the ring, whose validation decides: a copy_tail other
 * than the tail (acquire) means the record's ring bytes are in place. A
 * producer that never writes the copy (copy_tail stays 0) is a correct
 * peer; one that lies in it only hurts itself, like one that lies in the
 * ring.
 *
 * Waiting.  Spinning is the fast path.  A side that wants to sleep sets its
 * *_sleeping word, re-checks the ring, and sleeps on the matching *_bell
 * word (a futex when both sides share a kernel, or a transport doorbell);
 * a producer that sees the flag set bumps the bell and wakes it.
 *
 * Liveness.  Each side bumps its heartbeat word periodically; a peer whose
 * heartbeat stalls past the timeout is dead and its channel is reclaimed.
 * chan.generation changes every time a channel is (re)claimed, so stale
 * messages from a previous owner are recognised.
 */
#ifndef WORMHOLE_REGION_H
#define WORMHOLE_REGION_H

#include <stdint.h>

#define WH_CACHELINE 64

#define WH_REGION_MAGIC 0x47524857u /* "WHRG" little-endian */
#define WH_REGION_VERSION 3u        /* bump on any layout change (3: tail block copy) */
#define WH_REGION_HDR_SIZE 4096u
#define WH_CHAN_HDR_SIZE 4096u
#define WH_MSG_MAGIC 0x534d4857u    /* "WHMS" */
#define WH_MSG_ALIGN 8u
#define WH_MAX_CHANNELS 256u
#define WH_TAIL_BLOCK 256u          /* a ring's tail, copy_tail and copy: 4 lines */
#define WH_COPY_MAX (WH_TAIL_BLOCK - 16u) /* record bytes the tail block can carry */

/* Region feature bits (wh_region_hdr.features). */
#define WH_FEAT_FUTEX 0x1u    /* both sides share a kernel: futex on *_bell */
#define WH_FEAT_DOORBELL 0x2u /* a transport doorbell exists (ivshmem irq) */

/* Channel states (wh_chan_hdr.state). */
enum wh_chan_state {
  WH_CHAN_FREE = 0,     /* unclaimed: a client may claim it by CAS */
  WH_CHAN_CLAIMED = 1,  /* a client owns it, server not yet attached */
  WH_CHAN_ACTIVE = 2,   /* both sides attached */
  WH_CHAN_CLOSED = 3,   /* client said goodbye; server reclaims */
  WH_CHAN_POISONED = 4, /* a side saw garbage; server reclaims */
};

/* The region header: written once by the side that formats the region
 * (the server, or the VMM for an ivshmem region), read-only afterwards. */
struct wh_region_hdr {
  uint32_t magic;      /* WH_REGION_MAGIC */
  uint32_t version;    /* WH_REGION_VERSION */
  uint32_t hdr_size;   /* WH_REGION_HDR_SIZE */
  uint32_t features;   /* WH_FEAT_* */
  uint64_t region_size;/* total bytes of the region */
  uint32_t nchan;      /* number of channels, 1..WH_MAX_CHANNELS */
  uint32_t chan_hdr_size;
  uint64_t chan_off;   /* offset of channel 0, multiple of 4096 */
  uint64_t chan_stride;/* bytes per channel, multiple of 4096 */
  uint32_t req_size;   /* request ring bytes per channel, power of two */
  uint32_t resp_size;  /* response ring bytes per channel, power of two */
  uint64_t data_size;  /* data area bytes per channel, multiple of 4096 */
  uint32_t max_msg;    /* largest payload a record may carry */
  uint32_t hb_period_ms;  /* how often each side bumps its heartbeat */
  uint32_t hb_timeout_ms; /* silence after which a peer is presumed dead */
  uint32_t reserved0;
  uint64_t server_epoch;  /* changes when the server (re)formats the region */
  uint8_t pad0[WH_CACHELINE * 2 - 88];
  /* Server heartbeat for the whole region, on its own cache line. */
  uint64_t server_heartbeat;
  uint8_t pad1[WH_CACHELINE - 8];
};

/* Per-channel control block. Words written by the client and words written
 * by the server never share a cache line. Offsets are from the channel
 * start; ring and data offsets repeat the region-wide sizes so a channel
 * can be read on its own. */
struct wh_chan_hdr {
  /* line 0: identity, written by the claimer/server under the state CAS */
  uint32_t state;         /* enum wh_chan_state, changed by CAS only */
  uint32_t client_pid;    /* informational, as the client saw itself */
  uint64_t generation;    /* bumped on every claim */
  uint64_t req_off, resp_off, data_off; /* from channel start */
  uint8_t pad0[WH_CACHELINE - 40];
  /* lines 1-4: request ring producer (client): the tail and the copy of the
   * newest request when it is small (see "The tail block's copy") */
  uint64_t req_tail;
  uint64_t req_copy_tail;  /* the tail req_copy belongs to; 0: none */
  uint64_t req_copy[WH_COPY_MAX / 8];
  /* line 5: request ring consumer (server) */
  uint64_t req_head;
  uint8_t pad2[WH_CACHELINE - 8];
  /* lines 6-9: response ring producer (server), laid out as lines 1-4 */
  uint64_t resp_tail;
  uint64_t resp_copy_tail;
  uint64_t resp_copy[WH_COPY_MAX / 8];
  /* line 10: response ring consumer (client) */
  uint64_t resp_head;
  uint8_t pad4[WH_CACHELINE - 8];
  /* line 11: server sleeps waiting for requests */
  uint32_t server_sleeping; /* 1 while the server may sleep on req_bell */
  uint32_t req_bell;        /* bumped by the client to wake the server */
  uint8_t pad5[WH_CACHELINE - 8];
  /* line 12: client sleeps waiting for responses */
  uint32_t client_sleeping;
  uint32_t resp_bell;
  uint8_t pad6[WH_CACHELINE - 8];
  /* line 13: server sleeps waiting for response-ring space (client slow) */
  uint32_t server_space_wait;
  uint32_t space_bell;
  uint8_t pad7[WH_CACHELINE - 8];
  /* lines 14, 15: heartbeats */
  uint64_t client_heartbeat;
  uint8_t pad8[WH_CACHELINE - 8];
  uint64_t server_heartbeat;
  uint8_t pad9[WH_CACHELINE - 8];
};

/* The fixed header in front of every record (and every message on a stream
 * transport). 32 bytes, little-endian. */
struct wh_msg_hdr {
  uint32_t magic;    /* WH_MSG_MAGIC; anything else poisons the ring */
  uint16_t version;  /* wire protocol version (proto/) */
  uint16_t opcode;   /* WH_OP_PAD, or an opcode of the API table */
  uint32_t flags;    /* WH_MSG_F_* */
  uint32_t len;      /* payload bytes after this header (<= max_msg) */
  uint64_t call_id;  /* a response carries its request's call_id */
  int32_t status;    /* responses: the call's result (cudaError_t...) */
  uint32_t aux;      /* opcode-specific small value */
};

#define WH_OP_PAD 0u             /* skip to the ring's end */
#define WH_MSG_F_POSTED 0x1u     /* request wants no response */
#define WH_MSG_F_RESPONSE 0x2u   /* this record is a response */
#define WH_MSG_F_ERROR 0x4u      /* response reports a protocol error */

#ifdef __cplusplus
static_assert(sizeof(struct wh_region_hdr) == 3 * WH_CACHELINE, "region hdr");
static_assert(sizeof(struct wh_chan_hdr) == 16 * WH_CACHELINE, "chan hdr");
static_assert(sizeof(struct wh_msg_hdr) == 32, "msg hdr");
#endif

#endif /* WORMHOLE_REGION_H */
