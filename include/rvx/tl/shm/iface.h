/* rvx/tl/shm/iface.h: the interface: its mailbox, address and wire-up, endpoints (a peer's
 * mailbox mapped, the rings found in both), liveness, progress over the rings and flush; and the
 * hooks a pair build reads of shm. */
#ifndef RVX_TL_SHM_IFACE_H
#define RVX_TL_SHM_IFACE_H

#include "decl.h"
#include "mem.h"
#include "ring.h"

/* ---- what a pair (tl/pair.h) reads of shm: named here, so that its fields stay shm's -------- */

/* endpoints whose rings progress polls: none, and shm's progress has nothing to do */
RVX_INLINE unsigned rvx__shm_iface_nrx(const rvx__shm_iface_t *ifc) { return ifc->nrx; }

/* where a rank's rings sit in its node's mailboxes (slot) and how many senders each has (nslots):
 * from its address, and this rank's own */
RVX_INLINE void rvx__shm_addr_slot(const rvx__shm_addr_t *a, int *slot, int *nslots)
{
    *slot = a->slot;
    *nslots = a->nslots;
}
RVX_INLINE void rvx__shm_iface_slot(const rvx__shm_iface_t *ifc, int *slot, int *nslots)
{
    *slot = ifc->slot;
    *nslots = ifc->nslots;
}

/* ---- interface (cold) ----------------------------------------------------------------------- */

/* The iface of rank `rank` whose mailbox has rings for `nslots` senders and whose own rings are
 * at `slot` in its peers'. by_node: the slots are indices among the node's ranks, which the
 * caller checks are distinct at wire-up (tl/pair/setup.h); else every slot is its rank. */
RVX_COLD rvx_status_t rvx__shm_iface_open(rvx__shm_iface_t *ifc, rvx__shm_ctx_t *ctx, int rank,
                                          int nranks, int slot, int nslots, int by_node)
{
    memset(ifc, 0, sizeof(*ifc));
    if (slot < 0 || slot >= nslots || nslots > nranks) {
        rvx__log("rank %d: local rank %d of %d ranks on its node does not fit a job of %d", rank,
                 slot, nslots, nranks);
        return RVX_ERR_INVALID_PARAM;
    }
    ifc->tctx = ctx;
    ifc->rank = rank;
    ifc->nranks = nranks;
    ifc->slot = slot;
    ifc->nslots = nslots;
    ifc->by_node = by_node;
    ifc->mbox_len = rvx__shm_mbox_bytes(nslots);
    ifc->mbox_fd = rvx__shm_memfd("rvx-mailbox", ifc->mbox_len);
    if (ifc->mbox_fd < 0) {
        rvx__log("cannot create the shared-memory mailbox (%zu bytes): %s", ifc->mbox_len,
                 strerror(errno));
        return RVX_ERR_NO_MEMORY;
    }
    ifc->mbox = (uint8_t *)mmap(NULL, ifc->mbox_len, PROT_READ | PROT_WRITE, MAP_SHARED,
                                ifc->mbox_fd, 0);
    if (ifc->mbox == MAP_FAILED) {
        close(ifc->mbox_fd);
        return RVX_ERR_NO_MEMORY;
    }
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__shm_iface_init(rvx__shm_iface_t *ifc, rvx__shm_ctx_t *ctx, int rank,
                                         int nranks, int node)
{
    (void)node; /* one transport for every peer: where a peer runs changes nothing */
    return rvx__shm_iface_open(ifc, ctx, rank, nranks, rank, nranks, 0);
}

RVX_COLD void rvx__shm_iface_fini(rvx__shm_iface_t *ifc)
{
    /* peers that still map the mailbox see it closed and stop waiting for room in it */
    rvx_store_release_u64((uint64_t *)(void *)ifc->mbox, RVX__SHM_MBOX_CLOSED);
    free(ifc->rx);
    munmap(ifc->mbox, ifc->mbox_len);
    close(ifc->mbox_fd);
    memset(ifc, 0, sizeof(*ifc));
}

RVX_COLD void rvx__shm_iface_address(rvx__shm_iface_t *ifc, rvx__shm_addr_t *addr)
{
    memset(addr, 0, sizeof(*addr));
    addr->magic = RVX__SHM_MAGIC;
    addr->mbox_len = ifc->mbox_len;
    addr->pid = (int32_t)getpid();
    addr->fd = ifc->mbox_fd;
    addr->nslots = ifc->nslots;
    addr->slot = ifc->slot;
}

/* Nothing to set up per pair in advance: rings are found through the mailbox at ep_connect. */
RVX_COLD rvx_status_t rvx__shm_iface_wireup(rvx__shm_iface_t *ifc, const uint8_t *addrs, size_t size)
{
    (void)ifc;
    (void)addrs;
    (void)size;
    return RVX_OK;
}

/* ---- endpoints and liveness (cold) ---------------------------------------------------------- */

/* Is `addr` a shm address of this job whose rings fit this rank's mailbox? */
RVX_COLD rvx_status_t rvx__shm_ep_check_addr(const rvx__shm_iface_t *ifc, int rank,
                                             const rvx__shm_addr_t *addr)
{
    if (addr->magic != RVX__SHM_MAGIC || addr->nslots != ifc->nslots ||
        addr->mbox_len != ifc->mbox_len) {
        /* the rings are found at offsets the number of senders gives: a mailbox of another
         * length would put them outside what is mapped */
        rvx__log("address of rank %d is not a shm address of this job (different build, or a "
                 "mailbox for %d senders where this rank's has %d)", rank, (int)addr->nslots,
                 ifc->nslots);
        return RVX_ERR_INVALID_PARAM;
    }
    /* a slot out of range would put a ring outside the mailbox; two ranks of one node with one
     * slot are refused at wire-up, by the caller that knows the nodes (by_node) */
    if (addr->slot < 0 || addr->slot >= ifc->nslots || (!ifc->by_node && addr->slot != rank)) {
        rvx__log("rank %d names slot %d of %d for its rings: out of range%s", rank,
                 (int)addr->slot, ifc->nslots, ifc->by_node ? "" : " or not its rank");
        return RVX_ERR_INVALID_PARAM;
    }
    return RVX_OK;
}

/* Point the endpoint's rings at ours in the peer's mailbox (tx) and at the peer's in ours (rx). */
RVX_COLD void rvx__shm_ep_rings(rvx__shm_iface_t *ifc, rvx__shm_ep_t *ep, int peer_slot)
{
    unsigned c;
    for (c = 0; c < RVX__TL_AM_CHANNELS; c++) {
        uint8_t *txr = rvx__shm_ring(ep->peer_mbox, ifc->slot, c);
        uint8_t *rxr = rvx__shm_ring(ifc->mbox, peer_slot, c);
        ep->tx[c].slots = txr + RVX__SHM_SLOT;
        ep->tx[c].peer_head = (const volatile uint64_t *)txr;
        ep->tx[c].head_cache = rvx_load_acquire_u64((uint64_t *)txr);
        /* resume where an earlier endpoint to this peer stopped: restarting at the consumer's
         * position would leave older, still-valid frames behind the new ones */
        ep->tx[c].tail = ((uint64_t *)txr)[RVX__SHM_CTL_TAIL];
        ep->rx[c].slots = rxr + RVX__SHM_SLOT;
        ep->rx[c].head_pub = (uint64_t *)rxr;
        ep->rx[c].head = *ep->rx[c].head_pub;
        rvx__shm_rx_at(&ep->rx[c]);
    }
}

#if RVX_CAN_RECEIVE
/* Add the endpoint to those whose rings progress polls. */
RVX_COLD rvx_status_t rvx__shm_rx_add(rvx__shm_iface_t *ifc, rvx__shm_ep_t *ep)
{
    if (ifc->nrx == ifc->rx_cap) {
        unsigned cap = ifc->rx_cap ? 2 * ifc->rx_cap : 8;
        rvx__shm_ep_t **n = (rvx__shm_ep_t **)realloc(ifc->rx, cap * sizeof(*n));
        if (!n) return RVX_ERR_NO_MEMORY;
        ifc->rx = n;
        ifc->rx_cap = cap;
    }
    ifc->rx[ifc->nrx++] = ep;
    return RVX_OK;
}
#endif

RVX_COLD rvx_status_t rvx__shm_ep_connect(rvx__shm_iface_t *ifc, rvx__shm_ep_t *ep, int rank,
                                         const rvx__shm_addr_t *addr)
{
    rvx_status_t st;
    memset(ep, 0, sizeof(*ep));
    st = rvx__shm_ep_check_addr(ifc, rank, addr);
    if (st != RVX_OK) return st;
    ep->ifc = ifc;
    ep->rank = rank;
    ep->pid = addr->pid;
    if (addr->pid == getpid()) {
        ep->peer_mbox = ifc->mbox;           /* loopback: our own mailbox */
        ep->pidfd = -1;
    } else {
        ep->peer_mbox = (uint8_t *)rvx__shm_map_peer(addr->pid, addr->fd, addr->mbox_len,
                                                     "the mailbox");
        if (!ep->peer_mbox) return RVX_ERR_PEER_FAILED;
        ep->peer_mbox_len = addr->mbox_len;
        /* A pidfd becomes readable when the peer exits: the liveness check is one poll(). */
        ep->pidfd = (int)syscall(SYS_pidfd_open, addr->pid, 0);
    }
    rvx__shm_ep_rings(ifc, ep, addr->slot);
#if RVX_CAN_RECEIVE
    st = rvx__shm_rx_add(ifc, ep);
    if (st != RVX_OK) return st;
#endif
    ifc->nlive++;
    return RVX_OK;
}

RVX_COLD void rvx__shm_ep_disconnect(rvx__shm_ep_t *ep)
{
    rvx__shm_iface_t *ifc = ep->ifc;
    unsigned i;
    for (i = 0; i < ifc->nrx; i++) {
        if (ifc->rx[i] == ep) {
            ifc->rx[i] = ifc->rx[--ifc->nrx];
            break;
        }
    }
    ifc->nlive--;
    for (i = 0; i < RVX__TL_AM_CHANNELS; i++)
        ((uint64_t *)(uintptr_t)ep->tx[i].peer_head)[RVX__SHM_CTL_TAIL] = ep->tx[i].tail;
    if (ep->peer_mbox && ep->peer_mbox != ifc->mbox) munmap(ep->peer_mbox, ep->peer_mbox_len);
    if (ep->pidfd >= 0) close(ep->pidfd);
    ep->peer_mbox = NULL;
}

RVX_COLD rvx_status_t rvx__shm_ep_alive(rvx__shm_ep_t *ep)
{
    if (ep->failed) return RVX_ERR_PEER_FAILED;
    if (rvx_load_acquire_u64((uint64_t *)(void *)ep->peer_mbox) == RVX__SHM_MBOX_CLOSED) {
        ep->failed = 1;  /* the peer destroyed its worker */
        return RVX_ERR_PEER_FAILED;
    }
    if (ep->peer_mbox == ep->ifc->mbox) return RVX_OK; /* loopback */
    if (ep->pidfd >= 0) {
        struct pollfd pfd;
        pfd.fd = ep->pidfd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        if (poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN)) ep->failed = 1;
    } else if (kill(ep->pid, 0) && errno == ESRCH) {
        ep->failed = 1;
    }
    return ep->failed ? RVX_ERR_PEER_FAILED : RVX_OK;
}

/* ---- progress and flush --------------------------------------------------------------------- */

#if RVX_CAN_RECEIVE
/* Something has arrived on endpoint `first` (or later ones): deliver it all. Out of line, so
 * that the empty poll needs no saved registers. */
RVX_COLD int rvx__shm_progress_from(rvx__shm_iface_t *ifc, unsigned first)
{
    unsigned i;
    int done = 0;
    /* Progress called from inside a handler would hand the same frame over again (the ring's
     * head moves only after its handler returns): refuse, and say so once. */
    if (ifc->in_rx) {
        if (!ifc->warned_nested++) rvx__log("rvx_progress called from an AM handler: ignored");
        return 0;
    }
    ifc->in_rx = 1;
    for (i = first; i < ifc->nrx; i++) {
        rvx__shm_ep_t *ep = ifc->rx[i];
        if (rvx__shm_ready(ep, RVX__CHAN_REPLY)) done += rvx__shm_consume(ep, RVX__CHAN_REPLY);
        if (rvx__shm_ready(ep, RVX__CHAN_REQUEST)) done += rvx__shm_consume(ep, RVX__CHAN_REQUEST);
    }
    ifc->in_rx = 0;
    return done;
}
#endif

/* Progress: nothing without live endpoints; shm has no TX completions to poll (outstanding is
 * always 0); RX rings only in builds that can receive: two loads and a compare per ring. */
RVX_INLINE int rvx__shm_progress(rvx__shm_iface_t *ifc)
{
#if RVX_CAN_RECEIVE
    unsigned i, n = ifc->nrx;
    for (i = 0; i < n; i++) {
        const rvx__shm_ep_t *ep = ifc->rx[i];
        if (RVX_UNLIKELY(rvx__shm_ready(ep, RVX__CHAN_REPLY) || rvx__shm_ready(ep, RVX__CHAN_REQUEST)))
            return rvx__shm_progress_from(ifc, i);
    }
    return 0;
#else
    (void)ifc;
    return 0;
#endif
}

/* Every shm operation is complete (visible to the peer) when it returns; a flush only orders
 * earlier stores before later ones and reports a peer already known to have failed. */
RVX_INLINE rvx_status_t rvx__shm_ep_flush(rvx__shm_ep_t *ep, rvx_request_t *req)
{
    (void)req;
    rvx_release_fence();
    return RVX_UNLIKELY(ep->failed) ? RVX_ERR_PEER_FAILED : RVX_OK;
}

/* Always: a put is complete once its stores are ordered before what follows. */
RVX_INLINE int rvx__shm_iface_flushed(const rvx__shm_iface_t *ifc)
{
    (void)ifc;
    rvx_release_fence();
    return 1;
}

RVX_INLINE rvx_status_t rvx__shm_iface_flush(rvx__shm_iface_t *ifc, rvx_request_t *req)
{
    (void)ifc;
    (void)req;
    rvx_release_fence();
    return RVX_OK;
}

#endif /* RVX_TL_SHM_IFACE_H */
