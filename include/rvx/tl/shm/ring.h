/* rvx/tl/shm/ring.h: the rings that carry active messages: where a sender's rings sit in a
 * mailbox and the frame header; a frame claimed and published by the producer, and the zero-copy
 * send, which is a copy (hot); the consumer that hands frames to the protocols, and the wait for
 * room that a reply may not fail without (cold). */
#ifndef RVX_TL_SHM_RING_H
#define RVX_TL_SHM_RING_H

#include "decl.h"

/* ---- the mailbox's rings and the frame format ----------------------------------------------- */

RVX_INLINE uint8_t *rvx__shm_ring(uint8_t *mbox, int slot, unsigned chan)
{
    return mbox + RVX__SHM_SLOT + ((size_t)slot * RVX__TL_AM_CHANNELS + chan) * RVX__SHM_RING_BYTES;
}

/* Bytes of a mailbox with rings for nslots senders. */
RVX_INLINE size_t rvx__shm_mbox_bytes(int nslots)
{
    return RVX__SHM_SLOT + (size_t)nslots * RVX__TL_AM_CHANNELS * RVX__SHM_RING_BYTES;
}

RVX_INLINE uint64_t rvx__shm_header(uint64_t pos, size_t len, unsigned info)
{
    return (uint32_t)(pos + 1) | ((uint64_t)len << 32) | ((uint64_t)info << 48);
}

/* Point the receive cursor at the slot of `head`. */
RVX_INLINE void rvx__shm_rx_at(rvx__shm_rx_t *rx)
{
    rx->next = (const uint32_t *)(const void *)
        (rx->slots + ((size_t)rx->head & (RVX__SHM_NSLOTS - 1)) * RVX__SHM_SLOT);
    rx->expect = (uint32_t)(rx->head + 1);
}

RVX_INLINE size_t rvx__shm_nslots(size_t len) { return (8 + len + RVX__SHM_SLOT - 1) / RVX__SHM_SLOT; }

/* ---- producer: claim, publish, zero-copy ---------------------------------------------------- */

/* Room for a frame with `len` body bytes; returns where to write the body, or NULL when full.
 * A frame that would cross the ring's end is preceded by a skip frame. */
RVX_INLINE void *rvx__shm_am_claim(rvx__shm_ep_t *ep, unsigned chan, size_t len)
{
    rvx__shm_tx_t *tx = &ep->tx[chan];
    uint64_t pos = tx->tail;
    size_t nslots = rvx__shm_nslots(len);
    size_t idx = (size_t)pos & (RVX__SHM_NSLOTS - 1);
    size_t skip = (nslots > 1 && idx + nslots > RVX__SHM_NSLOTS) ? RVX__SHM_NSLOTS - idx : 0;

    if (RVX_UNLIKELY(pos + skip + nslots - tx->head_cache > RVX__SHM_NSLOTS)) {
        tx->head_cache = rvx_load_acquire_u64(tx->peer_head);
        if (pos + skip + nslots - tx->head_cache > RVX__SHM_NSLOTS) return NULL;
    }
    if (skip) {
        rvx_store_release_u64((uint64_t *)(void *)(tx->slots + idx * RVX__SHM_SLOT),
                              rvx__shm_header(pos, skip * RVX__SHM_SLOT - 8, RVX__SHM_SKIP));
        tx->tail = pos += skip;
        idx = 0;
    }
    return tx->slots + idx * RVX__SHM_SLOT + 8;
}

/* Make the frame visible: one release store of its header, after the body. RVX_OK always. */
RVX_INLINE rvx_status_t rvx__shm_am_publish(rvx__shm_ep_t *ep, unsigned chan, void *body, size_t len,
                                           unsigned info)
{
    rvx__shm_tx_t *tx = &ep->tx[chan];
    rvx_store_release_u64((uint64_t *)(void *)((uint8_t *)body - 8),
                          rvx__shm_header(tx->tail, len, info));
    tx->tail += rvx__shm_nslots(len);
    return RVX_OK;
}

/* "More coming" changes nothing here: the release store is all a frame needs (rvx__shm_ep_ring). */
RVX_INLINE rvx_status_t rvx__shm_am_publish_more(rvx__shm_ep_t *ep, unsigned chan, void *body,
                                                 size_t len, unsigned info)
{
    return rvx__shm_am_publish(ep, chan, body, len, info);
}

/* Zero-copy message, as the contract has it: between processes there is no zero-copy here, so
 * header and body are copied into the ring (the same as claim + publish) and the call completes
 * at once: RVX_OK, buf reusable; lmem and req are not used. RVX_ERR_NO_RESOURCE: ring full. */
#define RVX__SHM_AM_ZCOPY         0  /* no real zero-copy: callers need not register */
#define RVX__SHM_AM_ZCOPY_HDR_MAX 28
RVX_INLINE rvx_status_t rvx__shm_am_zcopy(rvx__shm_ep_t *ep, unsigned chan, const void *hdr, size_t hdrlen,
                                         const void *buf, size_t len, const rvx__shm_mem_t *lmem,
                                         unsigned info, rvx_request_t *req)
{
    uint8_t *b;
    (void)lmem;
    (void)req;
    if (hdrlen > RVX__SHM_AM_ZCOPY_HDR_MAX) return RVX_ERR_INVALID_PARAM;
    if (RVX_UNLIKELY(ep->failed)) return RVX_ERR_PEER_FAILED;
    b = (uint8_t *)rvx__shm_am_claim(ep, chan, hdrlen + len);
    if (!b) return RVX_ERR_NO_RESOURCE;
    if (hdrlen) memcpy(b, hdr, hdrlen);
    if (len) memcpy(b + hdrlen, buf, len);
    rvx__shm_am_publish(ep, chan, b, hdrlen + len, info);
    return RVX_OK;
}

/* ---- consumer ------------------------------------------------------------------------------- */

#if RVX_CAN_RECEIVE
RVX_INLINE int rvx__shm_ready(const rvx__shm_ep_t *ep, unsigned chan)
{
    return __atomic_load_n(ep->rx[chan].next, __ATOMIC_RELAXED) == ep->rx[chan].expect;
}

/* Hand over up to a batch of frames from one ring. */
RVX_COLD int rvx__shm_consume(rvx__shm_ep_t *ep, unsigned chan)
{
    rvx__shm_rx_t *rx = &ep->rx[chan];
    int n = 0;
    while (n < RVX__SHM_RX_BATCH) {
        uint64_t head = rx->head;
        uint8_t *slot = (uint8_t *)(uintptr_t)rx->next;
        uint64_t hdr = rvx_load_acquire_u64((uint64_t *)(void *)slot);
        size_t len = (size_t)(hdr >> 32) & 0xffff, nslots, i;
        unsigned info = (unsigned)(hdr >> 48);
        if ((uint32_t)hdr != rx->expect) break;
        nslots = rvx__shm_nslots(len);
        if (RVX_UNLIKELY(((size_t)head & (RVX__SHM_NSLOTS - 1)) + nslots > RVX__SHM_NSLOTS)) {
            /* a frame may not wrap: the peer is broken; drop the rest of this lap */
            nslots = RVX__SHM_NSLOTS - ((size_t)head & (RVX__SHM_NSLOTS - 1));
            info = RVX__SHM_SKIP;
            rvx__log("shm: rank %d sent a frame that crosses the ring end; dropped", ep->rank);
        }
        if (info != RVX__SHM_SKIP) rvx__shm_rx_deliver(ep, chan, info, slot + 8, len);
        /* Continuation slots may hold payload that, a lap later, would be read as a header:
         * stamp each with its own (now stale) position. */
        for (i = 1; i < nslots; i++)
            *(uint64_t *)(void *)(slot + i * RVX__SHM_SLOT) = (uint32_t)(head + i + 1);
        rx->head = head + nslots;
        rvx__shm_rx_at(rx);
        rvx_store_release_u64(rx->head_pub, rx->head);
        n++;
    }
    return n;
}
#endif

/* ---- waiting for room ----------------------------------------------------------------------- */

/* A reply must not fail for lack of room: wait, draining incoming replies (whose handlers cannot
 * send) so two peers replying to each other cannot deadlock; give up if the peer is gone. */
RVX_COLD void *rvx__shm_am_wait_room(rvx__shm_ep_t *ep, unsigned chan, size_t len)
{
    unsigned spins = 0;
    void *body;
    while (!(body = rvx__shm_am_claim(ep, chan, len))) {
#if RVX_CAN_RECEIVE
        unsigned i;
        for (i = 0; i < ep->ifc->nrx; i++)
            if (rvx__shm_ready(ep->ifc->rx[i], RVX__CHAN_REPLY))
                rvx__shm_consume(ep->ifc->rx[i], RVX__CHAN_REPLY);
#endif
        if ((spins & 1023) == 1023 && rvx__shm_ep_alive(ep) != RVX_OK) return NULL;
        spins++;
        if (spins > 4096) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    return body;
}

#endif /* RVX_TL_SHM_RING_H */
