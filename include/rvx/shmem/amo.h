/* rvx/shmem/amo.h: atomics for the standard, extended and bitwise AMO types (rvx_atomic32/64,
 * on the NIC where the transport has a NIC: rvx routes them), their nbi fetching forms, the
 * deprecated names of 1.3, and put-with-signal.
 *
 * A fetching atomic is rvx's blocking form (no request: it returns with the old value); a
 * non-fetching one may still be on its way (complete at shmem_quiet, like a put), unless rvx
 * answered RVX_INPROGRESS, which is waited for here so that the request can live on this call's
 * stack. Float and double travel as their bits. */
#ifndef RVX_SHMEM_AMO_H
#define RVX_SHMEM_AMO_H

/* An atomic rvx refused or failed (atomics, like RMA, never answer RVX_ERR_NO_RESOURCE). */
RVX_COLD void rvx__sh_amo_fail(rvx_status_t st)
{
    rvx__sh_fatal("an atomic failed: %s", rvx_status_str(st));
}

/* One atomic of size 4 or 8 (on a resolved target); the old value when fetching. */
RVX_INLINE uint64_t rvx__sh_amo_at(rvx_ep_t *ep, uint64_t raddr, const rvx_rkey_t *rk, unsigned size,
                                   rvx_amo_op_t op, uint64_t v, uint64_t cmp, int fetching)
{
    rvx_request_t req;
    rvx_status_t st;
    if (size == 8) {
        uint64_t f = 0;
        st = rvx_atomic64(ep, op, v, cmp, raddr, rk, fetching ? &f : NULL, fetching ? NULL : &req);
        if (st == RVX_INPROGRESS) st = rvx__sh_wait(&req);
        if (RVX_UNLIKELY(st != RVX_OK)) rvx__sh_amo_fail(st);
        return f;
    } else {
        uint32_t f = 0;
        st = rvx_atomic32(ep, op, (uint32_t)v, (uint32_t)cmp, raddr, rk, fetching ? &f : NULL,
                          fetching ? NULL : &req);
        if (st == RVX_INPROGRESS) st = rvx__sh_wait(&req);
        if (RVX_UNLIKELY(st != RVX_OK)) rvx__sh_amo_fail(st);
        return f;
    }
}

/* On a global or static variable: out of line, like the put's. */
RVX_COLD uint64_t rvx__sh_amo_data(int pe, const void *dest, unsigned size, rvx_amo_op_t op,
                                   uint64_t v, uint64_t cmp, int fetching)
{
    const rvx__sh_peer_t *p = &rvx__sh.peers[pe];
    rvx__sh_target_t t = rvx__sh_data_key(p, (uintptr_t)dest, size);
    return rvx__sh_amo_at(p->ep, t.raddr, t.rk, size, op, v, cmp, fetching);
}

RVX_INLINE uint64_t rvx__sh_amo(int pe, const void *dest, unsigned size, rvx_amo_op_t op,
                                uint64_t v, uint64_t cmp, int fetching)
{
    const rvx__sh_peer_t *p = RVX__SH_PEER(pe);
    if (RVX_UNLIKELY(!rvx__sh_heap_has((uintptr_t)dest)))
        return rvx__sh_amo_data(pe, dest, size, op, v, cmp, fetching);
    return rvx__sh_amo_at(p->ep, rvx__sh_heap_raddr(p, (uintptr_t)dest), &p->heap_rkey, size, op, v,
                          cmp, fetching);
}

#define RVX__SH_BITS(T, x, b)  do { T t_ = (x); (b) = 0; memcpy(&(b), &t_, sizeof(T)); } while (0)
#define RVX__SH_UNBITS(T, b)   T r_; memcpy(&r_, &(b), sizeof(T)); return r_

/* fetching op with one operand: NAME(dest, value, pe) -> old */
#define RVX__SH_AMO_F1(T, N, NAME, OP)                                                             \
    static inline T shmem_ctx_##N##_atomic_##NAME(shmem_ctx_t c, T *d, T v, int pe)               \
    { uint64_t b, r; RVX__SH_BITS(T, v, b);                                                        \
      r = rvx__sh_amo(RVX__SH_CPE(c, pe), d, sizeof(T), OP, b, 0, 1); { RVX__SH_UNBITS(T, r); } }  \
    static inline T shmem_##N##_atomic_##NAME(T *d, T v, int pe)                                  \
    { uint64_t b, r; RVX__SH_BITS(T, v, b);                                                        \
      r = rvx__sh_amo(pe, d, sizeof(T), OP, b, 0, 1); { RVX__SH_UNBITS(T, r); } }                  \
    static inline void shmem_ctx_##N##_atomic_##NAME##_nbi(shmem_ctx_t c, T *f, T *d, T v, int pe) \
    { *f = shmem_ctx_##N##_atomic_##NAME(c, d, v, pe); }                                           \
    static inline void shmem_##N##_atomic_##NAME##_nbi(T *f, T *d, T v, int pe)                   \
    { *f = shmem_##N##_atomic_##NAME(d, v, pe); }
/* non-fetching op with one operand: NAME(dest, value, pe) */
#define RVX__SH_AMO_N1(T, N, NAME, OP)                                                             \
    static inline void shmem_ctx_##N##_atomic_##NAME(shmem_ctx_t c, T *d, T v, int pe)            \
    { uint64_t b; RVX__SH_BITS(T, v, b); rvx__sh_amo(RVX__SH_CPE(c, pe), d, sizeof(T), OP, b, 0, 0); } \
    static inline void shmem_##N##_atomic_##NAME(T *d, T v, int pe)                               \
    { uint64_t b; RVX__SH_BITS(T, v, b); rvx__sh_amo(pe, d, sizeof(T), OP, b, 0, 0); }

/* fetch, set, swap: the extended types */
#define RVX__SH_AMO_EXT_DEF(T, N)                                                                  \
    static inline T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t c, const T *s, int pe)               \
    { uint64_t r = rvx__sh_amo(RVX__SH_CPE(c, pe), s, sizeof(T), RVX_AMO_GET, 0, 0, 1);            \
      { RVX__SH_UNBITS(T, r); } }                                                                  \
    static inline T shmem_##N##_atomic_fetch(const T *s, int pe)                                  \
    { uint64_t r = rvx__sh_amo(pe, s, sizeof(T), RVX_AMO_GET, 0, 0, 1); { RVX__SH_UNBITS(T, r); } } \
    static inline void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t c, T *f, const T *s, int pe)  \
    { *f = shmem_ctx_##N##_atomic_fetch(c, s, pe); }                                               \
    static inline void shmem_##N##_atomic_fetch_nbi(T *f, const T *s, int pe)                     \
    { *f = shmem_##N##_atomic_fetch(s, pe); }                                                      \
    RVX__SH_AMO_N1(T, N, set, RVX_AMO_SET)                                                         \
    RVX__SH_AMO_F1(T, N, swap, RVX_AMO_SWAP)                                                       \
    static inline T shmem_##N##_fetch(const T *s, int pe) { return shmem_##N##_atomic_fetch(s, pe); } \
    static inline void shmem_##N##_set(T *d, T v, int pe) { shmem_##N##_atomic_set(d, v, pe); }   \
    static inline T shmem_##N##_swap(T *d, T v, int pe) { return shmem_##N##_atomic_swap(d, v, pe); }
RVX__SH_AMO_EXT(RVX__SH_AMO_EXT_DEF)

/* compare_swap, fetch_inc, inc, fetch_add, add: the standard types */
#define RVX__SH_AMO_STD_DEF(T, N)                                                                  \
    static inline T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t c, T *d, T cond, T v, int pe) \
    { uint64_t b, cb, r; RVX__SH_BITS(T, v, b); RVX__SH_BITS(T, cond, cb);                         \
      r = rvx__sh_amo(RVX__SH_CPE(c, pe), d, sizeof(T), RVX_AMO_CAS, b, cb, 1);                    \
      { RVX__SH_UNBITS(T, r); } }                                                                  \
    static inline T shmem_##N##_atomic_compare_swap(T *d, T cond, T v, int pe)                    \
    { uint64_t b, cb, r; RVX__SH_BITS(T, v, b); RVX__SH_BITS(T, cond, cb);                         \
      r = rvx__sh_amo(pe, d, sizeof(T), RVX_AMO_CAS, b, cb, 1); { RVX__SH_UNBITS(T, r); } }        \
    static inline void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t c, T *f, T *d, T cond, \
                                                               T v, int pe)                        \
    { *f = shmem_ctx_##N##_atomic_compare_swap(c, d, cond, v, pe); }                               \
    static inline void shmem_##N##_atomic_compare_swap_nbi(T *f, T *d, T cond, T v, int pe)       \
    { *f = shmem_##N##_atomic_compare_swap(d, cond, v, pe); }                                      \
    static inline T shmem_ctx_##N##_atomic_fetch_inc(shmem_ctx_t c, T *d, int pe)                 \
    { uint64_t r = rvx__sh_amo(RVX__SH_CPE(c, pe), d, sizeof(T), RVX_AMO_ADD, 1, 0, 1);            \
      { RVX__SH_UNBITS(T, r); } }                                                                  \
    static inline T shmem_##N##_atomic_fetch_inc(T *d, int pe)                                    \
    { uint64_t r = rvx__sh_amo(pe, d, sizeof(T), RVX_AMO_ADD, 1, 0, 1); { RVX__SH_UNBITS(T, r); } } \
    static inline void shmem_ctx_##N##_atomic_fetch_inc_nbi(shmem_ctx_t c, T *f, T *d, int pe)    \
    { *f = shmem_ctx_##N##_atomic_fetch_inc(c, d, pe); }                                           \
    static inline void shmem_##N##_atomic_fetch_inc_nbi(T *f, T *d, int pe)                       \
    { *f = shmem_##N##_atomic_fetch_inc(d, pe); }                                                  \
    static inline void shmem_ctx_##N##_atomic_inc(shmem_ctx_t c, T *d, int pe)                    \
    { rvx__sh_amo(RVX__SH_CPE(c, pe), d, sizeof(T), RVX_AMO_ADD, 1, 0, 0); }                       \
    static inline void shmem_##N##_atomic_inc(T *d, int pe)                                       \
    { rvx__sh_amo(pe, d, sizeof(T), RVX_AMO_ADD, 1, 0, 0); }                                       \
    RVX__SH_AMO_F1(T, N, fetch_add, RVX_AMO_ADD)                                                   \
    RVX__SH_AMO_N1(T, N, add, RVX_AMO_ADD)
RVX__SH_AMO_STD(RVX__SH_AMO_STD_DEF)

/* 1.3's names, deprecated, still used by older programs: int, long, longlong */
#define RVX__SH_AMO_OLD(T, N)                                                                      \
    static inline T shmem_##N##_cswap(T *d, T cond, T v, int pe)                                  \
    { return shmem_##N##_atomic_compare_swap(d, cond, v, pe); }                                    \
    static inline T shmem_##N##_finc(T *d, int pe) { return shmem_##N##_atomic_fetch_inc(d, pe); } \
    static inline void shmem_##N##_inc(T *d, int pe) { shmem_##N##_atomic_inc(d, pe); }           \
    static inline T shmem_##N##_fadd(T *d, T v, int pe)                                           \
    { return shmem_##N##_atomic_fetch_add(d, v, pe); }                                             \
    static inline void shmem_##N##_add(T *d, T v, int pe) { shmem_##N##_atomic_add(d, v, pe); }
RVX__SH_AMO_OLD(int, int) RVX__SH_AMO_OLD(long, long) RVX__SH_AMO_OLD(long long, longlong)

/* and, or, xor and their fetching forms: the bitwise types */
#define RVX__SH_AMO_BIT_DEF(T, N)                                                                  \
    RVX__SH_AMO_F1(T, N, fetch_and, RVX_AMO_AND) RVX__SH_AMO_N1(T, N, and, RVX_AMO_AND)           \
    RVX__SH_AMO_F1(T, N, fetch_or, RVX_AMO_OR)   RVX__SH_AMO_N1(T, N, or, RVX_AMO_OR)             \
    RVX__SH_AMO_F1(T, N, fetch_xor, RVX_AMO_XOR) RVX__SH_AMO_N1(T, N, xor, RVX_AMO_XOR)
RVX__SH_AMO_BIT(RVX__SH_AMO_BIT_DEF)

/* ---- put with signal: the data, then an atomic on the signal word, on one endpoint (its
 * order: the signal never lands before the data) -------------------------------------------- */

static inline void rvx__sh_put_signal(int pe, void *d, const void *s, size_t len, uint64_t *sig,
                                      uint64_t signal, int sig_op)
{
    rvx__sh_putmem(pe, d, s, len);
    rvx__sh_amo(pe, sig, 8, sig_op == SHMEM_SIGNAL_ADD ? RVX_AMO_ADD : RVX_AMO_SET, signal, 0, 0);
}

#define RVX__SH_SIGNAL_DEF(T, N)                                                                   \
    static inline void shmem_ctx_##N##_put_signal(shmem_ctx_t c, T *d, const T *s, size_t n,      \
                                                  uint64_t *sig, uint64_t v, int op, int pe)      \
    { rvx__sh_put_signal(RVX__SH_CPE(c, pe), d, s, n * sizeof(T), sig, v, op); }                   \
    static inline void shmem_##N##_put_signal(T *d, const T *s, size_t n, uint64_t *sig,          \
                                              uint64_t v, int op, int pe)                         \
    { rvx__sh_put_signal(pe, d, s, n * sizeof(T), sig, v, op); }                                   \
    static inline void shmem_ctx_##N##_put_signal_nbi(shmem_ctx_t c, T *d, const T *s, size_t n,  \
                                                      uint64_t *sig, uint64_t v, int op, int pe)  \
    { rvx__sh_put_signal(RVX__SH_CPE(c, pe), d, s, n * sizeof(T), sig, v, op); }                   \
    static inline void shmem_##N##_put_signal_nbi(T *d, const T *s, size_t n, uint64_t *sig,      \
                                                  uint64_t v, int op, int pe)                     \
    { rvx__sh_put_signal(pe, d, s, n * sizeof(T), sig, v, op); }
RVX__SH_RMA_TYPES(RVX__SH_SIGNAL_DEF)

#define RVX__SH_SIGNAL_SIZED(BITS, BYTES)                                                          \
    static inline void shmem_put##BITS##_signal(void *d, const void *s, size_t n, uint64_t *sig,  \
                                                uint64_t v, int op, int pe)                       \
    { rvx__sh_put_signal(pe, d, s, n * BYTES, sig, v, op); }                                       \
    static inline void shmem_put##BITS##_signal_nbi(void *d, const void *s, size_t n,             \
                                                    uint64_t *sig, uint64_t v, int op, int pe)    \
    { rvx__sh_put_signal(pe, d, s, n * BYTES, sig, v, op); }                                       \
    static inline void shmem_ctx_put##BITS##_signal(shmem_ctx_t c, void *d, const void *s,        \
                                                    size_t n, uint64_t *sig, uint64_t v, int op,  \
                                                    int pe)                                       \
    { rvx__sh_put_signal(RVX__SH_CPE(c, pe), d, s, n * BYTES, sig, v, op); }                       \
    static inline void shmem_ctx_put##BITS##_signal_nbi(shmem_ctx_t c, void *d, const void *s,    \
                                                        size_t n, uint64_t *sig, uint64_t v,      \
                                                        int op, int pe)                           \
    { rvx__sh_put_signal(RVX__SH_CPE(c, pe), d, s, n * BYTES, sig, v, op); }
RVX__SH_SIZES(RVX__SH_SIGNAL_SIZED)

static inline void shmem_putmem_signal(void *d, const void *s, size_t n, uint64_t *sig, uint64_t v,
                                       int op, int pe)
{ rvx__sh_put_signal(pe, d, s, n, sig, v, op); }
static inline void shmem_putmem_signal_nbi(void *d, const void *s, size_t n, uint64_t *sig,
                                           uint64_t v, int op, int pe)
{ rvx__sh_put_signal(pe, d, s, n, sig, v, op); }
static inline void shmem_ctx_putmem_signal(shmem_ctx_t c, void *d, const void *s, size_t n,
                                           uint64_t *sig, uint64_t v, int op, int pe)
{ rvx__sh_put_signal(RVX__SH_CPE(c, pe), d, s, n, sig, v, op); }
static inline void shmem_ctx_putmem_signal_nbi(shmem_ctx_t c, void *d, const void *s, size_t n,
                                               uint64_t *sig, uint64_t v, int op, int pe)
{ rvx__sh_put_signal(RVX__SH_CPE(c, pe), d, s, n, sig, v, op); }

/* The signal word is this PE's; its updates are NIC or CPU atomics, an aligned load sees whole
 * values. */
static inline uint64_t shmem_signal_fetch(const uint64_t *sig)
{
    return __atomic_load_n(sig, __ATOMIC_ACQUIRE);
}

#endif /* RVX_SHMEM_AMO_H */
