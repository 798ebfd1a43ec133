/* rvx/tl/pair.h: two transports in one build: shared memory (tl/shm.h) to the peers on this
 * rank's node, the build's mlx5 transport (RVX_TL: tl/rc_mlx5.h or tl/dc_mlx5.h, "net" below) to
 * the others. Built when RVX_TL_INTRA=RVX_TL_SHM is defined beside RVX_TL (config.h: RVX_PAIR).
 *
 * Both headers are compiled in under their own names: shm's rvx__shm_*, net's rvx__rc_* or
 * rvx__dc_* (RVX__PAIR_NET(x) below names the build's), their shared device layer's rvx__mlx5_*. The
 * pair defines the contract as rvx__pair_* (tl/bind.h binds it), reads of each transport only
 * what that transport exports for it (rvx__shm_iface_nrx, rvx__rc_iface_in_rx, ...), and defines
 * both transports' upcalls (rvx__shm_rx_deliver, RVX__PAIR_NET(rx_deliver)): each finds the pair
 * endpoint around the sub-endpoint and calls the protocols'. Every operation is one
 * branch on ep->intra, set when the endpoint is created, to the sub-transport's inline function:
 * no pointer, both paths inlined. The protocols' hot sends (a claim, a body, a publish) take the
 * branch once (RVX__PAIR_SEND, tl/tx.h) rather than once per call.
 *
 * Where a peer runs: the bootstrap numbers this rank's node (rvx__boot_t.node), the core hands it
 * to rvx__pair_iface_init, and it travels in the worker's address; an endpoint whose peer has the
 * same number is on the node.
 *
 * Atomics always go through the NIC, also to on-node peers: then atomics on one word from ranks
 * on the node and off it stay atomic (a NIC atomic is not atomic against a CPU's). So an on-node
 * endpoint connects its net endpoint as well as its shm one (rc_mlx5 connects a QP to every rank
 * at worker creation anyway; dc_mlx5 keeps no per-peer queue). The price: an on-node atomic is a
 * NIC round trip (loopback through the adapter), and it completes before the call returns, so
 * that the endpoint's order holds against the puts and messages after it, which go through
 * shared memory: on-node atomics are not pipelined.
 *
 * Memory: rvx_mem_alloc memory is shm's (a memfd on-node peers map) and is registered with the
 * NIC as well; rvx_mem_reg registers with both. A packed key is shm's key then net's; unpacking on
 * an on-node endpoint resolves both (shm for puts and gets, net for atomics), on another only net.
 *
 * Progress: nothing without live endpoints (one load and a branch); shm's rings while on-node
 * endpoints exist (shm's own loop over them), net's CQ while off-node endpoints exist or net work
 * (on-node atomics) is outstanding. */
#ifndef RVX_TL_PAIR_H
#define RVX_TL_PAIR_H

#include <stddef.h>

#include "contract.h"

#include "shm.h"
#if RVX_TL == RVX_TL_RC_MLX5
#include "rc_mlx5.h"
#define RVX__PAIR_NET(x) rvx__rc_##x /* the net transport's own names */
#define RVX__PAIR_NET_ADDR_SIZE       RVX__RC_ADDR_SIZE
#define RVX__PAIR_NET_ADDR_KEPT       RVX__RC_ADDR_KEPT
#define RVX__PAIR_NET_AM_ZCOPY        RVX__RC_AM_ZCOPY
#define RVX__PAIR_NET_AM_ZCOPY_HDR    RVX__RC_AM_ZCOPY_HDR_MAX
#define RVX__PAIR_NET_IN_HANDLER(ep)  RVX__RC_IN_HANDLER(ep)
#define RVX__PAIR_NET_IN_RX(ifc)      rvx__rc_iface_in_rx(ifc)
#define rvx__pair_net_claim_hot    rvx__rc_am_claim
#elif RVX_TL == RVX_TL_DC_MLX5
#include "dc_mlx5.h"
#define RVX__PAIR_NET(x) rvx__dc_##x
#define RVX__PAIR_NET_ADDR_SIZE       RVX__DC_ADDR_SIZE
#define RVX__PAIR_NET_ADDR_KEPT       RVX__DC_ADDR_KEPT
#define RVX__PAIR_NET_AM_ZCOPY        RVX__DC_AM_ZCOPY
#define RVX__PAIR_NET_AM_ZCOPY_HDR    RVX__DC_AM_ZCOPY_HDR_MAX
#define RVX__PAIR_NET_IN_HANDLER(ep)  RVX__DC_IN_HANDLER(ep)
#define RVX__PAIR_NET_IN_RX(ifc)      rvx__dc_iface_in_rx(ifc)
#define rvx__pair_net_claim_hot    rvx__dc_am_claim_hot /* fails rather than call out */
#endif
#if RVX__SHM_AM_ZCOPY
#error "tl/pair.h: shm's messages are not expected to be zero-copy"
#endif

/* ---- types ---------------------------------------------------------------------------------- */

typedef struct rvx__pair_ctx {
    rvx__shm_ctx_t shm;
    rvx__mlx5_ctx_t net;
} rvx__pair_ctx_t;

/* addr and len first: the core reads them of every region */
typedef struct rvx__pair_mem {
    void             *addr;
    size_t            len;
    rvx__shm_mem_t shm;
    rvx__mlx5_mem_t net;
} rvx__pair_mem_t;

/* net first: the off-node put then finds its key at the address it was given (no add) */
typedef struct rvx__pair_rkey {
    rvx__mlx5_rkey_t net;   /* always: every access off the node, atomics on it */
    rvx__shm_rkey_t shm;   /* resolved on an on-node endpoint only: puts and gets */
#if RVX_DEBUG
    const void *dbg_ep; /* the endpoint it was unpacked on (rvx_rkey_unpack): checked at use */
#endif
} rvx__pair_rkey_t;
#define RVX__PAIR_RKEY_PACKED_SIZE (RVX__SHM_RKEY_PACKED_SIZE + RVX__MLX5_RKEY_PACKED_SIZE)

/* A worker's address: this header, then shm's address at RVX__PAIR_SHM_OFF and net's at
 * RVX__PAIR_NET_OFF (8-byte aligned: both hold 64-bit fields). Net's comes last, so that the
 * prefix net keeps after wire-up (RVX__PAIR_ADDR_KEPT) is a prefix of the pair's too. */
typedef struct rvx__pair_addr {
    int32_t node;
    int32_t pad;
} rvx__pair_addr_t;
#define RVX__PAIR_SHM_OFF sizeof(rvx__pair_addr_t)
#define RVX__PAIR_NET_OFF (RVX__PAIR_SHM_OFF + ((sizeof(rvx__shm_addr_t) + 7) & ~(size_t)7))
#define RVX__PAIR_ADDR_SIZE(n) (RVX__PAIR_NET_OFF + RVX__PAIR_NET_ADDR_SIZE(n))
#ifdef RVX__PAIR_NET_ADDR_KEPT
#define RVX__PAIR_ADDR_KEPT(n) (RVX__PAIR_NET_OFF + RVX__PAIR_NET_ADDR_KEPT(n))
#endif

struct rvx__pair_iface;

/* intra first: the one word every operation branches on; net's endpoint (rc_mlx5: the conn
 * pointer) next to it, shm's rings after. */
typedef struct rvx__pair_ep {
    uint8_t               intra;   /* the peer is on this node: shm; else net */
    int                   rank;
    RVX__PAIR_NET(ep_t)      net;     /* connected on every endpoint (atomics go this way) */
    rvx__shm_ep_t      shm;     /* connected on on-node endpoints */
    struct rvx__pair_iface *ifc;
} rvx__pair_ep_t;

typedef struct rvx__pair_iface {
    /* hot: progress reads these */
    unsigned          nlive;       /* endpoints, both paths */
    unsigned          outstanding; /* 0: net's own count is net.outstanding (the core reads this
                                      field for lanes above 0 only, which a pair has not) */
    unsigned          noff;        /* endpoints to other nodes: net's CQ is polled for them */
    int               node;        /* this rank's node */
    rvx__shm_iface_t shm;
    RVX__PAIR_NET(iface_t) net;
    /* cold */
    int               rank;
    int               nranks;
} rvx__pair_iface_t;

#define RVX__PAIR_SHM_ADDR(a) ((rvx__shm_addr_t *)(void *)((uint8_t *)(a) + RVX__PAIR_SHM_OFF))
#define RVX__PAIR_NET_ADDR(a) ((RVX__PAIR_NET(addr_t) *)(void *)((uint8_t *)(a) + RVX__PAIR_NET_OFF))

/* ---- upcalls: a sub-endpoint's frame goes to the protocols with the pair endpoint ----------- */
#if RVX_CAN_RECEIVE
RVX_INLINE void rvx__rx_deliver(rvx__pair_ep_t *ep, unsigned chan, unsigned info, void *body,
                                size_t len); /* the protocols' (proto/rx.h) */

/* shm's deliveries run with net's in_rx set, so that one word says "a handler runs" on both
 * paths (RVX__PAIR_IN_HANDLER_TX); net's progress, which it also holds off, is not re-entered from
 * a handler anyway (rvx_progress from a handler does nothing). */
RVX_INLINE void rvx__shm_rx_deliver(rvx__shm_ep_t *sep, unsigned chan, unsigned info,
                                    void *body, size_t len)
{
    rvx__pair_ep_t *ep = RVX_CONTAINER_OF(sep, rvx__pair_ep_t, shm);
    uint8_t *in_rx = RVX__PAIR_NET_IN_RX(&ep->ifc->net);
    uint8_t was = *in_rx;
    *in_rx = 1;
    rvx__rx_deliver(ep, chan, info, body, len);
    *in_rx = was;
}

RVX_INLINE void RVX__PAIR_NET(rx_deliver)(RVX__PAIR_NET(ep_t) *nep, unsigned chan, unsigned info,
                                    void *body, size_t len)
{
    rvx__rx_deliver(RVX_CONTAINER_OF(nep, rvx__pair_ep_t, net), chan, info, body, len);
}
#endif

#include "pair/setup.h"

/* ---- RMA: one branch on where the peer is --------------------------------------------------- */

RVX_INLINE rvx_status_t rvx__pair_put_short(rvx__pair_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__pair_rkey_t *rkey)
{
    if (ep->intra) return rvx__shm_put_short(&ep->shm, src, len, raddr, &rkey->shm);
    return RVX__PAIR_NET(put_short)(&ep->net, src, len, raddr, &rkey->net);
}

/* The end of a batch: only the net path has a doorbell. */
RVX_INLINE void rvx__pair_ep_ring(rvx__pair_ep_t *ep)
{
    if (!ep->intra) RVX__PAIR_NET(ep_ring)(&ep->net);
}

/* The batch scope (proto/batch.h): net's on the net path; ordinary puts on shm. The path is
 * read once, at the beginning. */
typedef struct rvx__pair_batch {
    rvx__pair_ep_t   *ep;
    int               intra;
    rvx__mlx5_batch_t net;
} rvx__pair_batch_t;

RVX_INLINE void rvx__pair_batch_begin(rvx__pair_ep_t *ep, rvx__pair_batch_t *b)
{
    b->ep = ep;
    b->intra = ep->intra;
    if (b->intra) memset(&b->net, 0, sizeof(b->net)); /* unused: defined for the compiler */
    else rvx__mlx5_batch_begin(&ep->net, &b->net);
}

RVX_INLINE void rvx__pair_batch_sync(rvx__pair_batch_t *b)
{
    if (!b->intra) rvx__mlx5_batch_sync(&b->net);
}

RVX_INLINE void rvx__pair_batch_reload(rvx__pair_batch_t *b)
{
    if (!b->intra) rvx__mlx5_batch_reload(&b->net);
}

RVX_INLINE void rvx__pair_batch_end(rvx__pair_batch_t *b)
{
    if (!b->intra) rvx__mlx5_batch_end(&b->net);
}

RVX_INLINE rvx_status_t rvx__pair_batch_put_short(rvx__pair_batch_t *b, const void *src, size_t len,
                                                  uint64_t raddr, const rvx__pair_rkey_t *rkey)
{
    if (b->intra) return rvx__shm_put_short(&b->ep->shm, src, len, raddr, &rkey->shm);
    return rvx__mlx5_batch_put_short(&b->net, src, len, raddr, &rkey->net);
}

RVX_INLINE rvx_status_t rvx__pair_put_bcopy(rvx__pair_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__pair_rkey_t *rkey)
{
    if (ep->intra) return rvx__shm_put_bcopy(&ep->shm, src, len, raddr, &rkey->shm);
    return RVX__PAIR_NET(put_bcopy)(&ep->net, src, len, raddr, &rkey->net);
}

RVX_INLINE rvx_status_t rvx__pair_put_zcopy(rvx__pair_ep_t *ep, const void *src, size_t len,
                                          const rvx__pair_mem_t *lmem, uint64_t raddr,
                                          const rvx__pair_rkey_t *rkey, rvx_request_t *req)
{
    if (ep->intra) return rvx__shm_put_zcopy(&ep->shm, src, len, &lmem->shm, raddr, &rkey->shm, req);
    return RVX__PAIR_NET(put_zcopy)(&ep->net, src, len, &lmem->net, raddr, &rkey->net, req);
}

RVX_INLINE rvx_status_t rvx__pair_get_bcopy(rvx__pair_ep_t *ep, void *dst, size_t len, uint64_t raddr,
                                          const rvx__pair_rkey_t *rkey, rvx_request_t *req)
{
    if (ep->intra) return rvx__shm_get_bcopy(&ep->shm, dst, len, raddr, &rkey->shm, req);
    return RVX__PAIR_NET(get_bcopy)(&ep->net, dst, len, raddr, &rkey->net, req);
}

RVX_INLINE rvx_status_t rvx__pair_get_zcopy(rvx__pair_ep_t *ep, void *dst, size_t len,
                                          const rvx__pair_mem_t *lmem, uint64_t raddr,
                                          const rvx__pair_rkey_t *rkey, rvx_request_t *req)
{
    if (ep->intra) return rvx__shm_get_zcopy(&ep->shm, dst, len, &lmem->shm, raddr, &rkey->shm, req);
    return RVX__PAIR_NET(get_zcopy)(&ep->net, dst, len, &lmem->net, raddr, &rkey->net, req);
}

/* Atomics: through the NIC whatever the peer (see the top of this file). On the node the atomic
 * has completed when the call returns (a fetch into a local word where the caller wants none):
 * the puts and messages issued after it go through shared memory and would otherwise overtake
 * it, against the endpoint's order. A NIC round trip per on-node atomic, in a call. */
RVX_COLD rvx_status_t rvx__pair_amo_intra(rvx__pair_ep_t *ep, rvx_amo_op_t op, unsigned size,
                                          uint64_t v, uint64_t cmp, uint64_t raddr,
                                          const rvx__pair_rkey_t *rkey, void *fetch)
{
    uint64_t old64;
    uint32_t old32;
    if (size == 8)
        return RVX__PAIR_NET(atomic64)(&ep->net, op, v, cmp, raddr, &rkey->net,
                                    fetch ? (uint64_t *)fetch : &old64, NULL);
    return RVX__PAIR_NET(atomic32)(&ep->net, op, (uint32_t)v, (uint32_t)cmp, raddr, &rkey->net,
                                fetch ? (uint32_t *)fetch : &old32, NULL);
}

RVX_INLINE rvx_status_t rvx__pair_atomic64(rvx__pair_ep_t *ep, rvx_amo_op_t op, uint64_t operand,
                                         uint64_t compare, uint64_t raddr, const rvx__pair_rkey_t *rkey,
                                         uint64_t *fetch, rvx_request_t *req)
{
    if (ep->intra) return rvx__pair_amo_intra(ep, op, 8, operand, compare, raddr, rkey, fetch);
    return RVX__PAIR_NET(atomic64)(&ep->net, op, operand, compare, raddr, &rkey->net, fetch, req);
}

RVX_INLINE rvx_status_t rvx__pair_atomic32(rvx__pair_ep_t *ep, rvx_amo_op_t op, uint32_t operand,
                                         uint32_t compare, uint64_t raddr, const rvx__pair_rkey_t *rkey,
                                         uint32_t *fetch, rvx_request_t *req)
{
    if (ep->intra) return rvx__pair_amo_intra(ep, op, 4, operand, compare, raddr, rkey, fetch);
    return RVX__PAIR_NET(atomic32)(&ep->net, op, operand, compare, raddr, &rkey->net, fetch, req);
}

/* The protocols' hot sends (tl/tx.h): the handle names the transport that carries the endpoint
 * (shm 1: shared memory, 0: net). RVX__PAIR_SEND reads ep->intra once and calls fn in two
 * copies, each with the transport a constant, so that the hooks below fold to one transport's. */
typedef struct rvx__pair_tx {
    rvx__pair_ep_t *ep;
    unsigned        shm;
} rvx__pair_tx_t;

RVX_INLINE rvx__pair_tx_t rvx__pair_tx_of(rvx__pair_ep_t *ep, unsigned shm)
{
    rvx__pair_tx_t tx;
    tx.ep = ep;
    tx.shm = shm;
    return tx;
}

#define rvx__pair_tx(ep) rvx__pair_tx_of((ep), (ep)->intra)
#define RVX__PAIR_SEND(ep, fn, ...) \
    (!(ep)->intra ? fn(rvx__pair_tx_of((ep), 0), __VA_ARGS__) : fn(rvx__pair_tx_of((ep), 1), __VA_ARGS__))

/* ---- messages (builds that receive: the only ones where mlx5 carries them) ------------------ */
#if RVX_CAN_RECEIVE

RVX_INLINE void *rvx__pair_am_claim(rvx__pair_ep_t *ep, unsigned chan, size_t len)
{
    if (ep->intra) return rvx__shm_am_claim(&ep->shm, chan, len);
    return RVX__PAIR_NET(am_claim)(&ep->net, chan, len);
}

RVX_INLINE void *rvx__pair_am_claim_tx(rvx__pair_tx_t tx, unsigned chan, size_t len)
{
    if (tx.shm) return rvx__shm_am_claim(&tx.ep->shm, chan, len); /* never calls out */
    return rvx__pair_net_claim_hot(&tx.ep->net, chan, len);
}

RVX_INLINE rvx_status_t rvx__pair_am_publish_tx(rvx__pair_tx_t tx, unsigned chan, void *body,
                                              size_t len, unsigned info)
{
    if (tx.shm) return rvx__shm_am_publish(&tx.ep->shm, chan, body, len, info);
    return RVX__PAIR_NET(am_publish)(&tx.ep->net, chan, body, len, info);
}

RVX_INLINE rvx_status_t rvx__pair_am_publish_more_tx(rvx__pair_tx_t tx, unsigned chan, void *body,
                                                   size_t len, unsigned info)
{
    if (tx.shm) return rvx__shm_am_publish(&tx.ep->shm, chan, body, len, info);
    return RVX__PAIR_NET(am_publish_more)(&tx.ep->net, chan, body, len, info);
}

/* net's in_rx on either transport: net's own test where net sends (it loads the word's way
 * anyway), the pair iface's copy of net's iface where shm sends */
#define RVX__PAIR_IN_HANDLER_TX(tx) \
    ((tx).shm ? (unsigned)*RVX__PAIR_NET_IN_RX(&(tx).ep->ifc->net) : RVX__PAIR_NET_IN_HANDLER(&(tx).ep->net))

/* The contract's publish (the protocols' cold paths): the handle's, on the endpoint's transport. */
RVX_INLINE rvx_status_t rvx__pair_am_publish(rvx__pair_ep_t *ep, unsigned chan, void *body, size_t len,
                                           unsigned info)
{
    return rvx__pair_am_publish_tx(rvx__pair_tx(ep), chan, body, len, info);
}

RVX_INLINE rvx_status_t rvx__pair_am_publish_more(rvx__pair_ep_t *ep, unsigned chan, void *body,
                                                size_t len, unsigned info)
{
    return rvx__pair_am_publish_more_tx(rvx__pair_tx(ep), chan, body, len, info);
}

RVX_COLD void *rvx__pair_am_wait_room(rvx__pair_ep_t *ep, unsigned chan, size_t len)
{
    if (ep->intra) return rvx__shm_am_wait_room(&ep->shm, chan, len);
    return RVX__PAIR_NET(am_wait_room)(&ep->net, chan, len);
}

/* Zero-copy where net carries the message; shm copies (and ignores lmem). RVX__PAIR_AM_ZCOPY is
 * net's; RVX__PAIR_AM_ZCOPY_ON tells callers that an on-node body needs no registration. */
#define RVX__PAIR_AM_ZCOPY RVX__PAIR_NET_AM_ZCOPY
#define RVX__PAIR_AM_ZCOPY_ON(ep) (!(ep)->intra && RVX__PAIR_NET_AM_ZCOPY)
#define RVX__PAIR_AM_ZCOPY_HDR_MAX \
    ((int)RVX__SHM_AM_ZCOPY_HDR_MAX < (int)RVX__PAIR_NET_AM_ZCOPY_HDR ? (int)RVX__SHM_AM_ZCOPY_HDR_MAX : (int)RVX__PAIR_NET_AM_ZCOPY_HDR)
RVX_INLINE rvx_status_t rvx__pair_am_zcopy(rvx__pair_ep_t *ep, unsigned chan, const void *hdr,
                                         size_t hdrlen, const void *buf, size_t len,
                                         const rvx__pair_mem_t *lmem, unsigned info,
                                         rvx_request_t *req)
{
    if (ep->intra)
        return rvx__shm_am_zcopy(&ep->shm, chan, hdr, hdrlen, buf, len, lmem ? &lmem->shm : NULL,
                                    info, req);
    return RVX__PAIR_NET(am_zcopy)(&ep->net, chan, hdr, hdrlen, buf, len, lmem ? &lmem->net : NULL,
                                info, req);
}
#endif /* RVX_CAN_RECEIVE */

/* ---- progress and flush --------------------------------------------------------------------- */

/* Nothing without live endpoints; shm's rings (its loop over on-node endpoints: none, nothing);
 * net's CQ while off-node endpoints live or net work (on-node atomics) is outstanding. In an
 * RMA-only build only net has anything to complete, and its progress looks at outstanding. */
#if RVX_CAN_RECEIVE
/* Both transports live: each polled in turn. Out of line, so that the paths below keep each
 * transport's tail calls and need no saved registers (no prologue before the idle return). */
static RVX_NOINLINE RVX_UNUSED int rvx__pair_progress_both(rvx__pair_iface_t *ifc)
{
    int n = rvx__shm_progress(&ifc->shm);
    return n + RVX__PAIR_NET(progress)(&ifc->net);
}
#endif

/* No endpoint off the node and nothing outstanding on net: net's CQ is not polled (what it holds
 * waits until an endpoint is off the node again). */
RVX_INLINE int rvx__pair_net_idle(const rvx__pair_iface_t *ifc)
{
    return !ifc->noff && !ifc->net.outstanding;
}

RVX_INLINE int rvx__pair_progress(rvx__pair_iface_t *ifc)
{
#if RVX_CAN_RECEIVE
    if (!ifc->nlive) return 0;
    if (rvx__pair_net_idle(ifc)) return rvx__shm_progress(&ifc->shm);
    if (!rvx__shm_iface_nrx(&ifc->shm)) return RVX__PAIR_NET(progress)(&ifc->net);
    return rvx__pair_progress_both(ifc);
#else
    return RVX__PAIR_NET(progress)(&ifc->net);
#endif
}

/* The path's flush; on an on-node endpoint net's too, which returns at once unless atomics are
 * outstanding on it. */
RVX_INLINE rvx_status_t rvx__pair_ep_flush(rvx__pair_ep_t *ep, rvx_request_t *req)
{
    if (ep->intra) {
        rvx_status_t st = rvx__shm_ep_flush(&ep->shm, req);
        if (st != RVX_OK) return st;
    }
    return RVX__PAIR_NET(ep_flush)(&ep->net, req);
}

/* Nothing to flush on either side. */
#define RVX__PAIR_IFACE_FLUSHED 1
RVX_INLINE int rvx__pair_iface_flushed(const rvx__pair_iface_t *ifc)
{
    return rvx__shm_iface_flushed(&ifc->shm) && RVX__PAIR_NET(iface_flushed)(&ifc->net);
}

RVX_INLINE rvx_status_t rvx__pair_iface_flush(rvx__pair_iface_t *ifc, rvx_request_t *req)
{
    rvx_status_t st = rvx__shm_iface_flush(&ifc->shm, req);
    if (st != RVX_OK) return st;
    return RVX__PAIR_NET(iface_flush)(&ifc->net, req);
}

#endif /* RVX_TL_PAIR_H */
