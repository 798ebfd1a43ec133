/* rvx/shmem/rma.h: contexts' handle, and RMA: put, get, p, g, iput, iget and their nbi forms for
 * every standard type, the sized forms and putmem/getmem, with and without a context.
 *
 * A put is rvx_put (the source reusable on return, remote completion at shmem_quiet), so the nbi
 * puts are the same call. Gets wait for their data: a get_nbi returns with its data already
 * there, which the specification allows. */
#ifndef RVX_SHMEM_RMA_H
#define RVX_SHMEM_RMA_H

/* A context: one worker serves every context (rvx workers are created collectively, contexts
 * are not); a context created from a team numbers PEs in that team (start + pe * stride). */
typedef struct rvx__sh_team rvx__sh_team_t;
typedef struct rvx__sh_ctx {
    int             start, stride;
    rvx__sh_team_t *team;
    long            options;
} *shmem_ctx_t;

__attribute__((weak)) struct rvx__sh_ctx rvx__sh_ctx_default = {0, 1, NULL, 0};
#define SHMEM_CTX_DEFAULT ((shmem_ctx_t)&rvx__sh_ctx_default)
#define SHMEM_CTX_INVALID ((shmem_ctx_t)NULL)
#define RVX__SH_CPE(ctx, pe) ((ctx)->start + (pe) * (ctx)->stride)

/* A put rvx refused. rvx's puts never answer RVX_ERR_NO_RESOURCE (a full queue waits inside the
 * call, docs/transports.md), so this is an error: the hot path keeps nothing alive for a retry or a message (the status
 * names what failed; the line starts with this PE's number). */
RVX_COLD void rvx__sh_put_fail(rvx_status_t st, size_t len)
{
    rvx__sh_fatal("a put of %zu bytes failed: %s", len, rvx_status_str(st));
}

/* A get rvx refused or failed (never RVX_ERR_NO_RESOURCE for RMA: a full queue waits inside). */
RVX_COLD void rvx__sh_get_fail(rvx_status_t st, size_t len)
{
    rvx__sh_fatal("a get of %zu bytes failed: %s", len, rvx_status_str(st));
}

/* A put to a global or static variable: out of line, so that the heap's put makes no call
 * before rvx_put and keeps its arguments in their registers. */
RVX_COLD void rvx__sh_putmem_data(void *dest, const void *src, const rvx__sh_peer_t *p, size_t len)
{
    rvx__sh_target_t t = rvx__sh_data_key(p, (uintptr_t)dest, len);
    rvx_status_t st = rvx_put(p->ep, src, len, t.raddr, t.rk);
    if (st != RVX_OK) rvx__sh_put_fail(st, len);
}

/* A put to heap address a of the PE of entry p. */
RVX_INLINE void rvx__sh_put_heap(const rvx__sh_peer_t *p, uintptr_t a, const void *src, size_t len)
{
#if RVX__SH_MAPPED
    uintptr_t off = a - rvx__sh.heap_base;
    if (RVX_UNLIKELY(len > rvx__sh.heap_len - off)) rvx__sh_put_fail(RVX_ERR_REMOTE_ACCESS, len);
    memcpy(p->heap_ptr + off, src, len);
#else
    rvx_status_t st = rvx_put(p->ep, src, len, rvx__sh_heap_raddr(p, a), &p->heap_rkey);
    if (RVX_UNLIKELY(st != RVX_OK)) rvx__sh_put_fail(st, len);
#endif
}

/* The PE's entry is found after the address test, so that pe's register is scaled in place. */
RVX_INLINE void rvx__sh_putmem(int pe, void *dest, const void *src, size_t len)
{
    if (RVX_UNLIKELY(!rvx__sh_heap_has((uintptr_t)dest))) {
        rvx__sh_putmem_data(dest, src, RVX__SH_PEER(pe), len);
        return;
    }
    rvx__sh_put_heap(RVX__SH_PEER(pe), (uintptr_t)dest, src, len);
}

/* shmem_<T>_p of up to 8 bytes: the value's bytes travel in a register, also to the data
 * segment's out-of-line path; the heap's 8-byte put reads them from the register too (the
 * mlx5 transports' put8 hands its slow path the value, not its address), so the fast path needs
 * no frame to keep a copy in. */
RVX_COLD void rvx__sh_putval_data(void *dest, uint64_t bytes, const rvx__sh_peer_t *p, size_t len)
{
    rvx__sh_putmem_data(dest, &bytes, p, len);
}

RVX_INLINE void rvx__sh_putval(int pe, void *dest, uint64_t bytes, size_t len)
{
    if (RVX_UNLIKELY(!rvx__sh_heap_has((uintptr_t)dest))) {
        rvx__sh_putval_data(dest, bytes, RVX__SH_PEER(pe), len);
        return;
    }
    rvx__sh_put_heap(RVX__SH_PEER(pe), (uintptr_t)dest, &bytes, len);
}

#define RVX__SH_P(pe, d, v)                                                                        \
    do {                                                                                           \
        if (sizeof(v) <= 8) {                                                                      \
            uint64_t b_ = 0;                                                                       \
            memcpy(&b_, &(v), sizeof(v));                                                          \
            rvx__sh_putval((pe), (d), b_, sizeof(v));                                              \
        } else {                                                                                   \
            rvx__sh_putmem((pe), (d), &(v), sizeof(v));                                            \
        }                                                                                          \
    } while (0)

/* A get from a global or static variable: out of line, like the put's. */
RVX_COLD void rvx__sh_getmem_data(int pe, void *dst, const void *src, size_t len)
{
    const rvx__sh_peer_t *p = &rvx__sh.peers[pe];
    rvx__sh_target_t t = rvx__sh_data_key(p, (uintptr_t)src, len);
    rvx_status_t st = rvx_get(p->ep, dst, len, t.raddr, t.rk, NULL);
    if (st != RVX_OK) rvx__sh_get_fail(st, len);
}

RVX_INLINE void rvx__sh_getmem(int pe, void *dst, const void *src, size_t len)
{
    const rvx__sh_peer_t *p = RVX__SH_PEER(pe);
    rvx_status_t st;
    if (RVX_UNLIKELY(!rvx__sh_heap_has((uintptr_t)src))) {
        rvx__sh_getmem_data(pe, dst, src, len);
        return;
    }
    st = rvx_get(p->ep, dst, len, rvx__sh_heap_raddr(p, (uintptr_t)src), &p->heap_rkey, NULL);
    if (RVX_UNLIKELY(st != RVX_OK)) rvx__sh_get_fail(st, len);
}

/* strided: element by element (each a put or a get of one element) */
static inline void rvx__sh_iput(int pe, void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
                                size_t n, size_t esz)
{
    size_t i;
    for (i = 0; i < n; i++)
        rvx__sh_putmem(pe, (char *)dest + (ptrdiff_t)i * dst * (ptrdiff_t)esz,
                       (const char *)src + (ptrdiff_t)i * sst * (ptrdiff_t)esz, esz);
}

static inline void rvx__sh_iget(int pe, void *dest, const void *src, ptrdiff_t dst, ptrdiff_t sst,
                                size_t n, size_t esz)
{
    size_t i;
    for (i = 0; i < n; i++)
        rvx__sh_getmem(pe, (char *)dest + (ptrdiff_t)i * dst * (ptrdiff_t)esz,
                       (const char *)src + (ptrdiff_t)i * sst * (ptrdiff_t)esz, esz);
}

/* ---- typed routines -------------------------------------------------------------------------- */

/* _p and _g inline whole into the caller, as rvx_put and rvx_get do (a _g left to the compiler
 * was a call of its own: its fetch path is long) */
#define RVX__SH_RMA_DEF(T, N)                                                                      \
    static inline void shmem_ctx_##N##_put(shmem_ctx_t c, T *d, const T *s, size_t n, int pe)     \
    { rvx__sh_putmem(RVX__SH_CPE(c, pe), d, s, n * sizeof(T)); }                                   \
    static inline void shmem_##N##_put(T *d, const T *s, size_t n, int pe)                        \
    { rvx__sh_putmem(pe, d, s, n * sizeof(T)); }                                                   \
    static inline void shmem_ctx_##N##_put_nbi(shmem_ctx_t c, T *d, const T *s, size_t n, int pe) \
    { rvx__sh_putmem(RVX__SH_CPE(c, pe), d, s, n * sizeof(T)); }                                   \
    static inline void shmem_##N##_put_nbi(T *d, const T *s, size_t n, int pe)                    \
    { rvx__sh_putmem(pe, d, s, n * sizeof(T)); }                                                   \
    static inline void shmem_ctx_##N##_get(shmem_ctx_t c, T *d, const T *s, size_t n, int pe)     \
    { rvx__sh_getmem(RVX__SH_CPE(c, pe), d, s, n * sizeof(T)); }                                   \
    static inline void shmem_##N##_get(T *d, const T *s, size_t n, int pe)                        \
    { rvx__sh_getmem(pe, d, s, n * sizeof(T)); }                                                   \
    static inline void shmem_ctx_##N##_get_nbi(shmem_ctx_t c, T *d, const T *s, size_t n, int pe) \
    { rvx__sh_getmem(RVX__SH_CPE(c, pe), d, s, n * sizeof(T)); }                                   \
    static inline void shmem_##N##_get_nbi(T *d, const T *s, size_t n, int pe)                    \
    { rvx__sh_getmem(pe, d, s, n * sizeof(T)); }                                                   \
    static inline void shmem_ctx_##N##_p(shmem_ctx_t c, T *d, T v, int pe)                        \
    { RVX__SH_P(RVX__SH_CPE(c, pe), d, v); }                                                       \
    static inline void shmem_##N##_p(T *d, T v, int pe) { RVX__SH_P(pe, d, v); }                  \
    RVX_INLINE T shmem_ctx_##N##_g(shmem_ctx_t c, const T *s, int pe)                             \
    { T v; rvx__sh_getmem(RVX__SH_CPE(c, pe), &v, s, sizeof(T)); return v; }                       \
    RVX_INLINE T shmem_##N##_g(const T *s, int pe)                                                \
    { T v; rvx__sh_getmem(pe, &v, s, sizeof(T)); return v; }                                       \
    static inline void shmem_ctx_##N##_iput(shmem_ctx_t c, T *d, const T *s, ptrdiff_t dst,       \
                                            ptrdiff_t sst, size_t n, int pe)                      \
    { rvx__sh_iput(RVX__SH_CPE(c, pe), d, s, dst, sst, n, sizeof(T)); }                            \
    static inline void shmem_##N##_iput(T *d, const T *s, ptrdiff_t dst, ptrdiff_t sst, size_t n, \
                                        int pe)                                                   \
    { rvx__sh_iput(pe, d, s, dst, sst, n, sizeof(T)); }                                            \
    static inline void shmem_ctx_##N##_iget(shmem_ctx_t c, T *d, const T *s, ptrdiff_t dst,       \
                                            ptrdiff_t sst, size_t n, int pe)                      \
    { rvx__sh_iget(RVX__SH_CPE(c, pe), d, s, dst, sst, n, sizeof(T)); }                            \
    static inline void shmem_##N##_iget(T *d, const T *s, ptrdiff_t dst, ptrdiff_t sst, size_t n, \
                                        int pe)                                                   \
    { rvx__sh_iget(pe, d, s, dst, sst, n, sizeof(T)); }
RVX__SH_RMA_TYPES(RVX__SH_RMA_DEF)

#define RVX__SH_SIZED_DEF(BITS, BYTES)                                                             \
    static inline void shmem_ctx_put##BITS(shmem_ctx_t c, void *d, const void *s, size_t n, int pe) \
    { rvx__sh_putmem(RVX__SH_CPE(c, pe), d, s, n * BYTES); }                                       \
    static inline void shmem_put##BITS(void *d, const void *s, size_t n, int pe)                  \
    { rvx__sh_putmem(pe, d, s, n * BYTES); }                                                       \
    static inline void shmem_ctx_put##BITS##_nbi(shmem_ctx_t c, void *d, const void *s, size_t n, \
                                                 int pe)                                          \
    { rvx__sh_putmem(RVX__SH_CPE(c, pe), d, s, n * BYTES); }                                       \
    static inline void shmem_put##BITS##_nbi(void *d, const void *s, size_t n, int pe)            \
    { rvx__sh_putmem(pe, d, s, n * BYTES); }                                                       \
    static inline void shmem_ctx_get##BITS(shmem_ctx_t c, void *d, const void *s, size_t n, int pe) \
    { rvx__sh_getmem(RVX__SH_CPE(c, pe), d, s, n * BYTES); }                                       \
    static inline void shmem_get##BITS(void *d, const void *s, size_t n, int pe)                  \
    { rvx__sh_getmem(pe, d, s, n * BYTES); }                                                       \
    static inline void shmem_ctx_get##BITS##_nbi(shmem_ctx_t c, void *d, const void *s, size_t n, \
                                                 int pe)                                          \
    { rvx__sh_getmem(RVX__SH_CPE(c, pe), d, s, n * BYTES); }                                       \
    static inline void shmem_get##BITS##_nbi(void *d, const void *s, size_t n, int pe)            \
    { rvx__sh_getmem(pe, d, s, n * BYTES); }                                                       \
    static inline void shmem_ctx_iput##BITS(shmem_ctx_t c, void *d, const void *s, ptrdiff_t dst, \
                                            ptrdiff_t sst, size_t n, int pe)                      \
    { rvx__sh_iput(RVX__SH_CPE(c, pe), d, s, dst, sst, n, BYTES); }                                \
    static inline void shmem_iput##BITS(void *d, const void *s, ptrdiff_t dst, ptrdiff_t sst,     \
                                        size_t n, int pe)                                         \
    { rvx__sh_iput(pe, d, s, dst, sst, n, BYTES); }                                                \
    static inline void shmem_ctx_iget##BITS(shmem_ctx_t c, void *d, const void *s, ptrdiff_t dst, \
                                            ptrdiff_t sst, size_t n, int pe)                      \
    { rvx__sh_iget(RVX__SH_CPE(c, pe), d, s, dst, sst, n, BYTES); }                                \
    static inline void shmem_iget##BITS(void *d, const void *s, ptrdiff_t dst, ptrdiff_t sst,     \
                                        size_t n, int pe)                                         \
    { rvx__sh_iget(pe, d, s, dst, sst, n, BYTES); }
RVX__SH_SIZES(RVX__SH_SIZED_DEF)

static inline void shmem_ctx_putmem(shmem_ctx_t c, void *d, const void *s, size_t n, int pe)
{ rvx__sh_putmem(RVX__SH_CPE(c, pe), d, s, n); }
static inline void shmem_putmem(void *d, const void *s, size_t n, int pe) { rvx__sh_putmem(pe, d, s, n); }
static inline void shmem_ctx_putmem_nbi(shmem_ctx_t c, void *d, const void *s, size_t n, int pe)
{ rvx__sh_putmem(RVX__SH_CPE(c, pe), d, s, n); }
static inline void shmem_putmem_nbi(void *d, const void *s, size_t n, int pe) { rvx__sh_putmem(pe, d, s, n); }
static inline void shmem_ctx_getmem(shmem_ctx_t c, void *d, const void *s, size_t n, int pe)
{ rvx__sh_getmem(RVX__SH_CPE(c, pe), d, s, n); }
static inline void shmem_getmem(void *d, const void *s, size_t n, int pe) { rvx__sh_getmem(pe, d, s, n); }
static inline void shmem_ctx_getmem_nbi(shmem_ctx_t c, void *d, const void *s, size_t n, int pe)
{ rvx__sh_getmem(RVX__SH_CPE(c, pe), d, s, n); }
static inline void shmem_getmem_nbi(void *d, const void *s, size_t n, int pe) { rvx__sh_getmem(pe, d, s, n); }

#endif /* RVX_SHMEM_RMA_H */
