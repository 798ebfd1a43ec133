/* rvx/shmem/sync.h: ordering and completion (fence, quiet), point-to-point synchronization
 * (wait_until, test and their _all, _any, _some and vector forms, signal_wait_until), the team
 * synchronization every collective uses, barrier_all, sync_all, and distributed locks.
 *
 * Ordering: rvx delivers the operations of one endpoint in the order they were issued, on every
 * transport (shm: plain stores; rc_mlx5: one QP; dc_mlx5: an endpoint keeps its DCI while it has
 * work outstanding; the pair: an on-node endpoint's atomics complete before the call returns,
 * docs/transports.md). A PE is reached through one endpoint, so shmem_fence has nothing to do.
 * shmem_quiet is rvx_worker_flush of the one worker: every put, atomic and signal remotely
 * complete; with nothing posted since the last flush it returns at once. */
#ifndef RVX_SHMEM_SYNC_H
#define RVX_SHMEM_SYNC_H

RVX_COLD void rvx__sh_quiet_fail(rvx_status_t st)
{
    rvx__sh_fatal("shmem_quiet: a put or atomic since the last quiet failed: %s",
                  rvx_status_str(st));
}

/* rvx_worker_flush, which returns in line when nothing was posted since the last (gets and
 * fetching atomics are complete on return). Before shmem_init there is no worker and nothing to
 * complete. */
RVX_INLINE void shmem_quiet(void)
{
    rvx_status_t st;
    if (RVX_UNLIKELY(!rvx__sh.w)) return;
    st = rvx_worker_flush(rvx__sh.w);
    if (RVX_UNLIKELY(st != RVX_OK)) rvx__sh_quiet_fail(st);
}
static inline void shmem_fence(void) { rvx_compiler_barrier(); }
static inline void shmem_ctx_quiet(shmem_ctx_t ctx) { (void)ctx; shmem_quiet(); }
static inline void shmem_ctx_fence(shmem_ctx_t ctx) { (void)ctx; rvx_compiler_barrier(); }

/* ---- teams: what synchronization needs (team.h has the rest) --------------------------------- */

/* A team is start + i * stride (world PE numbers), i < size; each has a synchronization slot, a
 * range of words at the same offset in every member's heap. Its sync is a dissemination
 * barrier: in round r a member puts the sync's sequence number into word r of the member 2^r
 * after it and waits until its own word r has reached that number (only one member writes it,
 * with increasing numbers, so no reset is needed). */
struct rvx__sh_team {
    int      start, stride, size;
    int      my;       /* this PE's index, or -1: not a member */
    int      slot;
    uint64_t seq;
    long     cfg_num_contexts;
};

static inline volatile uint64_t *rvx__sh_slot(int slot)
{
    return (volatile uint64_t *)(rvx__sh.heap_base + (size_t)slot * RVX__SH_SLOT_WORDS * 8);
}

static inline int rvx__sh_team_pe(const rvx__sh_team_t *t, int i) { return t->start + i * t->stride; }

RVX_COLD void rvx__sh_team_sync(rvx__sh_team_t *t)
{
    uint64_t seq = ++t->seq;
    volatile uint64_t *w = rvx__sh_slot(t->slot);
    int r, d;
    for (r = 0, d = 1; d < t->size; r++, d <<= 1) {
        int to = rvx__sh_team_pe(t, (t->my + d) % t->size);
        int from = rvx__sh_team_pe(t, (t->my - d % t->size + t->size) % t->size), f;
        rvx__sh_putmem(to, (void *)(uintptr_t)&w[r], &seq, 8);
        while (__atomic_load_n(&w[r], __ATOMIC_ACQUIRE) < seq)
            if (RVX_UNLIKELY((f = rvx__sh_poll_from(from)) >= 0) &&
                __atomic_load_n(&w[r], __ATOMIC_ACQUIRE) < seq)
                rvx__sh_peer_gone(f);
    }
}

__attribute__((weak)) rvx__sh_team_t rvx__sh_team_world;
__attribute__((weak)) rvx__sh_team_t rvx__sh_team_shared;

static inline void shmem_barrier_all(void)
{
    shmem_quiet();
    rvx__sh_team_sync(&rvx__sh_team_world);
}
static inline void shmem_sync_all(void) { rvx__sh_team_sync(&rvx__sh_team_world); }

/* ---- wait and test --------------------------------------------------------------------------- */

RVX_COLD void rvx__sh_bad_cmp(int cmp) { rvx__sh_fatal("comparison %d is not a SHMEM_CMP_*", cmp); }

#define RVX__SH_CMP(a, cmp, b)                                                                     \
    ((cmp) == SHMEM_CMP_EQ ? (a) == (b) : (cmp) == SHMEM_CMP_NE ? (a) != (b)                       \
     : (cmp) == SHMEM_CMP_GT ? (a) > (b) : (cmp) == SHMEM_CMP_GE ? (a) >= (b)                      \
     : (cmp) == SHMEM_CMP_LT ? (a) < (b) : (a) <= (b))
#define RVX__SH_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define RVX__SH_CHECK_CMP(cmp) if (RVX_UNLIKELY((unsigned)(cmp) > SHMEM_CMP_LE)) rvx__sh_bad_cmp(cmp)

#define RVX__SH_WAIT_DEF(T, N)                                                                     \
    static inline int shmem_##N##_test(T *ivar, int cmp, T v)                                      \
    { RVX__SH_CHECK_CMP(cmp); rvx_progress(rvx__sh.w); return RVX__SH_CMP(RVX__SH_LOAD(ivar), cmp, v); } \
    static inline void shmem_##N##_wait_until(T *ivar, int cmp, T v)                               \
    { RVX__SH_CHECK_CMP(cmp); while (!RVX__SH_CMP(RVX__SH_LOAD(ivar), cmp, v)) rvx__sh_poll(); }  \
    static inline void shmem_##N##_wait(T *ivar, T v)                                              \
    { shmem_##N##_wait_until(ivar, SHMEM_CMP_NE, v); }                                             \
    /* vector forms: values[i] (vals != NULL) or v for every i */                                  \
    static inline int rvx__sh_##N##_ok(T *iv, size_t i, const int *st, int cmp, T v, const T *vals) \
    { if (st && st[i]) return -1; return RVX__SH_CMP(RVX__SH_LOAD(&iv[i]), cmp, vals ? vals[i] : v); } \
    static inline int rvx__sh_##N##_test_all(T *iv, size_t n, const int *st, int cmp, T v,         \
                                             const T *vals)                                        \
    { size_t i; RVX__SH_CHECK_CMP(cmp); rvx_progress(rvx__sh.w);                                   \
      for (i = 0; i < n; i++) if (!rvx__sh_##N##_ok(iv, i, st, cmp, v, vals)) return 0;            \
      return 1; }                                                                                  \
    static inline size_t rvx__sh_##N##_test_any(T *iv, size_t n, const int *st, int cmp, T v,      \
                                                const T *vals)                                     \
    { size_t i; RVX__SH_CHECK_CMP(cmp); rvx_progress(rvx__sh.w);                                   \
      for (i = 0; i < n; i++) if (rvx__sh_##N##_ok(iv, i, st, cmp, v, vals) == 1) return i;        \
      return SIZE_MAX; }                                                                           \
    static inline size_t rvx__sh_##N##_test_some(T *iv, size_t n, size_t *idx, const int *st,      \
                                                 int cmp, T v, const T *vals)                      \
    { size_t i, k = 0; RVX__SH_CHECK_CMP(cmp); rvx_progress(rvx__sh.w);                            \
      for (i = 0; i < n; i++) if (rvx__sh_##N##_ok(iv, i, st, cmp, v, vals) == 1) idx[k++] = i;    \
      return k; }                                                                                  \
    static inline int rvx__sh_##N##_live(size_t n, const int *st)                                 \
    { size_t i; for (i = 0; i < n; i++) if (!st || !st[i]) return 1; return 0; }                   \
    static inline int shmem_##N##_test_all(T *iv, size_t n, const int *st, int cmp, T v)          \
    { return rvx__sh_##N##_test_all(iv, n, st, cmp, v, NULL); }                                    \
    static inline size_t shmem_##N##_test_any(T *iv, size_t n, const int *st, int cmp, T v)       \
    { return rvx__sh_##N##_test_any(iv, n, st, cmp, v, NULL); }                                    \
    static inline size_t shmem_##N##_test_some(T *iv, size_t n, size_t *idx, const int *st,       \
                                               int cmp, T v)                                      \
    { return rvx__sh_##N##_test_some(iv, n, idx, st, cmp, v, NULL); }                              \
    static inline int shmem_##N##_test_all_vector(T *iv, size_t n, const int *st, int cmp,        \
                                                  T *vals)                                        \
    { return rvx__sh_##N##_test_all(iv, n, st, cmp, 0, vals); }                                    \
    static inline size_t shmem_##N##_test_any_vector(T *iv, size_t n, const int *st, int cmp,     \
                                                     T *vals)                                     \
    { return rvx__sh_##N##_test_any(iv, n, st, cmp, 0, vals); }                                    \
    static inline size_t shmem_##N##_test_some_vector(T *iv, size_t n, size_t *idx,               \
                                                      const int *st, int cmp, T *vals)            \
    { return rvx__sh_##N##_test_some(iv, n, idx, st, cmp, 0, vals); }                              \
    static inline void shmem_##N##_wait_until_all(T *iv, size_t n, const int *st, int cmp, T v)   \
    { while (!rvx__sh_##N##_test_all(iv, n, st, cmp, v, NULL)) rvx__sh_poll(); }                   \
    static inline size_t shmem_##N##_wait_until_any(T *iv, size_t n, const int *st, int cmp, T v) \
    { size_t i; if (!rvx__sh_##N##_live(n, st)) return SIZE_MAX;                                   \
      while ((i = rvx__sh_##N##_test_any(iv, n, st, cmp, v, NULL)) == SIZE_MAX) rvx__sh_poll();    \
      return i; }                                                                                  \
    static inline size_t shmem_##N##_wait_until_some(T *iv, size_t n, size_t *idx, const int *st, \
                                                     int cmp, T v)                                \
    { size_t k; if (!rvx__sh_##N##_live(n, st)) return 0;                                          \
      while ((k = rvx__sh_##N##_test_some(iv, n, idx, st, cmp, v, NULL)) == 0) rvx__sh_poll();     \
      return k; }                                                                                  \
    static inline void shmem_##N##_wait_until_all_vector(T *iv, size_t n, const int *st, int cmp, \
                                                         T *vals)                                 \
    { while (!rvx__sh_##N##_test_all(iv, n, st, cmp, 0, vals)) rvx__sh_poll(); }                   \
    static inline size_t shmem_##N##_wait_until_any_vector(T *iv, size_t n, const int *st,        \
                                                           int cmp, T *vals)                      \
    { size_t i; if (!rvx__sh_##N##_live(n, st)) return SIZE_MAX;                                   \
      while ((i = rvx__sh_##N##_test_any(iv, n, st, cmp, 0, vals)) == SIZE_MAX) rvx__sh_poll();    \
      return i; }                                                                                  \
    static inline size_t shmem_##N##_wait_until_some_vector(T *iv, size_t n, size_t *idx,         \
                                                            const int *st, int cmp, T *vals)      \
    { size_t k; if (!rvx__sh_##N##_live(n, st)) return 0;                                          \
      while ((k = rvx__sh_##N##_test_some(iv, n, idx, st, cmp, 0, vals)) == 0) rvx__sh_poll();     \
      return k; }
RVX__SH_P2P_TYPES(RVX__SH_WAIT_DEF)

static inline void shmem_wait_until(long *ivar, int cmp, long v) { shmem_long_wait_until(ivar, cmp, v); }
static inline void shmem_wait(long *ivar, long v) { shmem_long_wait(ivar, v); }

static inline uint64_t shmem_signal_wait_until(uint64_t *sig, int cmp, uint64_t v)
{
    uint64_t x;
    RVX__SH_CHECK_CMP(cmp);
    while (x = RVX__SH_LOAD(sig), !RVX__SH_CMP(x, cmp, v)) rvx__sh_poll();
    return x;
}

/* ---- locks: a ticket lock in the lock word on PE 0 (next ticket above, now serving below),
 * every access an atomic there; clear_lock completes the holder's updates first ------------- */

static inline void shmem_set_lock(long *lock)
{
    uint64_t v = rvx__sh_amo(0, lock, 8, RVX_AMO_ADD, (uint64_t)1 << 32, 0, 1);
    uint32_t ticket = (uint32_t)(v >> 32);
    while ((uint32_t)v != ticket) {
        rvx__sh_poll();
        v = rvx__sh_amo(0, lock, 8, RVX_AMO_GET, 0, 0, 1);
    }
}

static inline void shmem_clear_lock(long *lock)
{
    uint64_t v;
    shmem_quiet();
    /* serving + 1 within the low half: a CAS, so that its wrap never carries into the tickets */
    v = rvx__sh_amo(0, lock, 8, RVX_AMO_GET, 0, 0, 1);
    for (;;) {
        uint64_t n = (v & ~(uint64_t)0xffffffffu) | (uint32_t)((uint32_t)v + 1u);
        uint64_t old = rvx__sh_amo(0, lock, 8, RVX_AMO_CAS, n, v, 1);
        if (old == v) break;
        v = old;
    }
}

static inline int shmem_test_lock(long *lock)
{
    uint64_t v = rvx__sh_amo(0, lock, 8, RVX_AMO_GET, 0, 0, 1);
    if ((uint32_t)(v >> 32) != (uint32_t)v) return 1;
    return rvx__sh_amo(0, lock, 8, RVX_AMO_CAS, v + ((uint64_t)1 << 32), v, 1) == v ? 0 : 1;
}

#endif /* RVX_SHMEM_SYNC_H */
