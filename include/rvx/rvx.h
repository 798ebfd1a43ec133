/* rvx/rvx.h: the one include of rvx, a header-only RDMA and shared-memory transport kit.
 *
 * Define the configuration (every macro, its default and its limits: rvx/config.h and
 * docs/configuration.md), then include this file before any system header (it needs GNU/POSIX
 * declarations; or compile with -D_GNU_SOURCE):
 *
 *     #define RVX_TL RVX_TL_SHM                       // or RVX_TL_RC_MLX5 (-libverbs -lmlx5)
 *     // a cluster: #define RVX_TL_INTRA RVX_TL_SHM beside RVX_TL_RC_MLX5 (shm on the node)
 *     #define RVX_AM_HANDLERS(X) X(PING, on_ping)     // only if you use active messages
 *     #include <rvx/rvx.h>
 *
 * The compiler then sees one transport and one protocol set: every put, flush and send is a
 * straight line of stores, with no function pointer and no run-time key lookup.
 *
 * ---- The public API, every call in one place ------------------------------------------------
 * Every call returns an rvx_status_t unless shown otherwise: RVX_OK (0), RVX_INPROGRESS (1:
 * accepted, completes later through its request) or a negative RVX_ERR_* (types.h). A call that
 * may return RVX_INPROGRESS takes a caller-owned rvx_request_t *req: pending while
 * req->status == RVX_INPROGRESS, then the final status. Nothing on a fast path allocates.
 *
 * Types
 *   rvx_status_t          RVX_OK, RVX_INPROGRESS, RVX_ERR_INVALID_PARAM, _NO_MEMORY,
 *                         _NO_RESOURCE, _REMOTE_ACCESS, _PEER_FAILED, _CANCELED, _MSG_TRUNCATED,
 *                         _UNSUPPORTED, _TIMED_OUT, _NO_DEVICE, _IO, _EXCEEDS_LIMIT, _BAD_MESSAGE
 *   rvx_request_t         { volatile int status; ... }: the caller's, on its stack or in its data
 *   rvx_context_t         one per process: bootstrap (rank, size) and device
 *   rvx_worker_t          one per thread, no locks; its endpoints and requests belong to it
 *   rvx_ep_t              a connection to the same-numbered worker of one rank
 *   rvx_mem_t             a local region peers may access through its packed rkey
 *   rvx_rkey_t            a peer's region, unpacked once; a put reads it and nothing else
 *   rvx_amo_op_t          RVX_AMO_SET GET SWAP CAS ADD SUB INC DEC AND OR XOR MULT MIN MAX
 *                         UMIN UMAX (tl/contract.h)
 *   rvx_am_token_t        what a handler gets to reply with (RVX_AM builds)
 *   rvx_tag_info_t        { tag, length as sent, sender } of a tag message (RVX_TAG builds)
 *   rvx_worker_stats_t    counts of bad input from peers (am_unknown_id, am_bad_frame,
 *                         am_bad_long_target, tag_bad_frame)
 *   rvx_thresh_params_t   the eager/rendezvous model's parameters
 *
 * Macros
 *   RVX_RKEY_PACKED_SIZE  bytes of a packed rkey (one key per lane)
 *   RVX_AM_HANDLERS(X)    the handler table, X(NAME, fn) each; gives ids RVX_AM_NAME. A handler:
 *                         static void fn(rvx_am_token_t *t, const uint64_t *args, unsigned nargs,
 *                                        void *payload, size_t len)
 *   rvx_am_retry(w, st, call)  repeat an AM request while it returns RVX_ERR_NO_RESOURCE,
 *                         progressing w in between; the final status lands in st
 *   RVX_ANY_SOURCE        rvx_tag_recv_from's "any sender" (-1)
 *   RVX_RNDV_THRESH_BYTES the eager/rendezvous switch this build uses (size_t constant)
 *   RVX_CONFIG_STRING     what rvx_config_string() returns
 *
 * Context and bootstrap (core.h)
 *   rvx_status_t rvx_init(rvx_context_t **ctx)
 *       rank and size from the bootstrap (RVX_BOOT), open the transport's device(s)
 *   void rvx_finalize(rvx_context_t *ctx)                      never waits for peers
 *   int rvx_rank(const rvx_context_t *ctx)                     this process's rank
 *   int rvx_size(const rvx_context_t *ctx)                     number of ranks
 *   const char *rvx_config_string(void)                        the build: tl, rndv, fabric, limits
 *   const char *rvx_status_str(rvx_status_t s)                 a status in words (types.h)
 *   rvx_status_t rvx_allgather(rvx_context_t *ctx, const void *mine, size_t len, void *all)
 *       out of band: every rank's len bytes in rank order; collective, workers progress meanwhile
 *   rvx_status_t rvx_barrier(rvx_context_t *ctx)               out of band; collective
 *   uint32_t rvx_lane_bw_mbs(const rvx_context_t *ctx, unsigned lane)
 *       the lane's bandwidth in MB/s as its port reports it; 0 for no such lane
 *
 * Workers and endpoints (core.h)
 *   rvx_status_t rvx_worker_create(rvx_context_t *ctx, rvx_worker_t **w)
 *       collective: every rank creates its k-th worker in the same order
 *   void rvx_worker_destroy(rvx_worker_t *w)                   destroys its endpoints too;
 *       every request still pending on it ends (posted tag receives: RVX_ERR_CANCELED)
 *   void rvx_worker_stats(const rvx_worker_t *w, rvx_worker_stats_t *out)
 *   rvx_status_t rvx_ep_create(rvx_worker_t *w, int rank, rvx_ep_t **ep)
 *       both sides create endpoints to each other; the same ep again if one exists; on rc_mlx5
 *       re-creating a failed endpoint makes a new connection
 *   void rvx_ep_destroy(rvx_ep_t *ep)
 *       tag requests tied to it have their final status (RVX_OK or RVX_ERR_CANCELED) on return
 *   int rvx_ep_rank(const rvx_ep_t *ep)                        the peer's rank
 *   rvx_status_t rvx_ep_status(rvx_ep_t *ep)                   RVX_OK, RVX_ERR_PEER_FAILED
 *       (the peer is gone), or RVX_ERR_REMOTE_ACCESS (mlx5: an access error failed the endpoint;
 *       the peer answered: re-create the endpoint)
 *
 * Memory and remote keys (core.h)
 *   rvx_status_t rvx_mem_alloc(rvx_context_t *ctx, size_t len, rvx_mem_t **mem)
 *       zero-filled memory peers can reach (shm: a memfd they map; mlx5: registered)
 *   rvx_status_t rvx_mem_reg(rvx_context_t *ctx, void *addr, size_t len, rvx_mem_t **mem)
 *       register memory the application has (shm: reached by cross-memory attach)
 *   void rvx_mem_dereg(rvx_mem_t *mem)
 *   void *rvx_mem_addr(const rvx_mem_t *mem)                   the region's address
 *   size_t rvx_mem_len(const rvx_mem_t *mem)                   and length
 *   rvx_status_t rvx_rkey_pack(const rvx_mem_t *mem, void *buf)   RVX_RKEY_PACKED_SIZE bytes
 *   rvx_status_t rvx_rkey_unpack(rvx_ep_t *ep, const void *buf, rvx_rkey_t *rkey)
 *       resolve a peer's key once, for use on this ep only
 *   void rvx_rkey_release(rvx_rkey_t *rkey)
 *   void *rvx_rkey_ptr(const rvx_rkey_t *rkey, uint64_t raddr, size_t len)
 *       a load/store address for that range of the peer's region where this process maps it
 *       (shm, the pair on the node: rvx_mem_alloc memory), else NULL
 *
 * One-sided (proto/rma.h, proto/amo.h). RVX_ERR_REMOTE_ACCESS outside the rkey's region
 * (nothing written). Data is at the target after a flush of the endpoint.
 *   rvx_status_t rvx_put(rvx_ep_t *ep, const void *buf, size_t len, uint64_t raddr,
 *                        const rvx_rkey_t *rkey)
 *       any size; buf reusable on return; inline up to RVX_PUT_SHORT_MAX, else copied (rc_mlx5:
 *       through a registered bounce ring); the choice is made at compile time for a constant len
 *   rvx_status_t rvx_put_zcopy(rvx_ep_t *ep, const void *buf, size_t len, const rvx_mem_t *lmem,
 *                              uint64_t raddr, const rvx_rkey_t *rkey, rvx_request_t *req)
 *       from registered memory, no copy: RVX_OK or RVX_INPROGRESS (buf reusable when req is done)
 *   rvx_status_t rvx_get(rvx_ep_t *ep, void *buf, size_t len, uint64_t raddr,
 *                        const rvx_rkey_t *rkey, rvx_request_t *req)
 *       into any buffer: RVX_OK (data there) or RVX_INPROGRESS (there when req completes);
 *       req NULL: the call waits and returns with the data there or an error
 *   rvx_status_t rvx_get_zcopy(rvx_ep_t *ep, void *buf, size_t len, const rvx_mem_t *lmem,
 *                              uint64_t raddr, const rvx_rkey_t *rkey, rvx_request_t *req)
 *   rvx_status_t rvx_atomic64(rvx_ep_t *ep, rvx_amo_op_t op, uint64_t operand, uint64_t compare,
 *                             uint64_t raddr, const rvx_rkey_t *rkey, uint64_t *fetch,
 *                             rvx_request_t *req)
 *       raddr naturally aligned; fetch NULL: no result (GET needs one); compare for CAS only;
 *       RVX_OK (*fetch written) or RVX_INPROGRESS (written when req completes); with a fetch
 *       and req NULL the call waits and returns with *fetch written or an error
 *   rvx_status_t rvx_atomic32(... the same with uint32_t operand, compare and *fetch)
 *
 * Active messages (proto/am.h; RVX_AM builds). Requests fail with RVX_ERR_NO_RESOURCE when the
 * ring to the peer is full (progress and retry); replies wait for room instead.
 *   rvx_status_t rvx_am_short(rvx_ep_t *ep, unsigned id, const uint64_t *args, unsigned nargs)
 *       up to RVX_AM_MAX_ARGS arguments
 *   rvx_status_t rvx_am_medium(rvx_ep_t *ep, unsigned id, const uint64_t *args, unsigned nargs,
 *                              const void *payload, size_t len)
 *       payload copied, up to RVX_AM_MAX_MEDIUM bytes (more: RVX_ERR_EXCEEDS_LIMIT, nothing sent)
 *   rvx_status_t rvx_am_long(rvx_ep_t *ep, unsigned id, const uint64_t *args, unsigned nargs,
 *                            const void *payload, size_t len, uint64_t raddr,
 *                            const rvx_rkey_t *rkey)
 *       payload put at raddr in the target's registered memory before its handler runs
 *   rvx_status_t rvx_am_reply_short(rvx_am_token_t *t, unsigned id, const uint64_t *args,
 *                                   unsigned nargs)
 *   rvx_status_t rvx_am_reply_medium(rvx_am_token_t *t, ... as rvx_am_medium after the ep)
 *   rvx_status_t rvx_am_reply_long(rvx_am_token_t *t, ... as rvx_am_long after the ep)
 *       once, from a request handler only; never fails for lack of room
 *
 * Batches (proto/batch.h): operations on one endpoint written back to back, one doorbell
 *   void rvx_batch_begin(rvx_batch_t *b, rvx_ep_t *ep)
 *   rvx_status_t rvx_batch_put(rvx_batch_t *b, ... as rvx_put after the ep)
 *   rvx_status_t rvx_batch_am_short(rvx_batch_t *b, ... as rvx_am_short after the ep)
 *   void rvx_batch_end(rvx_batch_t *b)
 *       between begin and end only batch calls on that endpoint; the NIC is told at the end
 *
 * Tag matching (proto/tag.h; RVX_TAG=1 builds)
 *   rvx_status_t rvx_tag_send(rvx_ep_t *ep, const void *buf, size_t len, uint64_t tag,
 *                             rvx_request_t *req)
 *       RVX_OK: sent, buf reusable; RVX_INPROGRESS: req completes later (rendezvous, zero-copy,
 *       or queued behind a full ring)
 *   rvx_status_t rvx_tag_recv(rvx_worker_t *w, void *buf, size_t len, uint64_t tag,
 *                             uint64_t tag_mask, rvx_request_t *req, rvx_tag_info_t *info)
 *       the first message from any sender whose tag matches in tag_mask's bits (0: any tag);
 *       RVX_OK, RVX_ERR_MSG_TRUNCATED (buffer filled, never more) or RVX_INPROGRESS
 *   rvx_status_t rvx_tag_recv_from(rvx_worker_t *w, int src, void *buf, size_t len, uint64_t tag,
 *                                  uint64_t tag_mask, rvx_request_t *req, rvx_tag_info_t *info)
 *       from rank src only; RVX_ERR_PEER_FAILED if src fails before a match
 *   rvx_status_t rvx_tag_probe(rvx_worker_t *w, uint64_t tag, uint64_t tag_mask,
 *                              rvx_tag_info_t *info)
 *       RVX_OK (info filled) if a matching message waits, else RVX_INPROGRESS; no progress
 *   rvx_status_t rvx_tag_cancel(rvx_worker_t *w, rvx_request_t *req)
 *       withdraw an unmatched receive (req completes RVX_ERR_CANCELED); else RVX_ERR_INVALID_PARAM
 *   void rvx_tag_mem_invalidate(rvx_worker_t *w, void *addr, size_t len)
 *       memory about to be freed or unmapped: forget its cached registrations
 *
 * Progress, flush, waiting (core.h)
 *   int rvx_progress(rvx_worker_t *w)
 *       handle arrivals and completions; returns how many; not from an AM handler
 *   rvx_status_t rvx_ep_flush_nb(rvx_ep_t *ep, rvx_request_t *req)
 *       remote completion of everything issued on ep: RVX_OK at once when nothing is
 *       outstanding, RVX_INPROGRESS, or the first error of an earlier operation on ep
 *   rvx_status_t rvx_worker_flush_nb(rvx_worker_t *w, rvx_request_t *req)    every ep of w
 *       the same for every ep of w; an operation a peer refused since the last worker flush
 *       that reported one is reported once (a peer's failure: by its ep's flush and status)
 *   rvx_status_t rvx_ep_flush(rvx_ep_t *ep)                    blocking
 *   rvx_status_t rvx_worker_flush(rvx_worker_t *w)             blocking
 *   void rvx_request_init(rvx_request_t *req)                  mark req pending before a call
 *   rvx_status_t rvx_wait(rvx_worker_t *w, rvx_request_t *req) progress until req is done
 *   rvx_status_t rvx_complete(rvx_worker_t *w, rvx_status_t st, rvx_request_t *req)
 *       st, or if st is RVX_INPROGRESS what req completes with
 *   rvx_status_t rvx_wait_flag(rvx_worker_t *w, rvx_ep_t *ep, const volatile int *flag,
 *                              int timeout_ms)
 *       progress until *flag != 0; RVX_ERR_PEER_FAILED if ep's peer fails, RVX_ERR_TIMED_OUT
 *       after timeout_ms (negative: no limit)
 *
 * Eager/rendezvous model (proto/thresh.h; for tools and tests)
 *   rvx_thresh_params_t rvx_thresh_params_fabric(int rrc)      this build's fabric parameters
 *   int rvx_thresh_params_ok(const rvx_thresh_params_t *p)     inside the exact ranges?
 *   uint64_t rvx_thresh_compute(const rvx_thresh_params_t *p)  the switch in bytes (0: bad p)
 *   double rvx_thresh_eager_ns(const rvx_thresh_params_t *p, size_t size)
 *   double rvx_thresh_rndv_ns(const rvx_thresh_params_t *p, size_t size)
 *
 * Low-level helpers rvx is built on (sys/compiler.h; public names, not needed by applications)
 *   rvx_compiler_barrier(), rvx_release_fence(), rvx_store_release_u32(p, v),
 *   rvx_store_release_u64(p, v), rvx_load_acquire_u32(p), rvx_load_acquire_u64(p),
 *   rvx_to_device_barrier(), rvx_from_device_barrier(), rvx_wc_start(), rvx_wc_flush(),
 *   rvx_cpu_relax()                                            barriers named by what they order
 *   rvx_htobe16(v), rvx_htobe32(v), rvx_htobe64(v)             byte swaps (little-endian hosts)
 *   int rvx_is_pow2(uint64_t v)
 *
 * Semantics in full: docs/api.md. Names: rvx_ public, rvx__ private, RVX_ macros. */
#ifndef RVX_RVX_H
#define RVX_RVX_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <features.h>
#if defined(__GLIBC__) && !defined(__USE_GNU)
#error "rvx.h needs GNU/POSIX declarations: include <rvx/rvx.h> before system headers, or compile with -D_GNU_SOURCE"
#endif

#include "config.h"
#include "sys/compiler.h"
#include "types.h"
#include "sys/env.h"
#include "sys/clock.h"
#include "sys/mem.h"
#if RVX_BOOT == RVX_BOOT_PMIX
#include "boot/pmix.h"
#else
#include "boot/local.h"
#endif

#if RVX_PAIR
#include "tl/pair.h"         /* shm on the node, RVX_TL between nodes */
#elif RVX_TL == RVX_TL_SHM
#include "tl/shm.h"
#elif RVX_TL == RVX_TL_RC_MLX5
#include "tl/rc_mlx5.h"
#elif RVX_TL == RVX_TL_DC_MLX5
#include "tl/dc_mlx5.h"
#endif
#include "tl/bind.h"         /* its names bound to the contract's (rvx__tl_*) */
#include "tl/tx.h"           /* the endpoint as the protocols' hot sends see it */

#include "core.h"
#include "proto/rcache.h"
#include "proto/thresh.h"
#include "proto/rma.h"
#include "proto/amo.h"
#if RVX_AM
#include "proto/am.h"
#endif
#include "proto/batch.h"
#if RVX_TAG
#include "proto/tag_match.h" /* operations and matching queues */
#if RVX_RNDV == RVX_RNDV_GET
#include "proto/rndv/get.h"
#elif RVX_RNDV == RVX_RNDV_PUT
#include "proto/rndv/put.h"
#elif RVX_RNDV == RVX_RNDV_AM
#include "proto/rndv/am.h"
#elif RVX_RNDV == RVX_RNDV_PIPELINE
#include "proto/rndv/pipeline.h"
#endif
#include "proto/tag.h"       /* the API and its fast paths */
#include "proto/tag_peer.h"  /* peer liveness, endpoint teardown, progress hook */
#endif
#if RVX_CAN_RECEIVE
#include "proto/rx.h"
#endif
#include "proto/hooks.h"     /* the protocols' worker, endpoint and progress hooks, composed */

#endif /* RVX_RVX_H */
