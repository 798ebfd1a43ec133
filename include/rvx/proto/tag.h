/* rvx/proto/tag.h: tag matching, as MPI and UCP's tag API do it, over the tl contract.
 *
 * Build with RVX_TAG=1 (and RVX_RNDV to pick the rendezvous protocol). The calls:
 *
 *   rvx_tag_send(ep, buf, len, tag, req)
 *       RVX_OK: sent, buf may be reused (eager); RVX_INPROGRESS: req completes later (a large
 *       message, or the ring to the peer is full); an error: nothing was sent (2^40 bytes or
 *       more: RVX_ERR_EXCEEDS_LIMIT).
 *   rvx_tag_recv(worker, buf, len, tag, tag_mask, req, info)      (req is required)
 *       Receives the first message, from any endpoint of the worker, whose tag equals `tag` in
 *       the bits set in `tag_mask` (mask 0: any tag). RVX_OK or RVX_ERR_MSG_TRUNCATED when a
 *       message that had already arrived was taken at once; RVX_INPROGRESS: req completes later
 *       with one of those. `info` (may be NULL) is filled before completion: sender rank, tag,
 *       and the length as sent; a longer message than the buffer fills the buffer, never a byte
 *       more, and completes with RVX_ERR_MSG_TRUNCATED.
 *   rvx_tag_recv_from(worker, src, buf, len, tag, tag_mask, req, info)
 *       The same for messages from rank `src` only (RVX_ANY_SOURCE: any sender).
 *   rvx_tag_probe(worker, tag, tag_mask, info)
 *       RVX_OK (info filled) if a matching message has arrived and waits for a receive,
 *       RVX_INPROGRESS if none has yet. Does not progress.
 *   rvx_tag_cancel(worker, req)         withdraw a posted receive that nothing has matched yet
 *   rvx_tag_mem_invalidate(worker, addr, len)   forget registrations of memory being freed
 *
 * Requests are the caller's (rvx_request_t): pending means req->status == RVX_INPROGRESS; an
 * immediate RVX_OK / error leaves req untouched. Wait with rvx_wait or rvx_complete (core.h).
 *
 * Ordering (MPI's rule): messages from one sender are matched in the order they were sent,
 * whatever their size. Every frame that carries match information (eager, first fragment,
 * rendezvous request) travels on the request channel of the sender's endpoint, which is
 * ordered, and sends to one peer leave through one queue; the receiver matches each such frame
 * when it arrives, against the posted receives in posting order, else it joins the unexpected
 * queue in arrival order, which a new receive searches first. Rendezvous data moves after the
 * match, so a large message can complete after a smaller one sent later; it never matches later.
 *
 * Protocols, by size (thresholds are compile-time constants):
 *   len <= RVX_TAG_SHORT_MAX            eager short: tag and data in one frame, copied inline
 *   len <  RVX_EAGER_ZCOPY_MIN          eager bcopy: one frame, memcpy
 *   len <= RVX_AM_MAX_MEDIUM - 8        eager zero-copy: one frame, the tag as header and the data
 *                                       from the user's buffer (rvx__tl_am_zcopy; registered through
 *                                       the cache; RVX_INPROGRESS until the transport lets go).
 *                                       On shm the tl copies (no zero-copy between processes); on
 *                                       no room, credit or registration, the bcopy path instead
 *   len <  RVX_RNDV_THRESH_BYTES        eager, fragmented: a first frame with the tag and total
 *                                       length, then frames of data (rvx_tag_send returns
 *                                       RVX_OK once all are in the ring)
 *   len >= RVX_RNDV_THRESH_BYTES        rendezvous, RVX_RNDV (see proto/rndv/): GET, PUT, AM or
 *                                       PIPELINE
 * Fragmented eager messages (longer than one frame) are still copied: a zero-copy frame must fit
 * the receiver's frame-sized buffers.
 *
 * The matched-expected fast path: a receive posted while no message waits and no receive is
 * posted becomes the lone receive (six stores, no list); an 8..16-byte eager frame of its exact
 * tag completes it inside the tl's poll loop with no call (rvx__tag_rx_eager_fast). Everything
 * else (wildcards, source-specific receives, other sizes, several receives posted) goes through
 * the general queues, where the lone receive is spilled first as the oldest entry.
 *
 * Progress: the receive side runs inside rvx_progress (frames are matched as they are polled);
 * rendezvous steps (registration, RMA, control frames) run in rvx_progress's tag hook, only
 * while w->proto_pending counts operations in flight. A peer that dies mid-protocol fails the
 * operations that depend on it with RVX_ERR_PEER_FAILED (checked every ~10 ms while they wait).
 * Posted receives that nothing has matched yet (checked as often, from rvx_progress when it finds
 * nothing to do): one naming a source completes with RVX_ERR_PEER_FAILED once that rank has
 * failed; an any-source receive keeps waiting while any other rank with an endpoint on this
 * worker lives, and completes with RVX_ERR_PEER_FAILED when the worker has an endpoint to every
 * other rank and all of them have failed (our own rank is not counted: ULFM's pending-failure
 * idea, reported only when no sender is left). What a dead rank sent before it went is drained
 * and matched first, and messages we sent ourselves are flushed in before that verdict.
 * Frames of unknown type, wrong length or naming no operation of ours are counted in
 * rvx_worker_stats (tag_bad_frame), reported once, and dropped.
 *
 * The files, in the order rvx.h includes them (each uses only those before it):
 *   proto/tag_match.h    wire format, operations, matching queues, the peers' send queues
 *   proto/rndv/<p>.h     the rendezvous protocol of the build (over proto/rndv/common.h)
 *   proto/tag.h          this file: sends, receives, arrivals, the fast paths
 *   proto/tag_peer.h     set-up, peer liveness, endpoint teardown, the progress hook */
#ifndef RVX_PROTO_TAG_H
#define RVX_PROTO_TAG_H

#include <stdlib.h>
#include <string.h>

/* Eager frames of a queued send; 1 when all are in the ring. */
RVX_COLD int rvx__tag_emit_eager(rvx__tag_op_t *op)
{
    rvx__tl_ep_t *tl = &op->ep->tl[0];
    uint8_t *b;
    if (!(op->flags & RVX__F_STARTED)) {
        if (op->len <= RVX__TAG_EAGER1) {
            if (!(b = (uint8_t *)rvx__tl_am_claim(tl, RVX__CHAN_REQUEST, 8 + op->len))) return 0;
            rvx__tag_st64(b, op->tag);
            if (op->len) memcpy(b + 8, op->buf, op->len);
            rvx__tl_am_publish(tl, RVX__CHAN_REQUEST, b, 8 + op->len, RVX__TAG_CLASS | RVX__TF_EAGER);
            op->done = op->len;
            op->flags |= RVX__F_STARTED;
            return 1;
        }
        if (!(b = (uint8_t *)rvx__tl_am_claim(tl, RVX__CHAN_REQUEST, RVX__TAG_FRAME))) return 0;
        rvx__tag_st64(b, op->tag);
        rvx__tag_st64(b + 8, op->len);
        memcpy(b + 16, op->buf, RVX__TAG_FRAME - 16);
        rvx__tl_am_publish(tl, RVX__CHAN_REQUEST, b, RVX__TAG_FRAME, RVX__TAG_CLASS | RVX__TF_FIRST);
        op->done = RVX__TAG_FRAME - 16;
        op->flags |= RVX__F_STARTED;
    }
    while (op->done < op->len) {
        size_t n = op->len - op->done < RVX__TAG_FRAME ? op->len - op->done : RVX__TAG_FRAME;
        if (!(b = (uint8_t *)rvx__tl_am_claim(tl, RVX__CHAN_REQUEST, n))) return 0;
        memcpy(b, op->buf + op->done, n);
        rvx__tl_am_publish(tl, RVX__CHAN_REQUEST, b, n, RVX__TAG_CLASS | RVX__TF_MID);
        op->done += n;
    }
    return 1;
}

/* ---- eager zero-copy -------------------------------------------------------------------------- */

#define RVX__TAG_ZCOPY_MIN ((size_t)(RVX_EAGER_ZCOPY_MIN))

/* A one-frame eager message from RVX_EAGER_ZCOPY_MIN bytes on: the tag as the frame's header and
 * the data straight from buf (rvx__tl_am_zcopy), buf registered through the cache where the
 * endpoint's transport really reads it in place (RVX__TL_AM_ZCOPY_ON: not a pair's shared
 * memory). RVX_INPROGRESS: req completes when the transport lets go of buf (an op in SS_ZCOPY
 * holds the registration until then); RVX_ERR_NO_RESOURCE: not sent (no room, credit,
 * registration or op), the caller copies instead. */
RVX_COLD rvx_status_t rvx__tag_send_zcopy(struct rvx__tag_state *t, rvx_ep_t *ep, const void *buf,
                                          size_t len, uint64_t tag, rvx_request_t *req)
{
    uint8_t hdr[8];
    rvx__tag_st64(hdr, tag);
    if (RVX__TL_AM_ZCOPY_ON(&ep->tl[0])) {
        rvx__tag_op_t *op;
        rvx_mem_t *mem;
        rvx_status_t st;
        if (rvx__tag_reg(t, (void *)(uintptr_t)buf, len, &mem) != RVX_OK) return RVX_ERR_NO_RESOURCE;
        if (!(op = rvx__tag_send_op(t, ep, buf, len, tag, RVX__SS_ZCOPY))) {
            rvx__tag_dereg(t, mem);
            return RVX_ERR_NO_RESOURCE;
        }
        op->mem = mem;
        rvx_request_init(&op->tlreq[0]);
        st = rvx__tl_am_zcopy(&ep->tl[0], RVX__CHAN_REQUEST, hdr, 8, buf, len, &mem->tl[0],
                              RVX__TAG_CLASS | RVX__TF_EAGER, &op->tlreq[0]);
        if (st == RVX_OK || st == RVX_INPROGRESS) t->n_zcopy++;
        if (st == RVX_INPROGRESS) {
            op->req = req;
            op->flags |= RVX__F_ISSUED;
            req->status = RVX_INPROGRESS;
            rvx__tag_ready(t, op); /* polled until the transport lets go */
            return RVX_INPROGRESS;
        }
        rvx__tag_done(t, op, RVX_OK); /* no request: nothing to tell */
        return st;
    } else { /* the transport copies: nothing to register */
        rvx_status_t st = rvx__tl_am_zcopy(&ep->tl[0], RVX__CHAN_REQUEST, hdr, 8, buf, len, NULL,
                                           RVX__TAG_CLASS | RVX__TF_EAGER, NULL);
        if (st == RVX_OK) t->n_zcopy++;
        return st;
    }
}

/* A zero-copy eager send, polled from the ready list: done when the transport is. */
RVX_COLD int rvx__tag_zcopy_step(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (op->tlreq[0].status == RVX_INPROGRESS) {
        rvx__tag_ready(t, op);
        return 0;
    }
    op->flags &= ~RVX__F_ISSUED;
    rvx__tag_done(t, op, (rvx_status_t)op->tlreq[0].status);
    return 1;
}

/* Send what the peer's queue holds, in order, until the ring is full. */
RVX_COLD int rvx__tag_sq_run(struct rvx__tag_state *t, rvx__tag_peer_t *p)
{
    rvx__tag_op_t *op;
    int n = 0;
    while ((op = p->sq_head) != NULL) {
        int sent = op->state == RVX__SS_EAGER ? rvx__tag_emit_eager(op) : rvx__rndv_emit(t, op);
        if (!sent) break;
        p->sq_head = op->next;
        if (!p->sq_head) {
            p->sq_tail = NULL;
            t->w->proto_queued--;
        }
        op->next = NULL;
        op->flags &= ~RVX__F_SQ;
        n++;
        if (op->state == RVX__SS_EAGER) rvx__tag_done(t, op, RVX_OK);
        else rvx__rndv_sent(t, op);
    }
    return n;
}

/* A send joins its peer's queue behind what is already there and goes out as far as the ring
 * takes it: RVX_OK if all of it left at once (like a one-frame send), else RVX_INPROGRESS. */
RVX_COLD rvx_status_t rvx__tag_send_queued(struct rvx__tag_state *t, rvx__tag_op_t *op, rvx_request_t *req)
{
    op->req = req;
    req->status = RVX_INPROGRESS;
    rvx__tag_sq_push(t, op);
    rvx__tag_sq_run(t, &t->peers[op->ep->rank]);
    return (rvx_status_t)req->status;
}

/* Run the step of every op on the ready list: eager zero-copy sends waiting for the transport,
 * rendezvous steps. */
RVX_COLD int rvx__tag_run_ready(struct rvx__tag_state *t)
{
    rvx__tag_link_t todo;
    int n = 0;
    /* take the list as it is: ops that put themselves back run on the next call */
    todo.next = t->ready.next;
    todo.prev = t->ready.prev;
    todo.next->prev = &todo;
    todo.prev->next = &todo;
    rvx__tag_link_init(&t->ready);
    while (todo.next != &todo) {
        rvx__tag_op_t *op = RVX_CONTAINER_OF(todo.next, rvx__tag_op_t, rlink);
        rvx__tag_link_del(&op->rlink);
        op->flags &= ~RVX__F_READY;
        n += op->state == RVX__SS_ZCOPY ? rvx__tag_zcopy_step(t, op) : rvx__rndv_step(t, op);
    }
    return n;
}

/* ---- send ------------------------------------------------------------------------------------ */

RVX_COLD rvx_status_t rvx__tag_send_slow(rvx_ep_t *ep, const void *buf, size_t len, uint64_t tag,
                                         rvx_request_t *req)
{
    struct rvx__tag_state *t;
    rvx__tag_peer_t *p;
    rvx__tag_op_t *op;
    rvx_status_t st;
    if (!ep || (len && !buf)) return RVX_ERR_INVALID_PARAM;
    /* a receiver drops a longer announcement as malformed: refuse it here, not hang both sides */
    if ((uint64_t)len >= RVX__TAG_MLEN_MAX) return RVX_ERR_EXCEEDS_LIMIT;
    t = rvx__tag_of(ep->worker);
    p = &t->peers[ep->rank];
    if (len < RVX__TAG_THRESH) {
        if (!p->sq_head) {
            uint8_t *b;
            if (len >= RVX__TAG_ZCOPY_MIN && len <= RVX__TAG_EAGER1 && req) {
                st = rvx__tag_send_zcopy(t, ep, buf, len, tag, req);
                if (st != RVX_ERR_NO_RESOURCE) return st; /* else: copied, or queued, below */
            }
            if (len <= RVX__TAG_EAGER1 &&
                (b = (uint8_t *)rvx__tl_am_claim(&ep->tl[0], RVX__CHAN_REQUEST, 8 + len)) != NULL) {
                rvx__tag_st64(b, tag);
                rvx__tag_copy(b + 8, (const uint8_t *)buf, len);
                rvx__tl_am_publish(&ep->tl[0], RVX__CHAN_REQUEST, b, 8 + len, RVX__TAG_CLASS | RVX__TF_EAGER);
                return RVX_OK;
            }
            if (len <= RVX__TAG_EAGER1 && rvx__tl_ep_alive(&ep->tl[0]) != RVX_OK) return RVX_ERR_PEER_FAILED;
        }
        if (!req) return RVX_ERR_INVALID_PARAM;
        if (!(op = rvx__tag_send_op(t, ep, buf, len, tag, RVX__SS_EAGER))) return RVX_ERR_NO_MEMORY;
        return rvx__tag_send_queued(t, op, req);
    }
    if (!req) return RVX_ERR_INVALID_PARAM;
    if (!(op = rvx__rndv_send_op(t, ep, buf, len, tag, &st))) return st;
    t->n_rndv++;
    return rvx__tag_send_queued(t, op, req);
}

/* Argument checks of RVX_DEBUG builds (the slow paths check what they use in every build). */
#if RVX_DEBUG
#define RVX__CHECK_TAG(cond) if (cond) return RVX_ERR_INVALID_PARAM
#else
#define RVX__CHECK_TAG(cond) (void)0
#endif

/* A short send over the endpoint's handle (tl/tx.h): a claim that fails rather than call out
 * (rvx__tag_send_slow claims again, with the tl's cold work), a few stores and a publish. */
RVX_INLINE rvx_status_t rvx__tag_send_short(rvx__tl_tx_t tx, rvx_ep_t *ep, const void *buf,
                                            size_t len, uint64_t tag, rvx_request_t *req)
{
    uint8_t *b = (uint8_t *)rvx__tl_am_claim_tx(tx, RVX__CHAN_REQUEST, 8 + len);
    if (RVX_UNLIKELY(b == NULL)) return rvx__tag_send_slow(ep, buf, len, tag, req);
    rvx__tag_st64(b, tag);
    rvx__tag_copy_small(b + 8, (const uint8_t *)buf, len);
    return rvx__tl_am_publish_tx(tx, RVX__CHAN_REQUEST, b, 8 + len, RVX__TAG_CLASS | RVX__TF_EAGER);
}

/* Send a tagged message to ep's peer. */
RVX_INLINE rvx_status_t rvx_tag_send(rvx_ep_t *ep, const void *buf, size_t len, uint64_t tag,
                                     rvx_request_t *req)
{
    RVX__CHECK_TAG(!ep || (len && !buf));
#if RVX_AM /* a send is a request, which handlers may not make; only AM builds run handlers */
    if (RVX_UNLIKELY(RVX__AM_IN_HANDLER(rvx__tl_tx(&ep->tl[0])))) return rvx__am_in_handler();
#endif
    if (len <= RVX_TAG_SHORT_MAX && len < RVX__TAG_THRESH && RVX_LIKELY(!ep->worker->proto_queued))
        return RVX__TL_SEND(&ep->tl[0], rvx__tag_send_short, ep, buf, len, tag, req);
    return rvx__tag_send_slow(ep, buf, len, tag, req);
}

/* ---- receive --------------------------------------------------------------------------------- */

/* A posted receive takes an unexpected message (unlinked by the caller). */
RVX_COLD rvx_status_t rvx__tag_take(struct rvx__tag_state *t, rvx__tag_op_t *u, void *buf, size_t len,
                                    rvx_request_t *req, rvx_tag_info_t *info)
{
    rvx_status_t st;
    size_t n;
    if (info) {
        info->tag = u->tag;
        info->length = u->mlen;
        info->sender = u->ep->rank;
    }
    n = u->mlen < len ? u->mlen : len;
    if (u->state == RVX__US_DONE) {
        st = u->status ? (rvx_status_t)u->status : u->mlen > len ? RVX_ERR_MSG_TRUNCATED : RVX_OK;
        if (!u->status && n) memcpy(buf, u->stage, n);
        u->req = NULL;
        rvx__tag_done(t, u, RVX_OK);
        return st;
    }
    u->buf = (uint8_t *)buf;
    u->len = len;
    u->req = req;
    u->info = info;
    u->eff = n;
    req->status = RVX_INPROGRESS;
    if (u->state == RVX__US_EAGER) {
        /* fragments still arriving: what is here moves to the buffer, the rest goes there */
        size_t have = u->done < n ? u->done : n;
        if (have && u->stage) memcpy(buf, u->stage, have);
        if (u->stage && u->stage != u->small) free(u->stage);
        u->stage = NULL;
        u->kind = RVX__KIND_RECV;
        u->state = RVX__RS_EAGER;
        return RVX_INPROGRESS;
    }
    u->kind = RVX__KIND_RECV;
    rvx__rndv_recv_start(t, u, u->stage, u->done);
    return (rvx_status_t)req->status;
}

/* What a posted receive matches (its record) and where its data goes (its request). */
RVX_INLINE void rvx__tag_recv_fill(rvx__tag_rop_t *op, rvx_request_t *req, void *buf, size_t len,
                                   uint64_t tag, uint64_t mask, rvx_tag_info_t *info)
{
    op->tag = tag;
    op->mask = mask;
    req->tl_private[0] = (uint64_t)(uintptr_t)buf;
    req->tl_private[1] = (uint64_t)len;
    req->tl_private[2] = (uint64_t)(uintptr_t)info;
}

RVX_COLD rvx_status_t rvx__tag_recv_slow(rvx_worker_t *w, int src, void *buf, size_t len, uint64_t tag,
                                         uint64_t mask, rvx_request_t *req, rvx_tag_info_t *info)
{
    struct rvx__tag_state *t = rvx__tag_of(w);
    rvx__tag_op_t **pp;
    rvx__tag_rop_t *op;
    if ((len && !buf) || !req || src < RVX_ANY_SOURCE || src >= t->npeers) return RVX_ERR_INVALID_PARAM;
    rvx__tag_spill(t); /* an older receive: it matches first */
    for (pp = &t->unx_head; *pp; pp = &(*pp)->next) {
        rvx__tag_op_t *u = *pp;
        if (((u->tag ^ tag) & mask) == 0 && (src < 0 || u->ep->rank == src)) {
            *pp = u->next;
            if (t->unx_tail == &u->next) t->unx_tail = pp;
            u->next = NULL;
            return rvx__tag_take(t, u, buf, len, req, info);
        }
    }
    if (!t->rfree && !rvx__tag_rgrow(t)) return RVX_ERR_NO_MEMORY;
    op = t->rfree;
    t->rfree = op->next;
    rvx__tag_recv_fill(op, req, buf, len, tag, mask, info);
    op->req = req;
    op->src = src;
    op->next = NULL;
    *t->exp_tail = op;
    t->exp_tail = &op->next;
    req->status = RVX_INPROGRESS;
    return RVX_INPROGRESS;
}

/* Post a receive for any sender; matched at once against what has already arrived. With both
 * queues empty (nothing waits to be received, no receive is posted) it becomes the lone receive:
 * six stores into lone_op, no list. */
RVX_INLINE rvx_status_t rvx_tag_recv(rvx_worker_t *w, void *buf, size_t len, uint64_t tag,
                                     uint64_t tag_mask, rvx_request_t *req, rvx_tag_info_t *info)
{
    struct rvx__tag_state *t;
    RVX__CHECK_TAG(!w || !req || (len && !buf));
    t = rvx__tag_of(w);
    /* one test for the three: no unexpected message, no posted receive, no lone receive */
    if (RVX_LIKELY(((uintptr_t)t->unx_head | (uintptr_t)t->exp_head | (uintptr_t)t->lone) == 0)) {
        rvx__tag_rop_t *op = &t->lone_op;
        rvx__tag_recv_fill(op, req, buf, len, tag, tag_mask, info);
        t->lone = req;
        req->status = RVX_INPROGRESS;
        return RVX_INPROGRESS;
    }
    return rvx__tag_recv_slow(w, RVX_ANY_SOURCE, buf, len, tag, tag_mask, req, info);
}

/* A receive that takes messages from rank `src` only (RVX_ANY_SOURCE: rvx_tag_recv). If that
 * rank fails before a matching message has arrived, req completes with RVX_ERR_PEER_FAILED. */
static inline rvx_status_t rvx_tag_recv_from(rvx_worker_t *w, int src, void *buf, size_t len, uint64_t tag,
                                             uint64_t tag_mask, rvx_request_t *req, rvx_tag_info_t *info)
{
    RVX__CHECK_TAG(!w);
    return rvx__tag_recv_slow(w, src, buf, len, tag, tag_mask, req, info);
}

static inline rvx_status_t rvx_tag_probe(rvx_worker_t *w, uint64_t tag, uint64_t tag_mask,
                                         rvx_tag_info_t *info)
{
    rvx__tag_op_t *u;
    RVX__CHECK_TAG(!w);
    for (u = rvx__tag_of(w)->unx_head; u; u = u->next) {
        if (((u->tag ^ tag) & tag_mask) == 0) {
            if (info) {
                info->tag = u->tag;
                info->length = u->mlen;
                info->sender = u->ep->rank;
            }
            return RVX_OK;
        }
    }
    return RVX_INPROGRESS;
}

/* Withdraw a posted receive nothing has matched: RVX_OK (req completes with RVX_ERR_CANCELED),
 * or RVX_ERR_INVALID_PARAM if it is not waiting to be matched (done, or its data is arriving). */
static inline rvx_status_t rvx_tag_cancel(rvx_worker_t *w, rvx_request_t *req)
{
    struct rvx__tag_state *t;
    rvx__tag_rop_t **pp;
    if (!w || !req) return RVX_ERR_INVALID_PARAM; /* a NULL req would match an empty lone slot */
    t = rvx__tag_of(w);
    if (t->lone == req) {
        t->lone = NULL;
        req->status = RVX_ERR_CANCELED;
        return RVX_OK;
    }
    for (pp = &t->exp_head; *pp; pp = &(*pp)->next) {
        if ((*pp)->req == req) {
            rvx__tag_rop_free(t, rvx__tag_exp_unlink(t, pp));
            req->status = RVX_ERR_CANCELED;
            return RVX_OK;
        }
    }
    return RVX_ERR_INVALID_PARAM;
}

/* Memory about to be freed or unmapped: drop its registrations from the cache (leave-pinned
 * buffers), so that a later buffer at the same address is registered afresh. */
static inline void rvx_tag_mem_invalidate(rvx_worker_t *w, void *addr, size_t len)
{
    struct rvx__tag_state *t = rvx__tag_of(w);
    uintptr_t a = (uintptr_t)addr;
    unsigned i;
    for (i = 0; i < RVX__PIPE_MEMO; i++)
        if (t->memo[i].len && t->memo[i].addr < a + len && a < t->memo[i].addr + t->memo[i].len)
            t->memo[i].len = 0;
#if RVX__TAG_RCACHE
    rvx__rcache_invalidate(&t->rcache, addr, len);
#endif
}

/* ---- arrival --------------------------------------------------------------------------------- */

RVX_COLD void rvx__tag_rx_eager(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *body, size_t len)
{
    uint64_t tag = rvx__load_u64(body);
    size_t plen = len - 8;
    rvx__tag_rop_t *r = rvx__tag_match(t, tag, ep->rank);
    rvx__tag_op_t *op;
    if (r) { /* one frame: done in the receive record, no op */
        rvx_request_t *req = r->req;
        size_t blen = RVX__TAG_RQ_LEN(req);
        rvx_status_t st = plen > blen ? RVX_ERR_MSG_TRUNCATED : RVX_OK;
        rvx__tag_copy(RVX__TAG_RQ_BUF(req), body + 8, plen < blen ? plen : blen);
        rvx__tag_fill(RVX__TAG_RQ_INFO(req), tag, plen, ep->rank);
        rvx__tag_rop_free(t, r);
        req->status = st;
        return;
    }
    if ((op = rvx__tag_unexp(t, ep, tag, plen, RVX__US_DONE)) == NULL) return;
    rvx__tag_stage(op, plen);
    if (op->stage && plen) memcpy(op->stage, body + 8, plen);
    op->done = plen;
}

RVX_COLD void rvx__tag_rx_first(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *body, size_t len)
{
    rvx__tag_peer_t *p = &t->peers[ep->rank];
    uint64_t tag = rvx__load_u64(body), mlen = rvx__load_u64(body + 8);
    size_t n = len - 16;
    rvx__tag_rop_t *r;
    rvx__tag_op_t *op;
    /* a sender fragments only what is below the rendezvous switch: a larger total would have us
     * stage (allocate) whatever the peer names */
    if (p->cur || mlen <= n || mlen >= RVX__TAG_THRESH) {
        rvx__tag_bad(ep, "dropped a first eager fragment (length %d) from rank %d", (int)(mlen & 0x7fffffff));
        return;
    }
    if ((r = rvx__tag_match(t, tag, ep->rank)) != NULL) {
        if ((op = rvx__tag_claim(t, r)) == NULL) return;
        op->state = RVX__RS_EAGER;
        op->ep = ep;
        op->mlen = (size_t)mlen;
        op->eff = op->mlen < op->len ? op->mlen : op->len;
        if (op->eff) memcpy(op->buf, body + 16, n < op->eff ? n : op->eff);
        rvx__tag_fill(op->info, tag, op->mlen, ep->rank);
    } else {
        if ((op = rvx__tag_unexp(t, ep, tag, (size_t)mlen, RVX__US_EAGER)) == NULL) return;
        rvx__tag_stage(op, (size_t)mlen);
        if (op->stage) memcpy(op->stage, body + 16, n);
    }
    op->done = n;
    p->cur = op;
    rvx__tag_active(t, op); /* waits on the peer for the rest */
}

RVX_COLD void rvx__tag_rx_mid(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *body, size_t len)
{
    rvx__tag_peer_t *p = &t->peers[ep->rank];
    rvx__tag_op_t *op = p->cur;
    if (!op || len > op->mlen - op->done || !len) {
        rvx__tag_bad(ep, "dropped an eager fragment of %d bytes from rank %d", (int)len);
        return;
    }
    if (op->kind == RVX__KIND_RECV) {
        if (op->done < op->eff)
            memcpy(op->buf + op->done, body, len < op->eff - op->done ? len : op->eff - op->done);
    } else if (op->stage) {
        memcpy(op->stage + op->done, body, len);
    }
    op->done += len;
    if (op->done < op->mlen) return;
    p->cur = NULL;
    if (op->kind == RVX__KIND_RECV) {
        rvx__tag_done(t, op, rvx__tag_rstatus(op, (rvx_status_t)op->status)); /* staging may have failed */
    } else {
        op->state = RVX__US_DONE;
        if (op->flags & RVX__F_ACTIVE) {
            op->flags &= ~RVX__F_ACTIVE;
            rvx__tag_link_del(&op->alink);
            t->w->proto_pending--;
        }
    }
}

RVX_COLD void rvx__tag_rx_slow(rvx_ep_t *ep, unsigned chan, unsigned info, void *vbody, size_t len)
{
    struct rvx__tag_state *t = rvx__tag_of(ep->worker);
    const uint8_t *body = (const uint8_t *)vbody;
    unsigned type = info & 0x3fff;
    switch (type) {
    case RVX__TF_EAGER: /* match information travels on the ordered request channel only */
        if (len >= 8 && chan == RVX__CHAN_REQUEST) { rvx__tag_rx_eager(t, ep, body, len); return; }
        break;
    case RVX__TF_FIRST:
        if (len > 16 && chan == RVX__CHAN_REQUEST) { rvx__tag_rx_first(t, ep, body, len); return; }
        break;
    case RVX__TF_MID:
        if (chan == RVX__CHAN_REQUEST) { rvx__tag_rx_mid(t, ep, body, len); return; }
        break;
    case RVX__TF_ATS: case RVX__TF_RTR: case RVX__TF_FIN: case RVX__TF_KEY:
        /* control frames answer a request: the reply channel only */
        if (chan == RVX__CHAN_REPLY && rvx__rndv_rx(t, ep, chan, type, body, len)) return;
        break;
    default:
        if (rvx__rndv_rx(t, ep, chan, type, body, len)) return;
        break;
    }
    rvx__tag_bad(ep, "dropped a malformed tag frame (type %d) from rank %d", (int)type);
}

/* A tag frame from the tl (through proto/rx.h): everything but the fast path below, out of line. */
RVX_INLINE void rvx__tag_rx(rvx_ep_t *ep, unsigned chan, unsigned info, void *body, size_t len)
{
    rvx__tag_rx_slow(ep, chan, info, body, len);
}

/* The matched-expected fast path, in line in the tl's poll loop with no call: an eager frame with
 * 8 to 16 bytes of data for the lone receive (the only one posted), exact tag, which it fits. The
 * data moves as two overlapping 8-byte words (no length branches); completion is the info
 * stores, the lone slot freed and the request's status. Anything else (other sizes, a wildcard
 * or queued receive, a short buffer) takes rvx__tag_rx_slow, a tail call. */
RVX_INLINE void rvx__tag_rx_eager_fast(rvx_ep_t *ep, unsigned chan, void *body, size_t len)
{
    struct rvx__tag_state *t = rvx__tag_of(ep->worker);
    const uint8_t *b = (const uint8_t *)body;
    size_t plen = len - 8; /* a frame shorter than a tag wraps around and goes the slow way */
    rvx_request_t *req = t->lone;
    if (RVX_LIKELY(plen - 8 <= 8 && (uintptr_t)req > 1)) {
        rvx__tag_rop_t *op = &t->lone_op;
        uint64_t tag = rvx__load_u64(b);
        if (RVX_LIKELY(op->tag == tag && plen <= RVX__TAG_RQ_LEN(req))) {
            rvx_tag_info_t *ti = RVX__TAG_RQ_INFO(req);
            uint8_t *d = RVX__TAG_RQ_BUF(req);
            rvx__tag_st64(d, rvx__load_u64(b + 8));
            rvx__tag_st64(d + plen - 8, rvx__load_u64(b + len - 8));
            t->lone = NULL;
            if (ti) {
                RVX__TAG_SCALAR(tag, plen); /* two plain stores; SSE would pack them first */
                ti->tag = tag;
                ti->length = plen;
                ti->sender = ep->rank;
            }
            req->status = RVX_OK;
            return;
        }
    }
    rvx__tag_rx_slow(ep, chan, RVX__TAG_CLASS | RVX__TF_EAGER, body, len);
}


#endif /* RVX_PROTO_TAG_H */
