/* rvx/tl/mlx5/tx.h: what a send queue remembers about the WQEs in flight, shared by every mlx5
 * transport (an RC QP, a DCI).
 *
 * Only a WQE that leaves work for its retirement gets an op record (rvx__mlx5_op_t): a request to
 * complete, a bounce copy to run, bounce space to give back. Records come from one pool per
 * worker (rvx__mlx5_txpool_t), grown when empty, so its size is the most ever in flight, not the
 * queues' slots; each queue keeps its own in posting order (a FIFO by pool index), and retiring
 * pops those that start before the retired end. What a signaled WQE spans and whether it was
 * signaled are read back from its ctrl segment (DS count, fm_ce_se), which stays as written until
 * ci passes it. Only one WQE in RVX_MLX5_SIG_EVERY asks for a CQE (and every one that carries a
 * request); the signaled one retires every WQE before it. The hot half (marking a WQE signaled,
 * recording what it retires) is inline; the retire loop, the error walk and the flush NOP are
 * cold. */
#ifndef RVX_TL_MLX5_TX_H
#define RVX_TL_MLX5_TX_H

#include "cq.h"

/* What the CQ handler does when a WQE retires. */
enum {
    RVX__MLX5_ON_NONE = 0,
    RVX__MLX5_ON_REQ,       /* complete req */
    RVX__MLX5_ON_COPY,      /* copy len bytes from src (bounce) to dst, then complete req if set */
    RVX__MLX5_ON_FETCH32,   /* *dst = 4 bytes at src */
    RVX__MLX5_ON_FETCH64
};

/* A transfer in several WQEs (chunks) completes its request once, with the first error of any
 * chunk: the middle ones keep that error in the request's tl_private[2] (zeroed by the call),
 * the last completes it. A call that stops early waits for its chunks before it returns. */
enum {
    RVX__MLX5_PART_NONE = 0, /* the operation's only WQE */
    RVX__MLX5_PART_MID,
    RVX__MLX5_PART_LAST
};

/* Which part chunk [done, done + n) of a len-byte transfer is. */
#define RVX__MLX5_PART(done, n, len) \
    ((done) + (n) < (len) ? RVX__MLX5_PART_MID : (done) ? RVX__MLX5_PART_LAST : RVX__MLX5_PART_NONE)

typedef struct rvx__mlx5_op {
    uint8_t        kind;      /* RVX__MLX5_ON_* */
    uint8_t        part;      /* RVX__MLX5_PART_*: a WQE of a transfer in several */
    uint32_t       len;
    uint64_t       bounce;    /* bounce ring position to give back when this WQE retires (0: none) */
    void          *dst;
    const void    *src;
    rvx_request_t *req;
} rvx__mlx5_op_t;

#define RVX__MLX5_REC_NIL 0xffffffffu /* no record: the end of a list */

/* An op record in the pool: the op, the WQE it belongs to, the next record of its list (its
 * queue's, or the free list). */
typedef struct rvx__mlx5_oprec {
    rvx__mlx5_op_t op;
    uint32_t       pi;
    uint32_t       next;
} rvx__mlx5_oprec_t;

/* The worker's op records: every queue's and the free ones. */
typedef struct rvx__mlx5_txpool {
    rvx__mlx5_oprec_t *r;
    uint32_t         cap;
    uint32_t         free;     /* first free record (RVX__MLX5_REC_NIL: none) */
} rvx__mlx5_txpool_t;

/* The book-keeping beside an rvx__mlx5_sq_t. */
typedef struct rvx__mlx5_txops {
    rvx__mlx5_txpool_t *pool;        /* the worker's op records */
    unsigned       *outstanding;     /* the iface's count of signaled WQEs not yet completed */
    uint32_t        head, tail;      /* this queue's records, oldest first (NIL: none) */
    uint32_t        sig_out;         /* signaled WQEs not yet completed */
    uint32_t        last_sig_pi;     /* pi just past the last signaled WQE */
    uint16_t        last_sig_idx_be; /* its WQE index as the CQE's wqe_counter carries it */
    uint8_t         hold;            /* failed with error CQEs still to come: counted in
                                      * *outstanding so that progress polls */
    uint8_t         rsvd;
    rvx_request_t  *flush_head, *flush_tail; /* pending flushes, linked by tl_private[0] */
} rvx__mlx5_txops_t;

/* The pool is empty: double it (the first time, 64 records). Records are found by index, so
 * moving them is harmless. Running out of memory here, in the middle of a post, ends the
 * process: the WQE is written and cannot be taken back. */
RVX_COLD uint32_t rvx__mlx5_txpool_grow(rvx__mlx5_txpool_t *p)
{
    uint32_t ncap = p->cap ? 2 * p->cap : 64, i;
    rvx__mlx5_oprec_t *r = (rvx__mlx5_oprec_t *)realloc(p->r, (size_t)ncap * sizeof(*r));
    if (!r) {
        rvx__log("mlx5: no memory for %u op records", ncap);
        abort();
    }
    for (i = p->cap; i < ncap; i++) r[i].next = i + 1 == ncap ? p->free : i + 1;
    p->free = p->cap;
    p->r = r;
    p->cap = ncap;
    return p->free;
}

RVX_COLD void rvx__mlx5_txpool_init(rvx__mlx5_txpool_t *p)
{
    p->r = NULL;
    p->cap = 0;
    p->free = RVX__MLX5_REC_NIL;
}

RVX_COLD void rvx__mlx5_txpool_fini(rvx__mlx5_txpool_t *p)
{
    free(p->r);
    rvx__mlx5_txpool_init(p);
}

/* The queue's records go back to the pool unrun. */
RVX_COLD void rvx__mlx5_tx_drop(rvx__mlx5_txops_t *tx)
{
    rvx__mlx5_txpool_t *p = tx->pool;
    if (!p || tx->head == RVX__MLX5_REC_NIL) return;
    p->r[tx->tail].next = p->free;
    p->free = tx->head;
    tx->head = tx->tail = RVX__MLX5_REC_NIL;
}

/* Start afresh on a queue (a new or reset QP): records given back, counters zero. */
RVX_COLD void rvx__mlx5_tx_fresh(rvx__mlx5_txops_t *tx, rvx__mlx5_txpool_t *pool,
                                 unsigned *outstanding)
{
    if (tx->pool) rvx__mlx5_tx_drop(tx);
    tx->pool = pool;
    tx->head = tx->tail = RVX__MLX5_REC_NIL;
    tx->outstanding = outstanding;
    tx->sig_out = tx->last_sig_pi = 0;
    tx->last_sig_idx_be = 0;
    tx->hold = 0;
}

/* The WQEBBs of the WQE starting at pi, and whether it asked for a CQE: its ctrl segment says. */
RVX_INLINE uint32_t rvx__mlx5_wqe_nbb(const rvx__mlx5_sq_t *sq, uint32_t pi)
{
    const struct mlx5_wqe_ctrl_seg *ctrl = (const struct mlx5_wqe_ctrl_seg *)(const void *)
                                           rvx__mlx5_slot(sq, pi);
    return RVX__MLX5_NBB(rvx_htobe32(ctrl->qpn_ds) & 0x3f);
}

RVX_INLINE int rvx__mlx5_wqe_signaled(const rvx__mlx5_sq_t *sq, uint32_t pi)
{
    const struct mlx5_wqe_ctrl_seg *ctrl = (const struct mlx5_wqe_ctrl_seg *)(const void *)
                                           rvx__mlx5_slot(sq, pi);
    return (ctrl->fm_ce_se & RVX__MLX5_CE) != 0;
}

/* ---- posting (hot) -------------------------------------------------------------------------- */

/* Book-keeping of a signaled WQE that starts at pi and ends at end (its size and CE bit are in
 * its ctrl segment). */
RVX_INLINE void rvx__mlx5_tx_mark_sig(const rvx__mlx5_sq_t *sq, rvx__mlx5_txops_t *tx, uint32_t pi,
                                      uint32_t end)
{
    (void)sq;
    tx->sig_out++;
    tx->last_sig_pi = end;
    tx->last_sig_idx_be = rvx_htobe16((uint16_t)pi);
    (*tx->outstanding)++;
}

/* What the CQE handler does when the WQE at pi retires: a record from the pool, at the tail of
 * the queue's list (WQEs are posted in pi order, so the list stays sorted). */
RVX_INLINE void rvx__mlx5_tx_on_retire(const rvx__mlx5_sq_t *sq, rvx__mlx5_txops_t *tx, uint32_t pi,
                                       const rvx__mlx5_op_t *o)
{
    rvx__mlx5_txpool_t *p = tx->pool;
    uint32_t i = p->free;
    rvx__mlx5_oprec_t *e;
    (void)sq;
    if (RVX_UNLIKELY(i == RVX__MLX5_REC_NIL)) i = rvx__mlx5_txpool_grow(p);
    e = &p->r[i];
    p->free = e->next;
    e->op = *o;
    e->pi = pi;
    e->next = RVX__MLX5_REC_NIL;
    if (tx->head == RVX__MLX5_REC_NIL) tx->head = i;
    else p->r[tx->tail].next = i;
    tx->tail = i;
}

/* The record of the WQE at pi, if it has one (cold: the error path and endpoint close). */
RVX_COLD const rvx__mlx5_op_t *rvx__mlx5_tx_op_at(const rvx__mlx5_txops_t *tx, uint32_t pi)
{
    uint32_t i;
    for (i = tx->head; i != RVX__MLX5_REC_NIL; i = tx->pool->r[i].next) {
        const rvx__mlx5_oprec_t *e = &tx->pool->r[i];
        if (e->pi == pi) return &e->op;
        if ((int32_t)(e->pi - pi) > 0) break;
    }
    return NULL;
}

/* Whether a record not yet retired carries something a caller will look at (a request, a copy or
 * a fetch into its memory), not only bounce space, or a flush is pending. */
RVX_COLD int rvx__mlx5_tx_owes(const rvx__mlx5_txops_t *tx)
{
    uint32_t i;
    if (tx->flush_head) return 1;
    for (i = tx->head; i != RVX__MLX5_REC_NIL; i = tx->pool->r[i].next)
        if (tx->pool->r[i].op.kind != RVX__MLX5_ON_NONE) return 1;
    return 0;
}

/* ---- retiring (cold) ------------------------------------------------------------------------ */

/* A record's request, as its WQE retires with st (chunks: see RVX__MLX5_PART_*). */
RVX_COLD void rvx__mlx5_op_done(const rvx__mlx5_op_t *o, rvx_status_t st)
{
    uint64_t *first_err = &o->req->tl_private[2];
    if (o->part == RVX__MLX5_PART_MID) {
        if (st != RVX_OK && !*first_err) *first_err = (uint64_t)(int64_t)st;
    } else {
        o->req->status = o->part == RVX__MLX5_PART_LAST && *first_err ? (int)(int64_t)*first_err : st;
    }
}

/* Retire [ci, end): run the records (copies, fetches, requests with status st), then complete the
 * flushes whose target is reached with flush_st. Returns the bounce position to give back (the
 * last one retired; 0: none). */
RVX_COLD uint64_t rvx__mlx5_tx_retire(rvx__mlx5_sq_t *sq, rvx__mlx5_txops_t *tx, uint32_t end,
                                      rvx_status_t st, rvx_status_t flush_st)
{
    rvx__mlx5_txpool_t *p = tx->pool;
    uint64_t bounce = 0;
    rvx_request_t **pp;
    while (tx->head != RVX__MLX5_REC_NIL) {
        uint32_t i = tx->head;
        rvx__mlx5_oprec_t *e = &p->r[i];
        rvx__mlx5_op_t *o = &e->op;
        if ((int32_t)(e->pi - end) >= 0) break;
        if (st == RVX_OK) {
            if (o->kind == RVX__MLX5_ON_COPY) memcpy(o->dst, o->src, o->len);
            else if (o->kind == RVX__MLX5_ON_FETCH32 && o->dst) memcpy(o->dst, o->src, 4);
            else if (o->kind == RVX__MLX5_ON_FETCH64 && o->dst) memcpy(o->dst, o->src, 8);
        }
        if (o->kind != RVX__MLX5_ON_NONE && o->req) rvx__mlx5_op_done(o, st);
        if (o->bounce) bounce = o->bounce;
        tx->head = e->next;
        e->next = p->free;
        p->free = i;
    }
    if (tx->head == RVX__MLX5_REC_NIL) tx->tail = RVX__MLX5_REC_NIL;
    rvx__mlx5_sq_retired(sq, end);
    pp = &tx->flush_head; /* flushes in order of their targets */
    while (*pp && (int32_t)(sq->ci - (uint32_t)(*pp)->tl_private[1]) >= 0) {
        rvx_request_t *r = *pp;
        *pp = (rvx_request_t *)(uintptr_t)r->tl_private[0];
        r->status = flush_st;
    }
    if (!tx->flush_head) tx->flush_tail = NULL;
    return bounce;
}

/* A signaled WQE completed: everything up to its end retires. */
RVX_COLD uint64_t rvx__mlx5_tx_req_ok(rvx__mlx5_sq_t *sq, rvx__mlx5_txops_t *tx, uint16_t idx,
                                      rvx_status_t flush_st)
{
    uint32_t start = rvx__mlx5_wqe_start(sq, idx);
    tx->sig_out--;
    (*tx->outstanding)--;
    return rvx__mlx5_tx_retire(sq, tx, start + rvx__mlx5_wqe_nbb(sq, start), RVX_OK, flush_st);
}

/* A failed queue completes every WQE it holds with an error CQE, signaled or not: progress keeps
 * polling until they have all come. */
RVX_COLD void rvx__mlx5_tx_hold(const rvx__mlx5_sq_t *sq, rvx__mlx5_txops_t *tx)
{
    if (!tx->hold && sq->ci != sq->pi) {
        tx->hold = 1;
        (*tx->outstanding)++;
    }
}

/* The queue is empty after a failure: nothing more comes from it, its counts go. */
RVX_COLD void rvx__mlx5_tx_settle(rvx__mlx5_txops_t *tx)
{
    if (tx->hold) {
        tx->hold = 0;
        (*tx->outstanding)--;
    }
    *tx->outstanding -= tx->sig_out;
    tx->sig_out = 0;
}

/* The WQE at idx failed (or was flushed after a failure; the caller has marked its owner): the
 * WQEs before it completed, it completes with st (signaled or not, its ctrl segment gives its
 * size). Returns the bounce position to give back. WQEs a batch left untold are told now, so
 * that the failed queue flushes them too and empties. */
RVX_COLD uint64_t rvx__mlx5_tx_req_err(rvx__mlx5_sq_t *sq, rvx__mlx5_txops_t *tx, uint16_t idx,
                                       rvx_status_t st, rvx_status_t flush_st)
{
    uint32_t start = rvx__mlx5_wqe_start(sq, idx), end;
    uint64_t b1, b2;
    rvx__mlx5_ring(sq);
    b1 = rvx__mlx5_tx_retire(sq, tx, start, RVX_OK, flush_st);
    if (rvx__mlx5_wqe_signaled(sq, start)) {
        tx->sig_out--;
        (*tx->outstanding)--;
    }
    end = start + rvx__mlx5_wqe_nbb(sq, start);
    b2 = rvx__mlx5_tx_retire(sq, tx, end, st, flush_st);
    rvx__mlx5_tx_hold(sq, tx);
    if (sq->ci == sq->pi) rvx__mlx5_tx_settle(tx);
    return b2 ? b2 : b1;
}

/* A CQE that names a WQE before ci: already retired (a duplicate after recovery). */
RVX_INLINE int rvx__mlx5_cqe_stale(const rvx__mlx5_sq_t *sq, const struct mlx5_cqe64 *cqe)
{
    return (int16_t)(rvx_htobe16(cqe->wqe_counter) - (uint16_t)sq->ci) < 0;
}

/* If the newest WQE is unsignaled, post a signaled NOP after it, so that a CQE will retire
 * everything posted so far. It uses the reserve that `room` keeps, so it never waits. Every wait
 * for this queue's completions comes here first, so it also rings what a batch left untold. */
RVX_COLD void rvx__mlx5_tx_sig_tail(rvx__mlx5_sq_t *sq, rvx__mlx5_txops_t *tx)
{
    uint32_t pi = sq->pi;
    uint8_t *wqe;
    rvx__mlx5_wqe_send_inl_t *w;
    rvx__mlx5_ring(sq);
    if (tx->last_sig_pi == pi || pi == sq->ci || pi - sq->ci >= sq->mask + 1) return;
    wqe = rvx__mlx5_slot(sq, pi);
    w = (rvx__mlx5_wqe_send_inl_t *)(void *)wqe; /* the ctrl segment alone, then zeros */
    rvx__mlx5_set_ctrl(&w->ctrl, pi, 0, MLX5_OPCODE_NOP, sq->qpn8, RVX__MLX5_DS_NOP,
                       rvx__mlx5_moderate(sq, 1), 0);
    memset(&w->inl, 0, RVX__MLX5_BB - sizeof(w->ctrl));
    rvx__mlx5_tx_mark_sig(sq, tx, pi, pi + 1);
    rvx__mlx5_commit(sq, pi + 1, wqe, 1, NULL);
}

/* A flush request completes when ci reaches pi (now): queued in order of targets. */
RVX_COLD void rvx__mlx5_tx_flush_add(rvx__mlx5_txops_t *tx, rvx_request_t *req, uint32_t pi)
{
    req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    req->tl_private[0] = 0;
    req->tl_private[1] = pi;
    if (tx->flush_tail) tx->flush_tail->tl_private[0] = (uint64_t)(uintptr_t)req;
    else tx->flush_head = req;
    tx->flush_tail = req;
}

/* A worker flush's error word (the iface's wflush_err): the first failure of an operation of
 * ours since a worker flush last reported one, such as an access the peer's NIC refused. A
 * peer's own failure (gone, or the connection flushed) is its endpoint's to report (flush and
 * rvx_ep_status): a job's teardown must not fail every worker flush. */
RVX_COLD void rvx__mlx5_wflush_note(int8_t *err, rvx_status_t st)
{
    if (*err == RVX_OK && st != RVX_ERR_PEER_FAILED && st != RVX_ERR_CANCELED) *err = (int8_t)st;
}

/* What a worker flush ends with: that error, reported once (the word is cleared). */
RVX_INLINE rvx_status_t rvx__mlx5_wflush_err(int8_t *err)
{
    rvx_status_t st = (rvx_status_t)*err;
    *err = RVX_OK;
    return st;
}

/* Complete every worker flush of a list (linked by tl_private[0]), with the error word's status. */
RVX_COLD void rvx__mlx5_wflush_done(rvx_request_t **list, int8_t *err)
{
    rvx_status_t st = rvx__mlx5_wflush_err(err);
    while (*list) {
        rvx_request_t *r = *list;
        *list = (rvx_request_t *)(uintptr_t)r->tl_private[0];
        r->status = st;
    }
}

/* The worker goes with flushes still pending (work of destroyed endpoints not retired): they end
 * RVX_ERR_CANCELED, so that no request outlives its worker. */
RVX_COLD void rvx__mlx5_wflush_cancel(rvx_request_t **list)
{
    while (*list) {
        rvx_request_t *r = *list;
        *list = (rvx_request_t *)(uintptr_t)r->tl_private[0];
        r->status = RVX_ERR_CANCELED;
    }
}

#endif /* RVX_TL_MLX5_TX_H */
