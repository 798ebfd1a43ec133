/* rvx/shmem/core.h: the OpenSHMEM state, setup and query, the symmetric heap and static data,
 * and the resolution of a symmetric address to (endpoint, key, remote address).
 *
 * One rvx context and one worker per process; an endpoint to every PE (itself included: a PE's
 * own symmetric memory is reached through the transport too, so that its atomics are atomic with
 * the NIC's). Two symmetric regions per PE, their keys exchanged once with rvx_allgather:
 *  - the heap: one rvx_mem_alloc region (SHMEM_SYMMETRIC_SIZE bytes), whose first
 *    RVX__SH_SYS_LEN bytes hold the teams' synchronization words; allocations are made by the
 *    same deterministic first-fit on every PE, so an object has the same offset everywhere;
 *  - the executable's data and bss (global and static variables): the same offset from the
 *    segment's start on every PE (one executable). On shm and the pair, the segment is moved
 *    onto shared memory at init (an rvx_mem_alloc region mapped a second time over it), so peers
 *    map it and atomics on static variables are CPU or NIC atomics like the heap's; on rc_mlx5
 *    and dc_mlx5 it is registered in place (rvx_mem_reg).
 * A remote address is the peer's region base plus the local offset: one subtraction, one
 * compare, one add for the heap; the data segment takes an out-of-line branch. On rc_mlx5 and
 * dc_mlx5 alone the heap lies at one address on every PE, so a heap address is its own remote
 * address and one compare tells it from a static variable's (RVX__SH_SAME_VA).
 *
 * The state is one weak global, so several translation units of one program share it. */
#ifndef RVX_SHMEM_CORE_H
#define RVX_SHMEM_CORE_H

#include <stdio.h>
#include <errno.h>

#ifndef RVX_SHMEM_HEAP_DEFAULT
#define RVX_SHMEM_HEAP_DEFAULT (32UL << 20) /* SHMEM_SYMMETRIC_SIZE overrides it at run time */
#endif
#define RVX__SH_NSLOTS   64   /* team synchronization slots (teams alive at once, world included) */
#define RVX__SH_SLOT_WORDS 64 /* per slot: 40 dissemination rounds, then scratch words */
#define RVX__SH_SCRATCH  48   /* first scratch word of a slot */
#define RVX__SH_SYS_LEN  ((size_t)RVX__SH_NSLOTS * RVX__SH_SLOT_WORDS * 8)

/* shm alone: every PE's heap is mapped in this process (rvx_rkey_ptr), so a put to it is a copy
 * by this CPU, as rvx_put on shm is, with the address translated once instead of twice. */
#define RVX__SH_MAPPED (RVX_TL == RVX_TL_SHM && !RVX_PAIR)

/* rc_mlx5 or dc_mlx5 alone: every PE maps its heap at one address, above its data segment
 * (rvx__sh_heap_map). Below the heap is the data segment's cold path; above the heap's end
 * nothing is symmetric, and the target's NIC refuses such an access (a remote access error at
 * the call or at the next quiet), as it refuses one that runs past the end. */
#define RVX__SH_SAME_VA ((RVX_TL == RVX_TL_RC_MLX5 || RVX_TL == RVX_TL_DC_MLX5) && !RVX_PAIR)

/* Where a PE's symmetric memory is, seen from here: what every put reads. Aligned to 64 bytes,
 * so the array is indexed by a shift (128 bytes a PE on shm and rc_mlx5). The heap's key comes
 * first: the entry's address is the key's, which a put passes on without an add. */
typedef struct __attribute__((aligned(64))) rvx__sh_peer {
    rvx_rkey_t heap_rkey;
    rvx_ep_t  *ep;
    uint64_t   heap_rbase;
#if RVX__SH_MAPPED
    char      *heap_ptr;   /* the PE's heap as this process maps it */
#endif
    uint64_t   data_rbase;
    rvx_rkey_t data_rkey;
} rvx__sh_peer_t;

typedef struct rvx__sh_free {
    size_t off, len;
    struct rvx__sh_free *next;
} rvx__sh_free_t;

typedef struct rvx__sh_state {
    uintptr_t       heap_base;  /* hot: the address check and the peer array */
    size_t          heap_len;
    rvx__sh_peer_t *peers;
    rvx_worker_t   *w;
    uintptr_t       data_base;
    size_t          data_len;
    int             me, npes;
    int             inited, finalized, thread_level;
    rvx_context_t  *ctx;
    rvx_mem_t      *heap_mem, *data_mem;
    rvx__sh_free_t *free_list;  /* the heap's free ranges, by offset */
    uint64_t        slots_free; /* team slots free on this PE (bit i: slot i) */
    unsigned        polls;      /* wait loops: when to look at the peers' liveness */
} rvx__sh_state_t;

/* No heap before shmem_init or after shmem_finalize: every address fails rvx__sh_heap_has, so
 * a call then takes the cold path, which says so. */
__attribute__((weak)) rvx__sh_state_t rvx__sh = {.heap_base = UINTPTR_MAX};

/* A PE's entry: pe scaled in 32 bits, which x86-64 zero-extends for free (pe < n_pes). */
#define RVX__SH_PEER(pe)                                                                           \
    ((const rvx__sh_peer_t *)(const void *)((const char *)rvx__sh.peers +                          \
                                            (uint32_t)(pe) * (uint32_t)sizeof(rvx__sh_peer_t)))

/* Whether address a is the heap's (else the data segment's, or nothing symmetric), and where it
 * is at the PE of entry p: one compare and no add where the heap is at one address. */
RVX_INLINE int rvx__sh_heap_has(uintptr_t a)
{
#if RVX__SH_SAME_VA
    return a >= rvx__sh.heap_base;
#else
    return a - rvx__sh.heap_base < rvx__sh.heap_len;
#endif
}

RVX_INLINE uint64_t rvx__sh_heap_raddr(const rvx__sh_peer_t *p, uintptr_t a)
{
#if RVX__SH_SAME_VA
    (void)p;
    return a;
#else
    return p->heap_rbase + (a - rvx__sh.heap_base);
#endif
}

/* The executable's data and bss: symbols the static linker defines for every executable. */
extern char __data_start[] __attribute__((weak));
extern char _end[] __attribute__((weak));

/* ---- errors: a failed operation ends the job, as the specification leaves it ---------------- */

RVX_COLD __attribute__((noreturn, format(printf, 1, 2))) void rvx__sh_fatal(const char *fmt, ...)
{
    char line[512];
    int n = snprintf(line, sizeof(line), "shmem: PE %d: ", rvx__sh.me);
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof(line) - 2) n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    fflush(NULL);
    if (write(2, line, (size_t)n) < 0) {} /* one write: lines of several PEs do not interleave */
    _exit(1);
}

/* Every few thousand polls of a wait loop a failed PE ends the wait (and the job), never hangs
 * it: the PE that is to write (pe >= 0), or any PE. A PE that wrote and then left is not a
 * failure: the caller looks at its word once more before it gives up. Any failed endpoint
 * counts: one failed by the peer's access error (rc_mlx5 fails both ends) reaches it no more. */
RVX_COLD int rvx__sh_failed_peer(int pe)
{
    int i;
    for (i = pe < 0 ? 0 : pe; i < (pe < 0 ? rvx__sh.npes : pe + 1); i++)
        if (rvx_ep_status(rvx__sh.peers[i].ep) != RVX_OK) return i;
    return -1;
}

RVX_COLD __attribute__((noreturn)) void rvx__sh_peer_gone(int pe)
{
    rvx__sh_fatal("PE %d failed (%s) while this PE waited for it", pe,
                  rvx_status_str(rvx_ep_status(rvx__sh.peers[pe].ep)));
}

/* One round of a wait loop: progress, and every 65536 rounds the writer's liveness: the
 * failed PE's number, or -1. */
static inline int rvx__sh_poll_from(int pe)
{
    rvx_progress(rvx__sh.w);
    rvx_cpu_relax();
    if (RVX_UNLIKELY(++rvx__sh.polls % 65536 == 0)) return rvx__sh_failed_peer(pe);
    return -1;
}

static inline void rvx__sh_poll(void)
{
    int f = rvx__sh_poll_from(-1);
    if (RVX_UNLIKELY(f >= 0)) rvx__sh_peer_gone(f);
}

/* The wait for a request of an operation rvx answered RVX_INPROGRESS: out of line, since it waits
 * for the network anyway (and an instruction count can leave the wait out by its name). Gets and
 * fetching atomics use rvx's blocking forms instead, which wait inside rvx. */
static RVX_NOINLINE rvx_status_t rvx__sh_wait(rvx_request_t *req)
{
    return rvx_wait(rvx__sh.w, req);
}

/* ---- addresses ------------------------------------------------------------------------------- */

/* Where an operation goes: the remote address and its key. */
typedef struct rvx__sh_target {
    uint64_t          raddr;
    const rvx_rkey_t *rk;
} rvx__sh_target_t;

/* A static or global variable: the data segment, or not symmetric at all. Returned by value (two
 * registers), so the hot path keeps nothing on its stack for it. */
RVX_COLD rvx__sh_target_t rvx__sh_data_key(const rvx__sh_peer_t *p, uintptr_t a, size_t len)
{
    uintptr_t off = a - rvx__sh.data_base;
    rvx__sh_target_t t;
    if (off < rvx__sh.data_len && len <= rvx__sh.data_len - off) {
        t.raddr = p->data_rbase + off;
        t.rk = &p->data_rkey;
        return t;
    }
    if (!rvx__sh.inited) rvx__sh_fatal("an OpenSHMEM call before shmem_init");
    rvx__sh_fatal("address %p (%zu bytes) is not symmetric: neither in the symmetric heap nor in "
                  "the program's global or static data", (void *)a, len);
}

#define RVX__SH_RESOLVE(p, dest, len, raddr, rk)                                               \
    do {                                                                                       \
        uintptr_t a_ = (uintptr_t)(dest);                                                      \
        if (RVX_LIKELY(rvx__sh_heap_has(a_))) {                                                \
            (raddr) = rvx__sh_heap_raddr((p), a_);                                             \
            (rk) = &(p)->heap_rkey;                                                            \
        } else {                                                                               \
            rvx__sh_target_t t_ = rvx__sh_data_key((p), a_, (len));                            \
            (raddr) = t_.raddr;                                                                \
            (rk) = t_.rk;                                                                      \
        }                                                                                      \
    } while (0)

static inline int rvx__sh_is_symmetric(const void *addr)
{
    uintptr_t a = (uintptr_t)addr;
    return a - rvx__sh.heap_base < rvx__sh.heap_len || a - rvx__sh.data_base < rvx__sh.data_len;
}

/* ---- setup ------------------------------------------------------------------------------------ */

RVX_COLD size_t rvx__sh_heap_size(void)
{
    const char *s = getenv("SHMEM_SYMMETRIC_SIZE");
    char *end;
    double v;
    if (!s || !*s) return RVX_SHMEM_HEAP_DEFAULT;
    v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024.0; break;
    case 'm': case 'M': v *= 1048576.0; break;
    case 'g': case 'G': v *= 1073741824.0; break;
    case 0: break;
    default: rvx__sh_fatal("SHMEM_SYMMETRIC_SIZE=%s: a number with an optional K, M or G", s);
    }
    if (v < 4096.0) v = 4096.0;
    return ((size_t)v + 4095) & ~(size_t)4095;
}

typedef struct rvx__sh_card {
    uint64_t heap_base, heap_len, data_rbase, data_len;
    uint8_t  heap_key[RVX_RKEY_PACKED_SIZE];
    uint8_t  data_key[RVX_RKEY_PACKED_SIZE];
} rvx__sh_card_t;

/* The segment's bytes, redzones of a sanitizer build included: word by word, uninstrumented, and
 * through a volatile source so that the loop does not become a (checked) memcpy. */
static __attribute__((no_sanitize_address, noinline, unused)) void
rvx__sh_copy_segment(void *dst, uintptr_t src, size_t len)
{
    const volatile uint64_t *s = (const volatile uint64_t *)src;
    uint64_t *d = (uint64_t *)dst;
    size_t i;
    for (i = 0; i < len / 8; i++) d[i] = s[i];
}

/* Where mremap cannot map a shared mapping twice (valgrind, for one), the region's file is opened
 * through /proc/self/map_files and mapped over the segment. */
RVX_COLD int rvx__sh_map_again(void *a, uintptr_t s, size_t len)
{
    char path[64];
    int fd;
    void *m;
    snprintf(path, sizeof(path), "/proc/self/map_files/%lx-%lx", (unsigned long)(uintptr_t)a,
             (unsigned long)((uintptr_t)a + len));
    if ((fd = open(path, O_RDWR)) < 0) return 0;
    m = mmap((void *)s, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    close(fd);
    return m == (void *)s;
}

/* Global and static variables: the data segment, whole pages. On shm and the pair it is moved
 * onto shared memory so that peers map it (and their atomics are atomic): a shared region is
 * allocated, the segment copied into it, and the region mapped a second time over the segment
 * (mremap of a shared mapping with old size 0 maps the same pages again). The region's first
 * mapping stays rvx's; peers address it through the key. */
RVX_COLD void rvx__sh_data_setup(uint64_t *rbase)
{
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t s, e;
    rvx_status_t st;
    if (!__data_start || !_end) { *rbase = 0; return; }
    s = (uintptr_t)__data_start & ~(pg - 1);
    e = ((uintptr_t)_end + pg - 1) & ~(pg - 1);
    rvx__sh.data_base = s;
    rvx__sh.data_len = e - s;
#if RVX_TL == RVX_TL_SHM || RVX_PAIR
    st = rvx_mem_alloc(rvx__sh.ctx, e - s, &rvx__sh.data_mem);
    if (st == RVX_OK) {
        void *a = rvx_mem_addr(rvx__sh.data_mem);
        rvx__sh_copy_segment(a, s, e - s);
        if (mremap(a, 0, e - s, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)s) != (void *)s &&
            !rvx__sh_map_again(a, s, e - s))
            rvx__sh_fatal("cannot map the data segment onto shared memory: %s", strerror(errno));
        *rbase = (uint64_t)(uintptr_t)a;
    }
#else
    st = rvx_mem_reg(rvx__sh.ctx, (void *)s, e - s, &rvx__sh.data_mem);
    *rbase = s;
#endif
    if (st != RVX_OK)
        rvx__sh_fatal("cannot make the global and static data symmetric (%zu bytes): %s",
                      (size_t)(e - s), rvx_status_str(st));
}

#if RVX__SH_SAME_VA
/* The heap at one address on every PE, above the data segment: each round tries, on every PE,
 * the address of one PE's own mapping (a hint that the kernel, or valgrind, grants when the range
 * is free), until every PE has it. Anonymous memory, zero-filled; registered by the caller. */
RVX_COLD uintptr_t rvx__sh_heap_map(size_t len)
{
    rvx__sh_state_t *S = &rvx__sh;
    const int prot = PROT_READ | PROT_WRITE, flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    uint64_t *cand = (uint64_t *)calloc((size_t)S->npes, sizeof(*cand)), own;
    int *ok = (int *)calloc((size_t)S->npes, sizeof(*ok)), round, pe;
    void *m = mmap(NULL, len, prot, flags, -1, 0);
    if (!cand || !ok || m == MAP_FAILED)
        rvx__sh_fatal("cannot map the symmetric heap (%zu bytes): %s", len, strerror(errno));
    own = (uint64_t)(uintptr_t)m;
    if (rvx_allgather(S->ctx, &own, sizeof(own), cand) != RVX_OK)
        rvx__sh_fatal("exchanging the symmetric heap's address failed");
    for (round = 0; round < S->npes && round < 8; round++) {
        void *at = (void *)(uintptr_t)cand[round], *got = m;
        int mine, all = 1;
        if (at != m && (got = mmap(at, len, prot, flags, -1, 0)) != at && got != MAP_FAILED) {
            munmap(got, len);
            got = MAP_FAILED;
        }
        mine = got != MAP_FAILED && (uintptr_t)at >= S->data_base + S->data_len;
        if (rvx_allgather(S->ctx, &mine, sizeof(mine), ok) != RVX_OK)
            rvx__sh_fatal("agreeing on the symmetric heap's address failed");
        for (pe = 0; pe < S->npes; pe++) all &= ok[pe];
        if (all) {
            if (got != m) munmap(m, len);
            free(cand);
            free(ok);
            return (uintptr_t)at;
        }
        if (got != MAP_FAILED && got != m) munmap(got, len);
    }
    rvx__sh_fatal("no address above the data segment is free for the symmetric heap (%zu bytes) on "
                  "every PE (%d tried): a smaller SHMEM_SYMMETRIC_SIZE may fit", len, round);
}
#endif

/* The heap: rvx's memory, or on rc_mlx5 and dc_mlx5 alone memory at one address, registered. */
RVX_COLD rvx_status_t rvx__sh_heap_alloc(size_t len)
{
#if RVX__SH_SAME_VA
    uintptr_t a = rvx__sh_heap_map(len);
    rvx_status_t st;
    rvx__huge_hint((void *)a, len);
    if ((st = rvx_mem_reg(rvx__sh.ctx, (void *)a, len, &rvx__sh.heap_mem)) != RVX_OK)
        munmap((void *)a, len);
    return st;
#else
    return rvx_mem_alloc(rvx__sh.ctx, len, &rvx__sh.heap_mem);
#endif
}

RVX_COLD void rvx__sh_atexit(void);
RVX_COLD void rvx__sh_teams_init(void);

/* An endpoint to every PE, then its keys: a PE whose symmetric memory differs ends the job. */
RVX_COLD void rvx__sh_connect(const rvx__sh_card_t *mine, const rvx__sh_card_t *all)
{
    rvx__sh_state_t *S = &rvx__sh;
    rvx_status_t st;
    int pe;
    for (pe = 0; pe < S->npes; pe++) {
        rvx__sh_peer_t *p = &S->peers[pe];
        if (all[pe].heap_len != mine->heap_len || all[pe].data_len != mine->data_len)
            rvx__sh_fatal("PE %d's symmetric memory differs from this PE's (heap %llu/%llu, data "
                          "%llu/%llu bytes): one executable and one SHMEM_SYMMETRIC_SIZE per job",
                          pe, (unsigned long long)all[pe].heap_len,
                          (unsigned long long)mine->heap_len, (unsigned long long)all[pe].data_len,
                          (unsigned long long)mine->data_len);
        if ((st = rvx_ep_create(S->w, pe, &p->ep)) != RVX_OK)
            rvx__sh_fatal("connecting to PE %d: %s", pe, rvx_status_str(st));
    }
    for (pe = 0; pe < S->npes; pe++) {
        rvx__sh_peer_t *p = &S->peers[pe];
        p->heap_rbase = all[pe].heap_base;
        p->data_rbase = all[pe].data_rbase;
        if ((st = rvx_rkey_unpack(p->ep, all[pe].heap_key, &p->heap_rkey)) != RVX_OK ||
            (S->data_mem && (st = rvx_rkey_unpack(p->ep, all[pe].data_key, &p->data_rkey)) != RVX_OK))
            rvx__sh_fatal("PE %d's symmetric keys: %s", pe, rvx_status_str(st));
#if RVX__SH_MAPPED
        p->heap_ptr = (char *)rvx_rkey_ptr(&p->heap_rkey, p->heap_rbase, mine->heap_len);
        if (!p->heap_ptr) rvx__sh_fatal("PE %d's symmetric heap is not mapped here", pe);
#endif
    }
}

RVX_COLD void rvx__sh_init(void)
{
    rvx__sh_state_t *S = &rvx__sh;
    rvx__sh_card_t mine, *all;
    rvx_status_t st;
    if (S->inited) return;
    if (S->finalized) rvx__sh_fatal("shmem_init after shmem_finalize");
    if ((st = rvx_init(&S->ctx)) != RVX_OK) {
        fprintf(stderr, "shmem: rvx_init failed: %s\n", rvx_status_str(st));
        exit(1);
    }
    S->me = rvx_rank(S->ctx);
    S->npes = rvx_size(S->ctx);
    if ((st = rvx_worker_create(S->ctx, &S->w)) != RVX_OK)
        rvx__sh_fatal("rvx_worker_create: %s", rvx_status_str(st));
    S->peers = (rvx__sh_peer_t *)calloc((size_t)S->npes, sizeof(*S->peers));
    all = (rvx__sh_card_t *)calloc((size_t)S->npes, sizeof(*all));
    if (!S->peers || !all) rvx__sh_fatal("out of memory for %d PEs", S->npes);
    memset(&mine, 0, sizeof(mine));
    rvx__sh_data_setup(&mine.data_rbase); /* first: the heap is placed above the segment */
    mine.data_len = S->data_len;
    if ((st = rvx__sh_heap_alloc(rvx__sh_heap_size())) != RVX_OK)
        rvx__sh_fatal("cannot allocate the symmetric heap (SHMEM_SYMMETRIC_SIZE): %s",
                      rvx_status_str(st));
    mine.heap_base = (uint64_t)(uintptr_t)rvx_mem_addr(S->heap_mem);
    mine.heap_len = rvx_mem_len(S->heap_mem);
    rvx_rkey_pack(S->heap_mem, mine.heap_key);
    if (S->data_mem) rvx_rkey_pack(S->data_mem, mine.data_key);
    if ((st = rvx_allgather(S->ctx, &mine, sizeof(mine), all)) != RVX_OK)
        rvx__sh_fatal("exchanging the symmetric keys: %s", rvx_status_str(st));
    rvx__sh_connect(&mine, all);
    free(all);
    S->heap_base = (uintptr_t)mine.heap_base;
    S->heap_len = mine.heap_len;
    S->free_list = (rvx__sh_free_t *)malloc(sizeof(*S->free_list));
    if (!S->free_list) rvx__sh_fatal("out of memory");
    S->free_list->off = RVX__SH_SYS_LEN;
    S->free_list->len = S->heap_len - RVX__SH_SYS_LEN;
    S->free_list->next = NULL;
    S->slots_free = ~(uint64_t)0 << 3; /* 0: world, 1: shared, 2: self */
    S->inited = 1;
    rvx__sh_teams_init();
    atexit(rvx__sh_atexit);
    if ((st = rvx_barrier(S->ctx)) != RVX_OK) rvx__sh_fatal("init barrier: %s", rvx_status_str(st));
}

static inline void shmem_init(void) { rvx__sh_init(); }

static inline int shmem_init_thread(int requested, int *provided)
{
    int level = requested < SHMEM_THREAD_SERIALIZED ? requested : SHMEM_THREAD_SERIALIZED;
    if (requested < SHMEM_THREAD_SINGLE || requested > SHMEM_THREAD_MULTIPLE) return -1;
    rvx__sh_init();
    rvx__sh.thread_level = level;
    if (provided) *provided = level; /* MULTIPLE: one worker, no locks (docs/openshmem.md) */
    return 0;
}

static inline void shmem_query_thread(int *provided)
{
    if (provided) *provided = rvx__sh.thread_level;
}

static inline int shmem_my_pe(void) { return rvx__sh.me; }
static inline int shmem_n_pes(void) { return rvx__sh.npes; }
static inline int _my_pe(void) { return rvx__sh.me; }
static inline int _num_pes(void) { return rvx__sh.npes; }
static inline void start_pes(int npes) { (void)npes; rvx__sh_init(); }

static inline int shmem_pe_accessible(int pe)
{
    return pe >= 0 && pe < rvx__sh.npes && rvx_ep_status(rvx__sh.peers[pe].ep) == RVX_OK;
}

static inline int shmem_addr_accessible(const void *addr, int pe)
{
    return shmem_pe_accessible(pe) && rvx__sh_is_symmetric(addr);
}

/* A load/store pointer to a PE's object: this PE's own, and a peer's symmetric heap where this
 * process maps it (rvx_rkey_ptr: shm, the pair's PEs on the node); NULL where only the NIC
 * reaches the memory, and for global and static variables of other PEs (attached per access),
 * as the specification allows for memory that loads and stores cannot reach. */
static inline void *shmem_ptr(const void *dest, int pe)
{
    uintptr_t off = (uintptr_t)dest - rvx__sh.heap_base;
    if (pe == rvx__sh.me && rvx__sh_is_symmetric(dest)) return (void *)(uintptr_t)dest;
    if (pe < 0 || pe >= rvx__sh.npes || off >= rvx__sh.heap_len) return NULL;
    return rvx_rkey_ptr(&rvx__sh.peers[pe].heap_rkey, rvx__sh.peers[pe].heap_rbase + off, 1);
}

static inline void shmem_info_get_version(int *major, int *minor)
{
    *major = SHMEM_MAJOR_VERSION;
    *minor = SHMEM_MINOR_VERSION;
}

static inline void shmem_info_get_name(char *name)
{
    strncpy(name, SHMEM_VENDOR_STRING, SHMEM_MAX_NAME_LEN - 1);
    name[SHMEM_MAX_NAME_LEN - 1] = 0;
}

/* ---- the symmetric heap allocator: first fit, the same on every PE ---------------------------- */

/* Each block starts with a 64-byte header, whose last 16 bytes (just before the object) give the
 * block's offset and length, for free and realloc. */
#define RVX__SH_HDR 64

RVX_COLD void *rvx__sh_heap_take(size_t align, size_t size)
{
    rvx__sh_free_t **pf, *f;
    if (!size) return NULL;
    if (align < 64) align = 64;
    if (align & (align - 1)) return NULL;
    if (size > rvx__sh.heap_len) return NULL;
    size = (size + 63) & ~(size_t)63;
    for (pf = &rvx__sh.free_list; (f = *pf) != NULL; pf = &f->next) {
        size_t obj = (f->off + RVX__SH_HDR + align - 1) & ~(align - 1), end = obj + size;
        if (end <= f->off + f->len) {
            uint64_t *hdr = (uint64_t *)(rvx__sh.heap_base + obj) - 2;
            hdr[0] = f->off;
            hdr[1] = end - f->off;
            if (end == f->off + f->len) {
                *pf = f->next;
                free(f);
            } else {
                f->len -= end - f->off;
                f->off = end;
            }
            return (void *)(rvx__sh.heap_base + obj);
        }
    }
    return NULL;
}

RVX_COLD void rvx__sh_heap_give(void *ptr)
{
    uint64_t *hdr = (uint64_t *)ptr - 2;
    size_t off = hdr[0], len = hdr[1];
    rvx__sh_free_t **pf = &rvx__sh.free_list, *f, *n;
    while (*pf && (*pf)->off < off) pf = &(*pf)->next;
    n = (rvx__sh_free_t *)malloc(sizeof(*n));
    if (!n) rvx__sh_fatal("out of memory");
    n->off = off;
    n->len = len;
    n->next = *pf;
    *pf = n;
    if (n->next && n->off + n->len == n->next->off) { /* merge with the next */
        f = n->next;
        n->len += f->len;
        n->next = f->next;
        free(f);
    }
    for (f = rvx__sh.free_list; f && f->next != n; f = f->next) {}
    if (f && f->off + f->len == n->off) {          /* merge with the previous */
        f->len += n->len;
        f->next = n->next;
        free(n);
    }
}

static inline size_t rvx__sh_heap_size_of(const void *ptr)
{
    const uint64_t *hdr = (const uint64_t *)ptr - 2;
    return (size_t)(hdr[0] + hdr[1] - ((uintptr_t)ptr - rvx__sh.heap_base));
}

static inline void shmem_barrier_all(void);

static inline void *shmem_align(size_t alignment, size_t size)
{
    void *p = rvx__sh_heap_take(alignment, size);
    shmem_barrier_all();
    return p;
}
static inline void *shmem_malloc(size_t size) { return shmem_align(64, size); }
static inline void *shmem_malloc_with_hints(size_t size, long hints)
{
    (void)hints; /* every object is reachable by every operation: hints change nothing */
    return shmem_malloc(size);
}
static inline void *shmem_calloc(size_t count, size_t size)
{
    void *p;
    if (size && count > SIZE_MAX / size) return NULL;
    p = rvx__sh_heap_take(64, count * size);
    if (p) memset(p, 0, count * size);
    shmem_barrier_all();
    return p;
}
static inline void shmem_free(void *ptr)
{
    shmem_barrier_all();
    if (ptr) rvx__sh_heap_give(ptr);
}
static inline void *shmem_realloc(void *ptr, size_t size)
{
    void *p;
    size_t old;
    if (!ptr) return shmem_malloc(size);
    if (!size) { shmem_free(ptr); return NULL; }
    shmem_barrier_all();
    old = rvx__sh_heap_size_of(ptr);
    p = rvx__sh_heap_take(64, size);
    if (p) {
        memcpy(p, ptr, old < size ? old : size);
        rvx__sh_heap_give(ptr);
    }
    shmem_barrier_all();
    return p;
}
/* the names before 1.2 */
static inline void *shmalloc(size_t size) { return shmem_malloc(size); }
static inline void *shmemalign(size_t a, size_t size) { return shmem_align(a, size); }
static inline void *shrealloc(void *p, size_t size) { return shmem_realloc(p, size); }
static inline void shfree(void *p) { shmem_free(p); }

#endif /* RVX_SHMEM_CORE_H */
