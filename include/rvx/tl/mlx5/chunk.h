/* rvx/tl/mlx5/chunk.h: the chunk loops of both mlx5 transports: put bcopy (through the bounce
 * ring, RVX_PUT_BCOPY_MAX a WRITE), put and get zcopy (WQEs of at most 1 GiB), get bcopy (READs
 * into the bounce ring, copied out as each completes). One mlx5 transport is compiled into a
 * build: RVX__MLX5_NET(x) names its step x (rvx__rc_x or rvx__dc_x, bound in its decl.h), and the
 * transport includes this file from its rma.h once the steps are defined. The steps, each taking
 * the endpoint and q, the queue its chunks go to (rc_mlx5: the connection; dc_mlx5: a DCI):
 *   q_t                          the queue's type (declared in the transport's decl.h)
 *   chunk_q(ep)                  the queue with room for one RDMA WQE; NULL: the endpoint failed
 *   chunk_bounce(ep, q, n)       n bytes of q's bounce ring; NULL: the endpoint failed
 *   chunk_bhead(ep, q), chunk_lkey(ep, q)  the ring's head (for the op record) and its lkey
 *   chunk_post(ep, q, opcode, addr, len, lkey, raddr, rkey, o, sig)  one RDMA WQE on q
 *   chunk_failed(ep, q), chunk_status(ep, q)  the endpoint failed; with what status
 *   chunk_none(ep)               q before a transfer's first chunk (dc_mlx5: NULL)
 *   chunk_stop(ep, q, req)       a transfer stops early (q: where its chunks went, or chunk_none)
 *   chunk_wait(ep, q, req)       the call waits for a request of its own
 *   put_short                    an inline put (a last chunk that small) */
#ifndef RVX_TL_MLX5_CHUNK_H
#define RVX_TL_MLX5_CHUNK_H

#define RVX__MLX5_EP RVX__MLX5_NET(ep_t)
#define RVX__MLX5_Q  RVX__MLX5_NET(q_t)

/* Put bcopy: copy into the bounce ring (chunks of RVX_PUT_BCOPY_MAX), one WRITE per chunk. The
 * source can be reused on return. */
RVX_INLINE rvx_status_t rvx__mlx5_put_bcopy(RVX__MLX5_EP *ep, const void *src, size_t len,
                                            uint64_t raddr, const rvx__mlx5_rkey_t *rkey)
{
    size_t done = 0;
    /* more than one chunk: checked here (one chunk the NIC checks, as for a short get) */
    if (len > RVX_PUT_BCOPY_MAX && RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len)))
        return RVX_ERR_REMOTE_ACCESS;
    while (done < len) {
        size_t n = len - done < RVX_PUT_BCOPY_MAX ? len - done : RVX_PUT_BCOPY_MAX;
        RVX__MLX5_Q *q;
        rvx__mlx5_op_t o;
        uint8_t *b;
        if (n <= RVX__TL_SHORT_MAX) {
            rvx_status_t st = RVX__MLX5_NET(put_short)(ep, (const uint8_t *)src + done, n,
                                                       raddr + done, rkey);
            if (st != RVX_OK) return st;
            done += n;
            continue;
        }
        q = RVX__MLX5_NET(chunk_q)(ep);
        b = q ? RVX__MLX5_NET(chunk_bounce)(ep, q, n) : NULL;
        if (RVX_UNLIKELY(!b)) return RVX__MLX5_NET(chunk_status)(ep, q);
        memcpy(b, (const uint8_t *)src + done, n);
        memset(&o, 0, sizeof(o));
        o.kind = RVX__MLX5_ON_NONE;
        o.bounce = RVX__MLX5_NET(chunk_bhead)(ep, q);
        RVX__MLX5_NET(chunk_post)(ep, q, MLX5_OPCODE_RDMA_WRITE, b, (uint32_t)n,
                                  RVX__MLX5_NET(chunk_lkey)(ep, q), raddr + done, rkey, &o, 0);
        done += n;
        if (RVX_UNLIKELY(done < len && RVX__MLX5_NET(chunk_failed)(ep, q)))
            return RVX__MLX5_NET(chunk_status)(ep, q); /* none after an error */
    }
    return RVX_OK;
}

/* Put or get zcopy: straight from / into registered memory, in WQEs of at most 1 GiB; the request
 * completes when the last one has (without a request, the call waits). */
RVX_INLINE rvx_status_t rvx__mlx5_rdma_zcopy(RVX__MLX5_EP *ep, unsigned opcode, const uint8_t *buf,
                                             size_t len, const rvx__mlx5_mem_t *lmem,
                                             uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                             rvx_request_t *req)
{
    rvx_request_t own;
    size_t done = 0;
    RVX__MLX5_Q *q = RVX__MLX5_NET(chunk_none)(ep);
    if (len == 0) return RVX_OK;
    if (RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len))) return RVX_ERR_REMOTE_ACCESS;
    if (!req) req = &own;
    req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    if (len > RVX__MLX5_DSEG_MAX) req->tl_private[2] = 0; /* chunks: the first error */
    while (done < len) {
        size_t n = len - done > RVX__MLX5_DSEG_MAX ? RVX__MLX5_DSEG_MAX : len - done;
        int last = done + n == len;
        RVX__MLX5_Q *nq = RVX__MLX5_NET(chunk_q)(ep);
        rvx__mlx5_op_t o;
        if (RVX_UNLIKELY(!nq)) return RVX__MLX5_NET(chunk_stop)(ep, q, req);
        q = nq;
        memset(&o, 0, sizeof(o));
        o.kind = RVX__MLX5_ON_REQ;
        o.part = RVX__MLX5_PART(done, n, len);
        o.req = req;
        RVX__MLX5_NET(chunk_post)(ep, q, opcode, buf + done, (uint32_t)n, lmem->lkey,
                                  raddr + done, rkey, &o, last);
        done += n;
        if (RVX_UNLIKELY(done < len && RVX__MLX5_NET(chunk_failed)(ep, q)))
            return RVX__MLX5_NET(chunk_stop)(ep, q, req); /* none after an error */
    }
    return req == &own ? RVX__MLX5_NET(chunk_wait)(ep, q, &own) : RVX_INPROGRESS;
}

/* Get bcopy: READs into the bounce ring, copied to dst as each completes; the request completes
 * with the last chunk. Without a request the call waits. */
RVX_INLINE rvx_status_t rvx__mlx5_get_bcopy(RVX__MLX5_EP *ep, void *dst, size_t len,
                                            uint64_t raddr, const rvx__mlx5_rkey_t *rkey,
                                            rvx_request_t *req)
{
    rvx_request_t own;
    size_t done = 0;
    RVX__MLX5_Q *q = RVX__MLX5_NET(chunk_none)(ep);
    if (len == 0) return RVX_OK;
    /* more than one chunk: checked here (one chunk the NIC checks, as for a short get) */
    if (len > RVX_PUT_BCOPY_MAX && RVX_UNLIKELY(!rvx__mlx5_rkey_covers(rkey, raddr, len)))
        return RVX_ERR_REMOTE_ACCESS;
    if (!req) req = &own;
    req->status = RVX_INPROGRESS; /* the call owns the request's initial state */
    if (len > RVX_PUT_BCOPY_MAX) req->tl_private[2] = 0; /* chunks: the first error */
    while (done < len) {
        size_t n = len - done < RVX_PUT_BCOPY_MAX ? len - done : RVX_PUT_BCOPY_MAX;
        int last = done + n == len;
        RVX__MLX5_Q *nq = RVX__MLX5_NET(chunk_q)(ep);
        rvx__mlx5_op_t o;
        uint8_t *b = nq ? RVX__MLX5_NET(chunk_bounce)(ep, nq, n) : NULL;
        if (RVX_UNLIKELY(!b)) return RVX__MLX5_NET(chunk_stop)(ep, q, req);
        q = nq;
        o.kind = RVX__MLX5_ON_COPY;
        o.part = RVX__MLX5_PART(done, n, len);
        o.len = (uint32_t)n;
        o.dst = (uint8_t *)dst + done;
        o.src = b;
        o.req = req;
        o.bounce = RVX__MLX5_NET(chunk_bhead)(ep, q);
        RVX__MLX5_NET(chunk_post)(ep, q, MLX5_OPCODE_RDMA_READ, b, (uint32_t)n,
                                  RVX__MLX5_NET(chunk_lkey)(ep, q), raddr + done, rkey, &o, last);
        done += n;
        if (RVX_UNLIKELY(done < len && RVX__MLX5_NET(chunk_failed)(ep, q)))
            return RVX__MLX5_NET(chunk_stop)(ep, q, req); /* none after an error */
    }
    return req == &own ? RVX__MLX5_NET(chunk_wait)(ep, q, &own) : RVX_INPROGRESS;
}

#undef RVX__MLX5_EP
#undef RVX__MLX5_Q

#endif /* RVX_TL_MLX5_CHUNK_H */
