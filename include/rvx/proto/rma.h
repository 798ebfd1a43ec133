/* rvx/proto/rma.h: one-sided put and get.
 *
 * rvx_put        any size; the path is chosen from the size at compile time when it is a
 *                constant: short (inline) up to RVX_PUT_SHORT_MAX, else copied (bcopy, in chunks
 *                of RVX_PUT_BCOPY_MAX); it never goes zero-copy by itself. The source buffer may
 *                be reused on return; the data is at the target after a flush of the endpoint.
 * rvx_put_zcopy  from a registered local region (lmem), no copy: RVX_OK or RVX_INPROGRESS
 *                (the source may be reused when req completes).
 * rvx_get        into any buffer: RVX_OK (data present) or RVX_INPROGRESS (present when req
 *                completes).
 * rvx_get_zcopy  into a registered local region.
 * Errors: RVX_ERR_REMOTE_ACCESS for [raddr, raddr+len) outside the rkey's region (nothing is
 * written), RVX_ERR_PEER_FAILED, RVX_ERR_NO_RESOURCE (send queue full: progress and retry). */
#ifndef RVX_PROTO_RMA_H
#define RVX_PROTO_RMA_H

#if RVX_DEBUG
#define RVX__CHECK_RMA(ep, buf, len, rkey) \
    if (!(ep) || !(rkey) || (!(buf) && (len)) || rvx__rkey_foreign(ep, rkey)) \
        return RVX_ERR_INVALID_PARAM
#else
#define RVX__CHECK_RMA(ep, buf, len, rkey) (void)0
#endif

RVX_INLINE rvx_status_t rvx_put(rvx_ep_t *ep, const void *buf, size_t len, uint64_t raddr,
                                const rvx_rkey_t *rkey)
{
    RVX__CHECK_RMA(ep, buf, len, rkey);
    if (len <= RVX_PUT_SHORT_MAX) return rvx__tl_put_short(&ep->tl[0], buf, len, raddr, rkey);
    return rvx__tl_put_bcopy(&ep->tl[0], buf, len, raddr, rkey);
}

RVX_INLINE rvx_status_t rvx_put_zcopy(rvx_ep_t *ep, const void *buf, size_t len,
                                      const rvx_mem_t *lmem, uint64_t raddr,
                                      const rvx_rkey_t *rkey, rvx_request_t *req)
{
    RVX__CHECK_RMA(ep, buf, len, rkey);
    return rvx__tl_put_zcopy(&ep->tl[0], buf, len, &lmem->tl[0], raddr, rkey, req);
}

RVX_INLINE rvx_status_t rvx_get(rvx_ep_t *ep, void *buf, size_t len, uint64_t raddr,
                                const rvx_rkey_t *rkey, rvx_request_t *req)
{
    RVX__CHECK_RMA(ep, buf, len, rkey);
    return rvx__tl_get_bcopy(&ep->tl[0], buf, len, raddr, rkey, req);
}

RVX_INLINE rvx_status_t rvx_get_zcopy(rvx_ep_t *ep, void *buf, size_t len, const rvx_mem_t *lmem,
                                      uint64_t raddr, const rvx_rkey_t *rkey, rvx_request_t *req)
{
    RVX__CHECK_RMA(ep, buf, len, rkey);
    return rvx__tl_get_zcopy(&ep->tl[0], buf, len, &lmem->tl[0], raddr, rkey, req);
}

#endif /* RVX_PROTO_RMA_H */
