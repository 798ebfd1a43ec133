/* rvx/tl/shm/rma.h: puts, gets and atomics: a copy into or out of a peer's mapping, or a CPU
 * atomic on it (hot); cross-memory attach for registered memory and refusals (cold). */
#ifndef RVX_TL_SHM_RMA_H
#define RVX_TL_SHM_RMA_H

#include "decl.h"

/* ---- RMA ------------------------------------------------------------------------------------ */

/* Not in the mapping: cross-memory attach into registered memory, or an error. The bounds are
 * checked against the region's real length before any byte moves; a mapped key (maplen == len)
 * only comes here when it is out of bounds. */
RVX_COLD rvx_status_t rvx__shm_rma_slow(rvx__shm_ep_t *ep, void *local, size_t len, uint64_t raddr,
                                        const rvx__shm_rkey_t *rkey, int is_put)
{
    uint64_t off = raddr - rkey->rbase;
    size_t done = 0;
    if (off > rkey->len || len > rkey->len - off || rkey->lbase) return RVX_ERR_REMOTE_ACCESS;
    while (done < len) {
        struct iovec l, r;
        ssize_t n;
        l.iov_base = (char *)local + done;
        l.iov_len = len - done;
        r.iov_base = (void *)(uintptr_t)(raddr + done);
        r.iov_len = len - done;
        n = syscall(is_put ? SYS_process_vm_writev : SYS_process_vm_readv, rkey->pid, &l, 1UL,
                    &r, 1UL, 0UL);
        if (n <= 0) {
            int e = n < 0 ? errno : EFAULT;
            if (e == ESRCH) { ep->failed = 1; return RVX_ERR_PEER_FAILED; }
            if (e == EPERM) {
                rvx__log("the kernel forbids cross-memory attach to process %d (ptrace policy); "
                         "allocate shared regions with rvx_mem_alloc instead", rkey->pid);
                return RVX_ERR_UNSUPPORTED;
            }
            if (e == EFAULT) return RVX_ERR_REMOTE_ACCESS; /* region no longer mapped there */
            return RVX_ERR_IO;
        }
        done += (size_t)n;
    }
    return RVX_OK;
}

/* The mapping check: one subtraction and two compares (the second catches a wrapped offset). */
#define RVX__SHM_IN_MAP(rkey, raddr, len, off)                                                  \
    ((off) = (raddr) - (rkey)->rbase,                                                           \
     RVX_LIKELY((off) + (len) <= (rkey)->maplen && (off) + (len) >= (len)))

RVX_INLINE rvx_status_t rvx__shm_put_short(rvx__shm_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__shm_rkey_t *rkey)
{
    uint64_t off;
    if (RVX__SHM_IN_MAP(rkey, raddr, len, off)) {
        if (len) memcpy(rkey->lbase + off, src, len);
        return RVX_OK;
    }
    return rvx__shm_rma_slow(ep, (void *)(uintptr_t)src, len, raddr, rkey, 1);
}

/* Shared memory has no doorbell: nothing to ring. */
RVX_INLINE void rvx__shm_ep_ring(rvx__shm_ep_t *ep)
{
    (void)ep;
}

/* The batch scope (proto/batch.h): the endpoint, and ordinary puts. */
typedef struct rvx__shm_batch {
    rvx__shm_ep_t *ep;
} rvx__shm_batch_t;

RVX_INLINE void rvx__shm_batch_begin(rvx__shm_ep_t *ep, rvx__shm_batch_t *b) { b->ep = ep; }
RVX_INLINE void rvx__shm_batch_sync(rvx__shm_batch_t *b) { (void)b; }
RVX_INLINE void rvx__shm_batch_reload(rvx__shm_batch_t *b) { (void)b; }
RVX_INLINE void rvx__shm_batch_end(rvx__shm_batch_t *b) { (void)b; }

RVX_INLINE rvx_status_t rvx__shm_batch_put_short(rvx__shm_batch_t *b, const void *src, size_t len,
                                                 uint64_t raddr, const rvx__shm_rkey_t *rkey)
{
    return rvx__shm_put_short(b->ep, src, len, raddr, rkey);
}

RVX_INLINE rvx_status_t rvx__shm_put_bcopy(rvx__shm_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__shm_rkey_t *rkey)
{
    return rvx__shm_put_short(ep, src, len, raddr, rkey);
}

/* shm has no registration: zero-copy is the same single copy, completed before return. */
RVX_INLINE rvx_status_t rvx__shm_put_zcopy(rvx__shm_ep_t *ep, const void *src, size_t len,
                                          const rvx__shm_mem_t *lmem, uint64_t raddr,
                                          const rvx__shm_rkey_t *rkey, rvx_request_t *req)
{
    (void)lmem;
    (void)req;
    return rvx__shm_put_short(ep, src, len, raddr, rkey);
}

RVX_INLINE rvx_status_t rvx__shm_get_bcopy(rvx__shm_ep_t *ep, void *dst, size_t len, uint64_t raddr,
                                          const rvx__shm_rkey_t *rkey, rvx_request_t *req)
{
    uint64_t off;
    (void)req;
    if (RVX__SHM_IN_MAP(rkey, raddr, len, off)) {
        if (len) memcpy(dst, rkey->lbase + off, len);
        return RVX_OK;
    }
    return rvx__shm_rma_slow(ep, dst, len, raddr, rkey, 0);
}

RVX_INLINE rvx_status_t rvx__shm_get_zcopy(rvx__shm_ep_t *ep, void *dst, size_t len,
                                          const rvx__shm_mem_t *lmem, uint64_t raddr,
                                          const rvx__shm_rkey_t *rkey, rvx_request_t *req)
{
    (void)lmem;
    return rvx__shm_get_bcopy(ep, dst, len, raddr, rkey, req);
}

/* ---- atomics: CPU atomics on the mapping ---------------------------------------------------- */

RVX_COLD rvx_status_t rvx__shm_amo_slow(const rvx__shm_rkey_t *rkey, uint64_t raddr, size_t size)
{
    uint64_t off = raddr - rkey->rbase;
    if (off > rkey->len || size > rkey->len - off) return RVX_ERR_REMOTE_ACCESS;
    if (raddr & (size - 1)) return RVX_ERR_INVALID_PARAM; /* must be naturally aligned */
    rvx__log("atomics over shm need memory from rvx_mem_alloc (this region was registered "
             "with rvx_mem_reg and is reached by cross-memory attach, which is not atomic)");
    return RVX_ERR_UNSUPPORTED;
}

/* One body for both widths: T is the integer type, S its signed twin. Operations the CPU has
 * are one instruction; MULT, MIN and MAX are a compare-and-swap loop. */
#define RVX__SHM_AMO_DEFINE(BITS, T, S)                                                         \
    RVX_INLINE T rvx__shm_amo##BITS(T *p, rvx_amo_op_t op, T v, T cmp)                         \
    {                                                                                           \
        T old, nv;                                                                              \
        switch (op) {                                                                           \
        case RVX_AMO_SET:  __atomic_store_n(p, v, __ATOMIC_SEQ_CST); return 0;                 \
        case RVX_AMO_GET:  return __atomic_load_n(p, __ATOMIC_SEQ_CST);                         \
        case RVX_AMO_SWAP: return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);                  \
        case RVX_AMO_CAS:                                                                       \
            __atomic_compare_exchange_n(p, &cmp, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);     \
            return cmp;                                                                         \
        case RVX_AMO_ADD:  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);                   \
        case RVX_AMO_SUB:  return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST);                   \
        case RVX_AMO_INC:  return __atomic_fetch_add(p, (T)1, __ATOMIC_SEQ_CST);                \
        case RVX_AMO_DEC:  return __atomic_fetch_sub(p, (T)1, __ATOMIC_SEQ_CST);                \
        case RVX_AMO_AND:  return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST);                   \
        case RVX_AMO_OR:   return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST);                    \
        case RVX_AMO_XOR:  return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST);                   \
        default: break;                                                                         \
        }                                                                                       \
        old = __atomic_load_n(p, __ATOMIC_RELAXED);                                             \
        do {                                                                                    \
            switch (op) {                                                                       \
            case RVX_AMO_MULT: nv = (T)(old * v); break;                                        \
            case RVX_AMO_MIN:  nv = (S)old < (S)v ? old : v; break;                             \
            case RVX_AMO_MAX:  nv = (S)old > (S)v ? old : v; break;                             \
            case RVX_AMO_UMIN: nv = old < v ? old : v; break;                                   \
            default:           nv = old > v ? old : v; break; /* UMAX */                        \
            }                                                                                   \
        } while (!__atomic_compare_exchange_n(p, &old, nv, 1, __ATOMIC_SEQ_CST,                 \
                                              __ATOMIC_RELAXED));                               \
        return old;                                                                             \
    }                                                                                           \
                                                                                                \
    RVX_INLINE rvx_status_t rvx__shm_atomic##BITS(rvx__shm_ep_t *ep, rvx_amo_op_t op, T v, T cmp, \
                                                 uint64_t raddr, const rvx__shm_rkey_t *rkey,        \
                                                 T *fetch, rvx_request_t *req)                  \
    {                                                                                           \
        uint64_t off;                                                                           \
        T old;                                                                                  \
        (void)ep;                                                                               \
        (void)req;                                                                              \
        if (RVX_UNLIKELY(!RVX__SHM_IN_MAP(rkey, raddr, sizeof(T), off) ||                       \
                         (raddr & (sizeof(T) - 1))))                                            \
            return rvx__shm_amo_slow(rkey, raddr, sizeof(T));                                   \
        old = rvx__shm_amo##BITS((T *)(void *)(rkey->lbase + off), op, v, cmp);                 \
        if (fetch) *fetch = old;                                                                \
        return RVX_OK;                                                                          \
    }

RVX__SHM_AMO_DEFINE(32, uint32_t, int32_t)
RVX__SHM_AMO_DEFINE(64, uint64_t, int64_t)

#endif /* RVX_TL_SHM_RMA_H */
