/* rvx/proto/amo.h: remote atomics, 32 and 64 bit, fetching (fetch != NULL) and not.
 *
 *   rvx_atomic64(ep, op, operand, compare, raddr, rkey, fetch, req)
 *   rvx_atomic32(...)                                  the same on uint32_t
 * `op` is an rvx_amo_op_t (SET GET SWAP CAS ADD SUB INC DEC AND OR XOR MULT MIN MAX UMIN UMAX);
 * `compare` is used by CAS only. raddr must be naturally aligned. Returns RVX_OK (done, *fetch
 * written) or RVX_INPROGRESS (*fetch written when req completes). Atomics from all ranks on one
 * location are atomic with respect to each other; mixing them with plain puts to the same
 * location is not. GET without a fetch pointer is RVX_ERR_INVALID_PARAM.
 * On shm all are CPU atomics on rvx_mem_alloc memory. On rc_mlx5, 64-bit ADD and CAS are native
 * NIC atomics, 32-bit ones and AND/OR/XOR/SWAP use masked atomics, MULT/MIN/MAX a CAS loop. */
#ifndef RVX_PROTO_AMO_H
#define RVX_PROTO_AMO_H

RVX_INLINE rvx_status_t rvx_atomic64(rvx_ep_t *ep, rvx_amo_op_t op, uint64_t operand,
                                     uint64_t compare, uint64_t raddr, const rvx_rkey_t *rkey,
                                     uint64_t *fetch, rvx_request_t *req)
{
    if (op == RVX_AMO_GET && !fetch) return RVX_ERR_INVALID_PARAM;
#if RVX_DEBUG
    if (!ep || !rkey || (unsigned)op > RVX_AMO_UMAX || rvx__rkey_foreign(ep, rkey))
        return RVX_ERR_INVALID_PARAM;
#endif
    return rvx__tl_atomic64(&ep->tl[0], op, operand, compare, raddr, rkey, fetch, req);
}

RVX_INLINE rvx_status_t rvx_atomic32(rvx_ep_t *ep, rvx_amo_op_t op, uint32_t operand,
                                     uint32_t compare, uint64_t raddr, const rvx_rkey_t *rkey,
                                     uint32_t *fetch, rvx_request_t *req)
{
    if (op == RVX_AMO_GET && !fetch) return RVX_ERR_INVALID_PARAM;
#if RVX_DEBUG
    if (!ep || !rkey || (unsigned)op > RVX_AMO_UMAX || rvx__rkey_foreign(ep, rkey))
        return RVX_ERR_INVALID_PARAM;
#endif
    return rvx__tl_atomic32(&ep->tl[0], op, operand, compare, raddr, rkey, fetch, req);
}

#endif /* RVX_PROTO_AMO_H */
