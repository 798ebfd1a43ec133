/* rvx/tl/mlx5/flush.h: the flush of both mlx5 transports, once: what an endpoint's flush does on
 * the queue that holds its work when a poll has not retired it, and a worker flush's step for
 * each busy queue and its end. The queue is the transport's RVX__MLX5_NET(q_t) (rc_mlx5: a
 * connection; dc_mlx5: a DCI), whose fields sq, tx, failed and wflush_pi these read; its steps
 * RVX__MLX5_NET(hold)(q) (a failed queue: keep polling until every WQE has come back) and
 * RVX__MLX5_NET(sig_tail)(q) (a signaled NOP after an unsignaled tail). Included from the
 * transport's iface.h; inline, into the transports' cold flush functions. */
#ifndef RVX_TL_MLX5_FLUSH_H
#define RVX_TL_MLX5_FLUSH_H

/* Ask q for a CQE that retires everything it holds: a failed queue returns every WQE with an
 * error CQE anyway; a live one gets a signaled NOP if its last WQE is unsignaled. Either way
 * the NIC is first told of WQEs a batch left untold (a flush covers them). */
RVX_INLINE void rvx__mlx5_flush_ask(RVX__MLX5_NET(q_t) *q)
{
    rvx__mlx5_ring(&q->sq);
    if (q->failed) RVX__MLX5_NET(hold)(q);
    else RVX__MLX5_NET(sig_tail)(q);
}

/* An endpoint's flush with work still outstanding on q: req completes when q's consumer index
 * reaches its producer index of now. Without a request: RVX_ERR_INVALID_PARAM. */
RVX_INLINE rvx_status_t rvx__mlx5_flush_q(RVX__MLX5_NET(q_t) *q, rvx_request_t *req)
{
    rvx__mlx5_flush_ask(q);
    if (!req) return RVX_ERR_INVALID_PARAM;
    rvx__mlx5_tx_flush_add(&q->tx, req, q->sq.pi);
    return RVX_INPROGRESS;
}

/* A worker flush's step for a queue with work outstanding: the index its flush waits for. */
RVX_INLINE void rvx__mlx5_wflush_q(RVX__MLX5_NET(q_t) *q)
{
    rvx__mlx5_flush_ask(q);
    q->wflush_pi = q->sq.pi;
}

/* The end of a worker flush: done when no queue was busy, else req joins the worker's list of
 * pending flushes (linked by tl_private[0]; rvx__mlx5_wflush_done completes them). */
RVX_INLINE rvx_status_t rvx__mlx5_wflush_add(rvx_request_t **list, rvx_request_t *req, int busy)
{
    if (!busy) return RVX_OK;
    if (!req) return RVX_ERR_INVALID_PARAM;
    req->status = RVX_INPROGRESS;
    req->tl_private[0] = (uint64_t)(uintptr_t)*list;
    *list = req;
    return RVX_INPROGRESS;
}

#endif /* RVX_TL_MLX5_FLUSH_H */
