/* rvx/proto/tag_peer.h: tag matching's side of peers that fail and endpoints that go, and its
 * worker set-up and progress hook (composed into core's calls by proto/hooks.h).
 *
 * Liveness is asked every ~10 ms at most, while operations wait on peers (rvx__tag_check_peers)
 * or receives are posted and progress finds nothing to do (rvx__tag_idle), and only of the peers
 * an operation waits on (an any-source receive: of peers until one is alive); the rules for which
 * waiting operation fails when are in proto/tag.h's comment. Progress runs the send queues of the
 * peers in a list (those that had frames queued), never every peer. */
#ifndef RVX_PROTO_TAG_PEER_H
#define RVX_PROTO_TAG_PEER_H

/* ---- peer liveness and the progress hook ---------------------------------------------------- */

/* Receives are posted (rvx_progress asks when it found nothing to do). */
RVX_INLINE int rvx__tag_posted(const rvx_worker_t *w)
{
    const struct rvx__tag_state *t = rvx__tag_of(w);
    return ((uintptr_t)t->lone | (uintptr_t)t->exp_head) != 0;
}

/* Whether peer r still lives (an endpoint to it that has not failed), asked of the transport
 * once per round. */
RVX_COLD int rvx__tag_ask(struct rvx__tag_state *t, int r)
{
    rvx__tag_peer_t *p = &t->peers[r];
    rvx_worker_t *w = t->w;
    if (p->verdict >> 1 != (t->vround & 0x7fffffffu)) {
        int dead = w->eps[r] && rvx__tl_ep_alive(&w->eps[r]->tl[0]) != RVX_OK;
        p->verdict = (t->vround & 0x7fffffffu) << 1 | (unsigned)dead;
    }
    return (int)(p->verdict & 1);
}

/* The verdict of this round on peer r: dead only if asked this round and found so. */
RVX_COLD int rvx__tag_dead(const struct rvx__tag_state *t, int r)
{
    unsigned v = t->peers[r].verdict;
    return v >> 1 == (t->vround & 0x7fffffffu) && (v & 1);
}

/* A new round: the peers that waiting operations and posted receives name are asked whether they
 * live, no other. Asked before any queue is walked, never during a walk: asking drains the
 * transport's completions, which can complete and unlink the very operation a walk stands on (and
 * a walk resumed from an unlinked op never returns to the list head); so the ranks are collected
 * first, then asked. */
RVX_COLD void rvx__tag_verdicts(struct rvx__tag_state *t)
{
    rvx__tag_link_t *l;
    rvx__tag_op_t *op;
    rvx__tag_rop_t *r;
    int *ranks, n = 0, cap = 0, i;
    t->vround++;
    for (l = t->active.next; l != &t->active; l = l->next) cap++;
    for (r = t->exp_head; r; r = r->next) cap++;
    if (!cap) return;
    ranks = (int *)malloc((size_t)cap * sizeof(*ranks));
    if (!ranks) return;
    for (l = t->active.next; l != &t->active; l = l->next) {
        op = RVX_CONTAINER_OF(l, rvx__tag_op_t, alink);
        if (op->ep && op->state != RVX__S_ZOMBIE) ranks[n++] = op->ep->rank;
    }
    for (r = t->exp_head; r; r = r->next)
        if (r->src >= 0) ranks[n++] = r->src;
    for (i = 0; i < n; i++) rvx__tag_ask(t, ranks[i]); /* once each: the round remembers */
    free(ranks);
}

/* The liveness checks run at most every 10 ms; when one is due, the verdicts are taken fresh. */
RVX_COLD int rvx__tag_check_due(struct rvx__tag_state *t)
{
    double now = rvx__now_s();
    if (now - t->last_check < 0.01) return 0;
    t->last_check = now;
    rvx__tag_verdicts(t);
    return 1;
}

/* Posted receives that nobody alive can match any more: one naming a sender whose endpoint has
 * failed, or an any-source one once the worker has an endpoint to every other rank and all of
 * them have failed (ourselves excepted: MPI's view, a wildcard receive is not satisfiable by its
 * own rank's later sends). What the dead sent before going is drained first, so a message
 * already in a ring completes its receive instead. Uses the verdicts of rvx__tag_verdicts. */
RVX_COLD int rvx__tag_dead_src(struct rvx__tag_state *t, int src, int anydead)
{
    return src < 0 ? anydead : rvx__tag_dead(t, src);
}

/* Whether an any-source receive is posted (the lone one, or one in the expected queue). */
RVX_COLD int rvx__tag_any_posted(const struct rvx__tag_state *t)
{
    const rvx__tag_rop_t *r;
    if (RVX__LONE_POSTED(t)) return 1;
    for (r = t->exp_head; r; r = r->next)
        if (r->src < 0) return 1;
    return 0;
}

RVX_COLD int rvx__tag_check_recvs(struct rvx__tag_state *t)
{
    rvx_worker_t *w = t->w;
    int r, me = w->ctx->boot.rank, anydead = t->npeers > 1 && rvx__tag_any_posted(t), n = 0, pass;
    rvx__tag_rop_t **pp, *op;
    /* only for an any-source receive, and only until one peer is found alive (or without an
     * endpoint): every peer is asked only when all of them have failed */
    for (r = 0; r < t->npeers && anydead; r++)
        if (r != me && !rvx__tag_ask(t, r)) anydead = 0;
    if (anydead && w->eps[me]) {
        /* what we sent ourselves may still be on its way (a NIC loopback): no verdict on
         * any-source receives until a flush of that endpoint says it has all landed */
        if (t->self_flush.status == RVX_INPROGRESS) {
            anydead = 0;
        } else {
            rvx_request_init(&t->self_flush);
            if (rvx__tl_ep_flush(&w->eps[me]->tl[0], &t->self_flush) == RVX_INPROGRESS) anydead = 0;
            else t->self_flush.status = RVX_OK;
        }
    }
    for (pass = 0; pass < 2; pass++) {
        int found = RVX__LONE_POSTED(t) && anydead;
        for (op = t->exp_head; op && !found; op = op->next) found = rvx__tag_dead_src(t, op->src, anydead);
        if (!found) return n;
        if (pass == 0) { /* drain what arrived from the dead first, then look again */
            unsigned k;
            for (k = 0; k < 1000 && rvx__tl_progress(&w->iface[0]); k++) {}
            continue;
        }
        if (RVX__LONE_POSTED(t) && anydead) {
            rvx_request_t *req = t->lone;
            t->lone = NULL;
            req->status = RVX_ERR_PEER_FAILED;
            n++;
        }
        for (pp = &t->exp_head; (op = *pp) != NULL;) {
            rvx_request_t *req = op->req;
            if (!rvx__tag_dead_src(t, op->src, anydead)) { pp = &op->next; continue; }
            rvx__tag_rop_free(t, rvx__tag_exp_unlink(t, pp));
            req->status = RVX_ERR_PEER_FAILED;
            n++;
        }
    }
    return n;
}

/* Every ~10 ms while operations wait: those whose peer is gone fail. What the peer sent before it
 * went is drained first, so a finished transfer is not reported as failed. The walk starts over
 * after anything that may change the list (the drain, a failure). */
RVX_COLD int rvx__tag_check_peers(struct rvx__tag_state *t)
{
    rvx__tag_link_t *l;
    int n = 0, drained = 0;
    if (!rvx__tag_check_due(t)) return 0;
again:
    for (l = t->active.next; l != &t->active; l = l->next) {
        rvx__tag_op_t *op = RVX_CONTAINER_OF(l, rvx__tag_op_t, alink);
        if (!op->ep || op->state == RVX__S_ZOMBIE || !rvx__tag_dead(t, op->ep->rank)) continue;
        if (!drained) {
            unsigned k;
            drained = 1;
            for (k = 0; k < 1000 && rvx__tl_progress(&t->w->iface[0]); k++) {}
            goto again;
        }
        rvx__rndv_fail(t, op, RVX_ERR_PEER_FAILED);
        n++;
        goto again;
    }
    if (t->exp_head || RVX__LONE_POSTED(t)) n += rvx__tag_check_recvs(t);
    return n;
}

/* rvx_progress found nothing to do with receives posted: now and then (every 64th idle call,
 * at most every 10 ms) look for posted receives whose senders are gone. */
RVX_COLD int rvx__tag_idle(rvx_worker_t *w)
{
    struct rvx__tag_state *t = rvx__tag_of(w);
    if ((++t->tick & 63) || !rvx__tag_check_due(t)) return 0;
    return rvx__tag_check_recvs(t);
}

/* rvx_progress while tag operations are in flight: the transport first (arrivals may move them),
 * then the send queues, the ready steps, and now and then the peers' liveness. */
RVX_COLD int rvx__tag_progress(rvx_worker_t *w)
{
    struct rvx__tag_state *t = rvx__tag_of(w);
    int n = rvx__tl_progress(&w->iface[0]);
    unsigned l;
    /* the other lanes carry rendezvous data only: polled while they have some in flight */
    for (l = 1; l < RVX_LANES; l++)
        if (w->iface[l].outstanding) n += rvx__tl_progress(&w->iface[l]);
    if (w->proto_queued) { /* the peers that had frames queued; those emptied leave the list */
        int r, *pr = &t->qhead;
        while ((r = *pr) >= 0) {
            rvx__tag_peer_t *p = &t->peers[r];
            if (p->sq_head) n += rvx__tag_sq_run(t, p);
            if (*pr != r) /* a peer joined at the head meanwhile: find r's link again */
                for (pr = &t->qhead; *pr != r; pr = &t->peers[*pr].qnext) {}
            if (p->sq_head) {
                pr = &p->qnext;
            } else {
                *pr = p->qnext;
                p->qnext = -1;
            }
        }
    }
    if (t->ready.next != &t->ready) n += rvx__tag_run_ready(t);
    if ((++t->tick & 63) == 0) n += rvx__tag_check_peers(t);
    return n;
}


/* ---- set-up and tear-down (cold; composed into the worker and endpoint calls by proto/hooks.h) */

static rvx_status_t rvx__tag_worker_init(rvx_worker_t *w)
{
    struct rvx__tag_state *t = (struct rvx__tag_state *)calloc(1, sizeof(*t));
    unsigned i;
    if (!t) return RVX_ERR_NO_MEMORY;
    t->w = w;
    t->npeers = w->ctx->boot.size;
    t->peers = (rvx__tag_peer_t *)calloc((size_t)t->npeers, sizeof(*t->peers));
    t->qhead = -2;
    for (i = 0; t->peers && i < (unsigned)t->npeers; i++) t->peers[i].qnext = -1;
    if (!t->peers || !rvx__tag_grow(t)) {
        free(t->peers);
        rvx__tag_slabs_free(&t->slabs, RVX__TAG_SLAB * sizeof(rvx__tag_op_t));
        free(t);
        return RVX_ERR_NO_MEMORY;
    }
    t->exp_tail = &t->exp_head;
    t->unx_tail = &t->unx_head;
    t->lone_op.src = RVX_ANY_SOURCE; /* only rvx_tag_recv posts lone receives */
    t->page = (size_t)sysconf(_SC_PAGESIZE);
    rvx__tag_link_init(&t->active);
    rvx__tag_link_init(&t->ready);
    for (i = 0; i < RVX_PIPE_BOUNCE_BUFS; i++) t->bslot[i].status = RVX_OK;
#if RVX__TAG_RCACHE
    {
        rvx_status_t st = rvx__rcache_init(&t->rcache, w->ctx);
        if (st != RVX_OK) {
            rvx__tag_slabs_free(&t->slabs, RVX__TAG_SLAB * sizeof(rvx__tag_op_t));
            free(t->peers);
            free(t);
            return st;
        }
    }
#endif
    w->proto = t;
    w->proto_pending = 0;
    w->proto_queued = 0;
    return RVX_OK;
}

/* Is op, tied to a departing endpoint, still being written by either side? Its own transport
 * operations (a GET, PUT, flush or chunk in flight), or, for PUT and PIPELINE, a receive whose
 * RTR went out: the peer may be writing into its buffer until the FIN. */
RVX_COLD int rvx__tag_closing_busy(const rvx__tag_op_t *op, int peer_alive)
{
    if (!rvx__rndv_quiet(op)) return 1;
    return RVX__RNDV_PEER_WRITES && op->kind == RVX__KIND_RECV && op->state == RVX__RS_WAIT && op->ep &&
           peer_alive;
}

/* The endpoint goes away. Operations on it end with RVX_ERR_CANCELED, unless they finish first:
 * an op whose transfer is still in the transport (or, PUT/PIPELINE, whose peer may still write
 * into its buffer) becomes a zombie that keeps its request, and progress runs until it is quiet;
 * only then does its request get the status and its memory (op, registration, staging) go. So
 * the transport never completes into freed state and no byte lands in a buffer whose request
 * has completed. Bounded: a peer that stops answering fails its operations in the transport;
 * after RVX__TAG_CLOSE_S seconds the rest complete anyway (reported) and their registrations
 * are dropped from the cache, so a late remote write fails at the writer. What the peer sent
 * and nobody received yet is dropped. */
#ifndef RVX__TAG_CLOSE_S
#define RVX__TAG_CLOSE_S 10.0
#endif
static void rvx__tag_ep_destroy(rvx_ep_t *ep)
{
    struct rvx__tag_state *t = rvx__tag_of(ep->worker);
    rvx__tag_link_t *l, *nx;
    rvx__tag_op_t *u, *un;
    double t0;
    if (!t) return;
    t0 = rvx__now_s();
    for (;;) {
        int busy = 0, late = rvx__now_s() - t0 > RVX__TAG_CLOSE_S;
        /* asked before the walk: asking drains the transport, which may complete any op */
        int alive = rvx__tl_ep_alive(&ep->tl[0]) == RVX_OK;
        for (l = t->active.next; l != &t->active; l = nx) {
            rvx__tag_op_t *op = RVX_CONTAINER_OF(l, rvx__tag_op_t, alink);
            nx = l->next;
            if (op->ep != ep || op->kind == RVX__KIND_UNEXP) continue;
            if (op->flags & RVX__F_SQ) rvx__tag_sq_del(t, op); /* not sent: nothing to wait for */
            if (t->peers[ep->rank].cur == op) t->peers[ep->rank].cur = NULL;
            if (!late && rvx__tag_closing_busy(op, alive)) {
                /* a receive waiting for the peer's writes stays as it is: its FIN completes it */
                if (op->state != RVX__S_ZOMBIE && !rvx__rndv_quiet(op)) {
                    op->state = RVX__S_ZOMBIE; /* no more steps: wait for quiet, then done */
                    op->status = RVX_ERR_CANCELED;
                    rvx__tag_ready(t, op);
                }
                busy = 1;
                continue;
            }
            if (late) {
                rvx__log("tag: an operation to rank %d still in flight after %.0f s; released",
                         ep->rank, (double)RVX__TAG_CLOSE_S);
                op->nposted = 0;
                op->flags &= ~RVX__F_ISSUED;
#if RVX__TAG_RCACHE
                if (op->buf && op->eff) {
                    uint8_t *b = op->buf;
                    size_t n = op->eff;
                    rvx__tag_done(t, op, RVX_ERR_CANCELED);
                    rvx__rcache_invalidate(&t->rcache, b, n);
                    continue;
                }
#endif
            }
            rvx__tag_done(t, op, op->state == RVX__S_ZOMBIE && !op->req ? RVX_OK
                                 : op->state == RVX__SS_ZCOPY ? (rvx_status_t)op->tlreq[0].status /* sent */
                                 : RVX_ERR_CANCELED);
        }
        for (u = t->unx_head; u; u = un) {
            un = u->next;
            if (u->ep == ep) {
                rvx__tag_q_del(&t->unx_head, &t->unx_tail, u);
                rvx__tag_done(t, u, RVX_ERR_CANCELED);
            }
        }
        if (!busy) break;
        rvx_progress(ep->worker); /* completes the transfers; zombies that went quiet end there */
    }
}

static void rvx__tag_worker_fini(rvx_worker_t *w)
{
    struct rvx__tag_state *t = rvx__tag_of(w);
    if (!t) return;
    while (t->active.next != &t->active)
        rvx__rndv_fail(t, RVX_CONTAINER_OF(t->active.next, rvx__tag_op_t, alink), RVX_ERR_CANCELED);
    while (t->unx_head) {
        rvx__tag_op_t *u = t->unx_head;
        t->unx_head = u->next;
        rvx__tag_done(t, u, RVX_ERR_CANCELED);
    }
    /* receives nothing matched: their requests end too, none stays RVX_INPROGRESS */
    if (RVX__LONE_POSTED(t)) {
        t->lone->status = RVX_ERR_CANCELED;
        t->lone = NULL;
    }
    while (t->exp_head) {
        rvx_request_t *req = t->exp_head->req;
        rvx__tag_rop_free(t, rvx__tag_exp_unlink(t, &t->exp_head));
        if (req) req->status = RVX_ERR_CANCELED;
    }
    if (t->bounce) rvx_mem_dereg(t->bounce);
#if RVX__TAG_RCACHE
    rvx__rcache_fini(&t->rcache);
#endif
    rvx__tag_slabs_free(&t->slabs, RVX__TAG_SLAB * sizeof(rvx__tag_op_t));
    rvx__tag_slabs_free(&t->rslabs, 0);
    free(t->peers);
    free(t->ids);
    free(t->idfree);
    free(t);
    w->proto = NULL;
}


#endif /* RVX_PROTO_TAG_PEER_H */
