/* rvx/shmem/team.h: teams, contexts, finalize and global_exit, the collectives on teams and the
 * deprecated active-set collectives with pSync.
 *
 * Collectives pull: every member gets what it needs from the others' symmetric source with
 * rvx_get, between two synchronizations of the team (the first: every source is ready; the
 * second: nobody changes a source another still reads). Reductions combine in team order on
 * every PE, so floating-point results are the same everywhere, and go through a private buffer,
 * so dest may be source.
 *
 * A new team's synchronization slot is the lowest slot free on every member of the parent (an
 * AND of the members' free masks, read with gets): disjoint teams made by one split (split_2d's
 * rows) share it. */
#ifndef RVX_SHMEM_TEAM_H
#define RVX_SHMEM_TEAM_H

typedef rvx__sh_team_t *shmem_team_t;
typedef struct {
    int num_contexts;
} shmem_team_config_t;

#define SHMEM_TEAM_WORLD   ((shmem_team_t)&rvx__sh_team_world)
#define SHMEM_TEAM_SHARED  ((shmem_team_t)&rvx__sh_team_shared)
#define SHMEM_TEAM_INVALID ((shmem_team_t)NULL)

/* SHMEM_TEAM_SHARED: the PEs whose symmetric heap shmem_ptr reaches from here (core.h), when
 * they are a strided set as a team must be (every PE on shm, the PEs of this node in the pair
 * with ranks placed by node); else, and on the NIC alone, this PE. Every member finds the same
 * set: reaching a peer's heap is mutual. */
RVX_COLD void rvx__sh_team_shared_set(rvx__sh_team_t *s)
{
    int pe, n = 0, first = -1, stride = 1;
    for (pe = 0; pe < rvx__sh.npes; pe++) {
        if (!shmem_ptr((void *)rvx__sh.heap_base, pe)) continue;
        if (n == 0) first = pe;
        else if (n == 1) stride = pe - first;
        if (pe != first + n * stride) { n = 0; break; } /* not strided */
        n++;
    }
    if (n == 0) { /* not strided: this PE alone (it reaches itself, so a strided set has it) */
        first = rvx__sh.me;
        stride = 1;
        n = 1;
    }
    s->start = first;
    s->stride = stride;
    s->size = n;
    s->my = (rvx__sh.me - first) / stride;
}

RVX_COLD void rvx__sh_teams_init(void)
{
    rvx__sh_team_t *w = &rvx__sh_team_world, *s = &rvx__sh_team_shared;
    memset(w, 0, sizeof(*w));
    w->start = 0;
    w->stride = 1;
    w->size = rvx__sh.npes;
    w->my = rvx__sh.me;
    w->slot = 0;
    memset(s, 0, sizeof(*s));
    rvx__sh_team_shared_set(s);
    s->slot = 1;
}

/* ---- synchronization of a team or of an active set ---------------------------------------------
 * An active set's pSync is its members' counters: in round r a member adds 1 to word r of the
 * member 2^r after it and waits for its own word r to be positive, then takes 1 off it (atomics
 * through the transport, so they are atomic with the NIC's). Arrivals are counted, so a later
 * call's arrival never spoils this one, and the words are back at SHMEM_SYNC_VALUE at the end. */
RVX_COLD void rvx__sh_psync(const rvx__sh_team_t *t, long *psync)
{
    int r, d;
    for (r = 0, d = 1; d < t->size; r++, d <<= 1) {
        int to = rvx__sh_team_pe(t, (t->my + d) % t->size);
        rvx__sh_amo(to, &psync[r], 8, RVX_AMO_ADD, 1, 0, 0);
        while (__atomic_load_n(&psync[r], __ATOMIC_ACQUIRE) <= 0) rvx__sh_poll();
        /* fetching: done before the next load of the word (a plain atomic may still be posted) */
        (void)rvx__sh_amo(rvx__sh.me, &psync[r], 8, RVX_AMO_ADD, (uint64_t)-1, 0, 1);
    }
}

static inline void rvx__sh_sync(rvx__sh_team_t *t, long *psync)
{
    if (psync) rvx__sh_psync(t, psync);
    else rvx__sh_team_sync(t);
}

/* ---- teams ---------------------------------------------------------------------------------- */

static inline int shmem_team_my_pe(shmem_team_t t) { return t ? t->my : -1; }
static inline int shmem_team_n_pes(shmem_team_t t) { return t ? t->size : -1; }

static inline int shmem_team_get_config(shmem_team_t t, long mask, shmem_team_config_t *cfg)
{
    if (!t || !cfg) return -1;
    if (mask & SHMEM_TEAM_NUM_CONTEXTS) cfg->num_contexts = (int)t->cfg_num_contexts;
    return 0;
}

static inline int shmem_team_translate_pe(shmem_team_t src, int pe, shmem_team_t dst)
{
    int w, k;
    if (!src || !dst || pe < 0 || pe >= src->size) return -1;
    w = rvx__sh_team_pe(src, pe) - dst->start;
    if (w < 0 || w % dst->stride) return -1;
    k = w / dst->stride;
    return k < dst->size ? k : -1;
}

static inline int shmem_team_sync(shmem_team_t t)
{
    if (!t || t->my < 0) return -1;
    rvx__sh_team_sync(t);
    return 0;
}

/* The lowest slot free on every member of parent (collective over parent), or -1. */
RVX_COLD int rvx__sh_common_slot(rvx__sh_team_t *parent)
{
    volatile uint64_t *mine = rvx__sh_slot(parent->slot) + RVX__SH_SCRATCH + 1;
    uint64_t all = ~(uint64_t)0, v;
    int i;
    *mine = rvx__sh.slots_free;
    rvx__sh_team_sync(parent);
    for (i = 0; i < parent->size; i++) {
        rvx__sh_getmem(rvx__sh_team_pe(parent, i), &v, (const void *)(uintptr_t)mine, 8);
        all &= v;
    }
    rvx__sh_team_sync(parent);
    return all ? __builtin_ctzll(all) : -1;
}

/* Collective over parent; this PE's new team is parent's start + k * stride, k < size (parent
 * numbering), if it is among them (member != 0). */
RVX_COLD int rvx__sh_split(rvx__sh_team_t *parent, int start, int stride, int size, int member,
                           const shmem_team_config_t *cfg, long mask, shmem_team_t *out)
{
    int slot = rvx__sh_common_slot(parent);
    rvx__sh_team_t *t;
    *out = SHMEM_TEAM_INVALID;
    if (slot < 0) return -1;
    if (!member) return 0;
    t = (rvx__sh_team_t *)calloc(1, sizeof(*t));
    if (!t) rvx__sh_fatal("out of memory");
    t->start = rvx__sh_team_pe(parent, start);
    t->stride = size > 1 ? stride * parent->stride : 1;
    t->size = size;
    t->my = (parent->my - start) / (size > 1 ? stride : 1);
    t->slot = slot;
    if (cfg && (mask & SHMEM_TEAM_NUM_CONTEXTS)) t->cfg_num_contexts = cfg->num_contexts;
    rvx__sh.slots_free &= ~((uint64_t)1 << slot);
    *out = t;
    return 0;
}

static inline int shmem_team_split_strided(shmem_team_t parent, int start, int stride, int size,
                                           const shmem_team_config_t *cfg, long mask,
                                           shmem_team_t *out)
{
    int off, member;
    if (!out) return -1;
    *out = SHMEM_TEAM_INVALID;
    if (!parent || parent->my < 0 || start < 0 || size < 1 || (size > 1 && stride < 1) ||
        start + (size - 1) * (size > 1 ? stride : 0) >= parent->size)
        return -1;
    off = parent->my - start;
    member = off >= 0 && (size == 1 ? off == 0 : off % stride == 0 && off / stride < size);
    return rvx__sh_split(parent, start, stride, size, member, cfg, mask, out);
}

static inline int shmem_team_split_2d(shmem_team_t parent, int xrange,
                                      const shmem_team_config_t *xcfg, long xmask,
                                      shmem_team_t *xteam, const shmem_team_config_t *ycfg,
                                      long ymask, shmem_team_t *yteam)
{
    int n, row, col, rc;
    if (!xteam || !yteam) return -1;
    *xteam = *yteam = SHMEM_TEAM_INVALID;
    if (!parent || parent->my < 0 || xrange < 1) return -1;
    n = parent->size;
    if (xrange > n) xrange = n;
    row = parent->my / xrange;
    col = parent->my % xrange;
    rc = rvx__sh_split(parent, row * xrange, 1,
                       n - row * xrange < xrange ? n - row * xrange : xrange, 1, xcfg, xmask, xteam);
    if (rc) return rc;
    return rvx__sh_split(parent, col, xrange, (n - col + xrange - 1) / xrange, 1, ycfg, ymask,
                         yteam);
}

static inline void shmem_team_destroy(shmem_team_t t)
{
    volatile uint64_t *w;
    int i;
    if (!t || t == SHMEM_TEAM_WORLD || t == SHMEM_TEAM_SHARED) return;
    rvx__sh_team_sync(t);
    /* every word of this slot that a member wrote arrived before the sync ended: clean for the
     * next team that takes the slot */
    w = rvx__sh_slot(t->slot);
    for (i = 0; i < RVX__SH_SLOT_WORDS; i++) w[i] = 0;
    rvx__sh.slots_free |= (uint64_t)1 << t->slot;
    free(t);
}

static inline void *shmem_team_ptr(shmem_team_t t, const void *dest, int pe)
{
    if (!t || pe < 0 || pe >= t->size) return NULL;
    return shmem_ptr(dest, rvx__sh_team_pe(t, pe));
}

/* ---- contexts: handles over the one worker ------------------------------------------------- */

static inline int shmem_ctx_create(long options, shmem_ctx_t *ctx)
{
    shmem_ctx_t c = (shmem_ctx_t)malloc(sizeof(*c));
    if (!c) return -1;
    c->start = 0;
    c->stride = 1;
    c->team = SHMEM_TEAM_WORLD;
    c->options = options;
    *ctx = c;
    return 0;
}

static inline int shmem_team_create_ctx(shmem_team_t t, long options, shmem_ctx_t *ctx)
{
    shmem_ctx_t c;
    if (!t || t->my < 0 || !ctx) return -1;
    c = (shmem_ctx_t)malloc(sizeof(*c));
    if (!c) return -1;
    c->start = t->start;
    c->stride = t->stride;
    c->team = t;
    c->options = options;
    *ctx = c;
    return 0;
}

static inline void shmem_ctx_destroy(shmem_ctx_t ctx)
{
    if (!ctx || ctx == SHMEM_CTX_DEFAULT) return;
    shmem_quiet();
    free(ctx);
}

static inline int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team)
{
    if (!team) return -1;
    if (!ctx) { *team = SHMEM_TEAM_INVALID; return -1; }
    *team = ctx == SHMEM_CTX_DEFAULT || !ctx->team ? SHMEM_TEAM_WORLD : ctx->team;
    return 0;
}

/* ---- end ---------------------------------------------------------------------------------------- */

static inline void shmem_finalize(void)
{
    rvx__sh_state_t *S = &rvx__sh;
    int pe;
    if (!S->inited) return;
    shmem_barrier_all();
    shmem_quiet(); /* the barrier's own puts: delivered before the endpoints go */
    for (pe = 0; pe < S->npes; pe++) {
        rvx_rkey_release(&S->peers[pe].heap_rkey);
        if (S->data_mem) rvx_rkey_release(&S->peers[pe].data_rkey);
    }
    rvx_worker_destroy(S->w);
    S->w = NULL; /* shmem_quiet from here on has nothing to complete */
    rvx_mem_dereg(S->heap_mem);
#if RVX__SH_SAME_VA
    munmap((void *)S->heap_base, S->heap_len);
#endif
    S->heap_base = UINTPTR_MAX;
    if (S->data_mem) rvx_mem_dereg(S->data_mem);
    rvx_finalize(S->ctx);
    free(S->peers);
    S->peers = NULL;
    S->heap_len = 0;
    S->data_len = 0;
    S->inited = 0;
    S->finalized = 1;
}

/* A program that returns from main without shmem_finalize finalizes at exit. */
RVX_COLD void rvx__sh_atexit(void) { shmem_finalize(); }

/* Ends this PE at once; the launcher ends the others (rvxrun: docs/launching.md), and any PE
 * waiting on this one finds it failed within its next few thousand polls. */
static inline void shmem_global_exit(int status)
{
    fflush(NULL);
    _exit(status);
}

/* ---- collective cores: (team or active set, its pSync or NULL) ------------------------------- */

RVX_COLD int rvx__sh_bcast(rvx__sh_team_t *t, long *ps, void *dest, const void *src, size_t nb,
                           int root, int update_root)
{
    if (t->my < 0 || root < 0 || root >= t->size) return -1;
    rvx__sh_sync(t, ps);
    if (t->my != root) rvx__sh_getmem(rvx__sh_team_pe(t, root), dest, src, nb);
    else if (update_root && dest != src) memmove(dest, src, nb);
    rvx__sh_sync(t, ps);
    return 0;
}

RVX_COLD int rvx__sh_fcollect(rvx__sh_team_t *t, long *ps, void *dest, const void *src, size_t nb)
{
    int i;
    if (t->my < 0) return -1;
    rvx__sh_sync(t, ps);
    for (i = 0; i < t->size; i++) {
        if (i == t->my) memmove((char *)dest + (size_t)i * nb, src, nb);
        else rvx__sh_getmem(rvx__sh_team_pe(t, i), (char *)dest + (size_t)i * nb, src, nb);
    }
    rvx__sh_sync(t, ps);
    return 0;
}

/* Each member's size is read from its scratch word: the team's slot, or pSync's last word. */
RVX_COLD int rvx__sh_collect(rvx__sh_team_t *t, long *ps, void *dest, const void *src, size_t nb)
{
    volatile uint64_t *mine = ps ? (volatile uint64_t *)&ps[SHMEM_COLLECT_SYNC_SIZE - 1]
                                 : rvx__sh_slot(t->slot) + RVX__SH_SCRATCH;
    size_t off = 0;
    uint64_t n;
    int i;
    if (t->my < 0) return -1;
    *mine = nb;
    rvx__sh_sync(t, ps);
    for (i = 0; i < t->size; i++) {
        if (i == t->my) {
            memmove((char *)dest + off, src, nb);
            n = nb;
        } else {
            rvx__sh_getmem(rvx__sh_team_pe(t, i), &n, (const void *)(uintptr_t)mine, 8);
            rvx__sh_getmem(rvx__sh_team_pe(t, i), (char *)dest + off, src, n);
        }
        off += n;
    }
    rvx__sh_sync(t, ps);
    if (ps) *mine = SHMEM_SYNC_VALUE;
    return 0;
}

RVX_COLD int rvx__sh_alltoalls(rvx__sh_team_t *t, long *ps, void *dest, const void *src,
                               ptrdiff_t dst, ptrdiff_t sst, size_t n, size_t esz)
{
    int i;
    if (t->my < 0) return -1;
    rvx__sh_sync(t, ps);
    for (i = 0; i < t->size; i++)
        rvx__sh_iget(rvx__sh_team_pe(t, i), (char *)dest + (ptrdiff_t)i * (ptrdiff_t)n * dst * (ptrdiff_t)esz,
                     (const char *)src + (ptrdiff_t)t->my * (ptrdiff_t)n * sst * (ptrdiff_t)esz,
                     dst, sst, n, esz);
    rvx__sh_sync(t, ps);
    return 0;
}

RVX_COLD int rvx__sh_alltoall(rvx__sh_team_t *t, long *ps, void *dest, const void *src, size_t nb)
{
    int i;
    if (t->my < 0) return -1;
    rvx__sh_sync(t, ps);
    for (i = 0; i < t->size; i++)
        rvx__sh_getmem(rvx__sh_team_pe(t, i), (char *)dest + (size_t)i * nb,
                       (const char *)src + (size_t)t->my * nb, nb);
    rvx__sh_sync(t, ps);
    return 0;
}

/* Reductions: each (type, operation) has its own loop (RVX__SH_COMB below), around these cold
 * halves; members are combined in team order. */
RVX_COLD void *rvx__sh_red_buf(size_t nb)
{
    void *p = malloc(nb ? nb : 1);
    if (!p) rvx__sh_fatal("out of memory for a reduction of %zu bytes", nb);
    return p;
}

/* Member i's nb bytes of the source into `to`. */
RVX_COLD void rvx__sh_red_take(rvx__sh_team_t *t, int i, void *to, const void *src, size_t nb)
{
    if (i == t->my) memcpy(to, src, nb);
    else rvx__sh_getmem(rvx__sh_team_pe(t, i), to, src, nb);
}

/* ---- team collectives, typed and mem forms --------------------------------------------------- */

#define RVX__SH_COLL_DEF(T, N)                                                                     \
    static inline int shmem_##N##_broadcast(shmem_team_t t, T *d, const T *s, size_t n, int root) \
    { return t ? rvx__sh_bcast(t, NULL, d, s, n * sizeof(T), root, 1) : -1; }                      \
    static inline int shmem_##N##_collect(shmem_team_t t, T *d, const T *s, size_t n)             \
    { return t ? rvx__sh_collect(t, NULL, d, s, n * sizeof(T)) : -1; }                             \
    static inline int shmem_##N##_fcollect(shmem_team_t t, T *d, const T *s, size_t n)            \
    { return t ? rvx__sh_fcollect(t, NULL, d, s, n * sizeof(T)) : -1; }                            \
    static inline int shmem_##N##_alltoall(shmem_team_t t, T *d, const T *s, size_t n)            \
    { return t ? rvx__sh_alltoall(t, NULL, d, s, n * sizeof(T)) : -1; }                            \
    static inline int shmem_##N##_alltoalls(shmem_team_t t, T *d, const T *s, ptrdiff_t dst,      \
                                            ptrdiff_t sst, size_t n)                              \
    { return t ? rvx__sh_alltoalls(t, NULL, d, s, dst, sst, n, sizeof(T)) : -1; }
RVX__SH_RMA_TYPES(RVX__SH_COLL_DEF)

static inline int shmem_broadcastmem(shmem_team_t t, void *d, const void *s, size_t n, int root)
{ return t ? rvx__sh_bcast(t, NULL, d, s, n, root, 1) : -1; }
static inline int shmem_collectmem(shmem_team_t t, void *d, const void *s, size_t n)
{ return t ? rvx__sh_collect(t, NULL, d, s, n) : -1; }
static inline int shmem_fcollectmem(shmem_team_t t, void *d, const void *s, size_t n)
{ return t ? rvx__sh_fcollect(t, NULL, d, s, n) : -1; }
static inline int shmem_alltoallmem(shmem_team_t t, void *d, const void *s, size_t n)
{ return t ? rvx__sh_alltoall(t, NULL, d, s, n) : -1; }
static inline int shmem_alltoallsmem(shmem_team_t t, void *d, const void *s, ptrdiff_t dst,
                                     ptrdiff_t sst, size_t n)
{ return t ? rvx__sh_alltoalls(t, NULL, d, s, dst, sst, n, 1) : -1; }

/* reductions: one combine function per (type, operation) */
#define RVX__SH_OP_and(a, b)  ((a) & (b))
#define RVX__SH_OP_or(a, b)   ((a) | (b))
#define RVX__SH_OP_xor(a, b)  ((a) ^ (b))
#define RVX__SH_OP_max(a, b)  ((a) > (b) ? (a) : (b))
#define RVX__SH_OP_min(a, b)  ((a) < (b) ? (a) : (b))
#define RVX__SH_OP_sum(a, b)  ((a) + (b))
#define RVX__SH_OP_prod(a, b) ((a) * (b))

#define RVX__SH_COMB(T, N, OP)                                                                     \
    static inline int rvx__sh_red_##N##_##OP(rvx__sh_team_t *t, long *ps, T *d, const T *s,       \
                                             size_t n)                                             \
    { size_t nb = n * sizeof(T), j; T *a, *b; int i;                                               \
      if (t->my < 0) return -1;                                                                    \
      a = (T *)rvx__sh_red_buf(nb); b = (T *)rvx__sh_red_buf(nb);                                  \
      rvx__sh_sync(t, ps);                                                                         \
      for (i = 0; i < t->size; i++) {                                                              \
          rvx__sh_red_take(t, i, i ? b : a, s, nb);                                                \
          if (i) for (j = 0; j < n; j++) a[j] = RVX__SH_OP_##OP(a[j], b[j]);                       \
      }                                                                                            \
      rvx__sh_sync(t, ps);                                                                         \
      memcpy(d, a, nb); free(a); free(b); return 0; }
#define RVX__SH_RED_ONE(T, N, OP)                                                                  \
    RVX__SH_COMB(T, N, OP)                                                                         \
    static inline int shmem_##N##_##OP##_reduce(shmem_team_t t, T *d, const T *s, size_t n)       \
    { return t ? rvx__sh_red_##N##_##OP(t, NULL, d, s, n) : -1; }
#define RVX__SH_RED_BIT_DEF(T, N) RVX__SH_RED_ONE(T, N, and) RVX__SH_RED_ONE(T, N, or) RVX__SH_RED_ONE(T, N, xor)
#define RVX__SH_RED_MM_DEF(T, N) RVX__SH_RED_ONE(T, N, max) RVX__SH_RED_ONE(T, N, min)
#define RVX__SH_RED_AR_DEF(T, N) RVX__SH_RED_ONE(T, N, sum) RVX__SH_RED_ONE(T, N, prod)
RVX__SH_RED_BIT(RVX__SH_RED_BIT_DEF)
RVX__SH_RED_MINMAX(RVX__SH_RED_MM_DEF)
RVX__SH_RED_ARITH(RVX__SH_RED_AR_DEF)

/* ---- the deprecated active-set forms (PE_start, logPE_stride, PE_size, pSync) ---------------- */

static inline rvx__sh_team_t rvx__sh_aset(int start, int logstride, int size)
{
    rvx__sh_team_t t;
    int off = rvx__sh.me - start, stride = 1 << logstride;
    memset(&t, 0, sizeof(t));
    t.start = start;
    t.stride = stride;
    t.size = size;
    t.my = off >= 0 && off % stride == 0 && off / stride < size ? off / stride : -1;
    if (t.my < 0 || start < 0 || size < 1 || start + (size - 1) * stride >= rvx__sh.npes)
        rvx__sh_fatal("active set (start %d, log stride %d, size %d) does not hold this PE or "
                      "leaves the job", start, logstride, size);
    return t;
}

static inline void shmem_barrier(int start, int logstride, int size, long *psync)
{
    rvx__sh_team_t t = rvx__sh_aset(start, logstride, size);
    shmem_quiet();
    rvx__sh_psync(&t, psync);
}

static inline void shmem_sync(int start, int logstride, int size, long *psync)
{
    rvx__sh_team_t t = rvx__sh_aset(start, logstride, size);
    rvx__sh_psync(&t, psync);
}

#define RVX__SH_ASET_SIZED(BITS, BYTES)                                                            \
    static inline void shmem_broadcast##BITS(void *d, const void *s, size_t n, int root,          \
                                             int start, int ls, int size, long *ps)               \
    { rvx__sh_team_t t = rvx__sh_aset(start, ls, size);                                            \
      rvx__sh_bcast(&t, ps, d, s, n * BYTES, root, 0); }                                           \
    static inline void shmem_collect##BITS(void *d, const void *s, size_t n, int start, int ls,   \
                                           int size, long *ps)                                    \
    { rvx__sh_team_t t = rvx__sh_aset(start, ls, size); rvx__sh_collect(&t, ps, d, s, n * BYTES); } \
    static inline void shmem_fcollect##BITS(void *d, const void *s, size_t n, int start, int ls,  \
                                            int size, long *ps)                                   \
    { rvx__sh_team_t t = rvx__sh_aset(start, ls, size); rvx__sh_fcollect(&t, ps, d, s, n * BYTES); } \
    static inline void shmem_alltoall##BITS(void *d, const void *s, size_t n, int start, int ls,  \
                                            int size, long *ps)                                   \
    { rvx__sh_team_t t = rvx__sh_aset(start, ls, size); rvx__sh_alltoall(&t, ps, d, s, n * BYTES); } \
    static inline void shmem_alltoalls##BITS(void *d, const void *s, ptrdiff_t dst, ptrdiff_t sst, \
                                             size_t n, int start, int ls, int size, long *ps)     \
    { rvx__sh_team_t t = rvx__sh_aset(start, ls, size);                                            \
      rvx__sh_alltoalls(&t, ps, d, s, dst, sst, n, BYTES); }
RVX__SH_ASET_SIZED(32, 4)
RVX__SH_ASET_SIZED(64, 8)

/* TYPE_OP_to_all: pWrk is not needed (reductions use a private buffer) */
#define RVX__SH_TOALL(T, N, OP)                                                                    \
    static inline void shmem_##N##_##OP##_to_all(T *d, const T *s, int n, int start, int ls,      \
                                                 int size, T *wrk, long *ps)                      \
    { rvx__sh_team_t t = rvx__sh_aset(start, ls, size); (void)wrk;                                 \
      rvx__sh_red_##N##_##OP(&t, ps, d, s, (size_t)n); }
#define RVX__SH_TOALL_BIT(T, N) RVX__SH_COMB(T, N, and) RVX__SH_COMB(T, N, or) RVX__SH_COMB(T, N, xor) \
    RVX__SH_TOALL(T, N, and) RVX__SH_TOALL(T, N, or) RVX__SH_TOALL(T, N, xor)
#define RVX__SH_TOALL_MM(T, N) RVX__SH_TOALL(T, N, max) RVX__SH_TOALL(T, N, min)
#define RVX__SH_TOALL_AR(T, N) RVX__SH_TOALL(T, N, sum) RVX__SH_TOALL(T, N, prod)
RVX__SH_TOALL_BIT(short, short) RVX__SH_TOALL_BIT(int, int) RVX__SH_TOALL_BIT(long, long)
RVX__SH_TOALL_BIT(long long, longlong)
RVX__SH_TOALL_MM(short, short) RVX__SH_TOALL_MM(int, int) RVX__SH_TOALL_MM(long, long)
RVX__SH_TOALL_MM(long long, longlong) RVX__SH_TOALL_MM(float, float)
RVX__SH_TOALL_MM(double, double) RVX__SH_TOALL_MM(long double, longdouble)
RVX__SH_TOALL_AR(short, short) RVX__SH_TOALL_AR(int, int) RVX__SH_TOALL_AR(long, long)
RVX__SH_TOALL_AR(long long, longlong) RVX__SH_TOALL_AR(float, float)
RVX__SH_TOALL_AR(double, double) RVX__SH_TOALL_AR(long double, longdouble)
RVX__SH_TOALL_AR(float _Complex, complexf) RVX__SH_TOALL_AR(double _Complex, complexd)

/* ---- the profiling control and the deprecated cache routines: nothing to do ------------------ */
static inline void shmem_pcontrol(const int level, ...) { (void)level; }
static inline void shmem_set_cache_inv(void) {}
static inline void shmem_set_cache_line_inv(void *dest) { (void)dest; }
static inline void shmem_clear_cache_inv(void) {}
static inline void shmem_clear_cache_line_inv(void *dest) { (void)dest; }
static inline void shmem_udcflush(void) {}
static inline void shmem_udcflush_line(void *dest) { (void)dest; }

#endif /* RVX_SHMEM_TEAM_H */
