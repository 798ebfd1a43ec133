/* scale: what one process spends on a job of N ranks. Each rank creates a worker and an endpoint
 * to every other rank, then exchanges with every peer once: an 8-byte put into each peer's slot
 * (flushed and checked after a barrier), an active message and a tag message to each peer in
 * builds that carry them (SCALE_MSG=1: the AM + TAG build an application would use). Rank 0
 * prints, for the worst rank, lines `scale <tl> <N> <field> <value>`:
 *
 *   create_s        rvx_worker_create plus the N-1 rvx_ep_create calls, wall-clock seconds
 *                   (waits for the slowest rank included: the wire-up is collective)
 *   create_cpu_s    the same, CPU seconds of the calling thread (rvx and the verbs it calls; on
 *                   an oversubscribed machine the figure that does not depend on the others)
 *   wireup_cpu_s    the same span, CPU seconds of the whole process less rvxsim's engine
 *                   threads (rvxsim's engine_cpu_ns): the calling thread and any the bootstrap
 *                   runs (PMIx's progress thread under mpirun and srun)
 *   qps             QPs this process holds after the exchange (rvxsim's count, DCT included)
 *   registered_mib  bytes registered by rvx (peak after the exchange, less the bench's own region)
 *   cq_entries      CQ entries allocated (as the adapter sizes them: a power of two)
 *   srq_entries     SRQ receive WQEs allocated
 *   verbs           control verbs called by worker and endpoint creation (a kernel command each
 *                   on hardware: create, modify, query, register)
 *   heap_kib        rvx's heap: the bytes (malloc_usable_size, so the allocator's rounding too)
 *                   of every block allocated by code of this executable (rvx is compiled into it)
 *                   from before worker creation to after the exchange and still held then, less
 *                   the bytes registered in that time that came from the heap (counted as
 *                   registered_mib; the large buffers rvx maps itself are neither, and mmap is
 *                   interposed to tell them apart): worker, ifaces, conns, endpoints, tag and AM
 *                   state, gathered addresses, requests set aside. Not counted: blocks that the
 *                   verbs library allocates inside the calls rvx makes (its QP, CQ, MR objects:
 *                   the adapter's side, rvxsim here), libc's own, and the bench's arrays, which
 *                   are allocated before or freed within the span (the blocks are found by
 *                   interposing malloc and its relatives and looking at the caller's address)
 *   heap_proc_kib   the whole process's heap growth over the same span (mallinfo2), less the
 *                   registered bytes from the heap and less what rvxsim holds (model_bytes): what
 *                   heap_kib counts plus what the allocator rounds rvxsim's large blocks up to
 *                   (about 2.4 KiB per QP: page-rounded mmap chunks), libc's and rvxsim's other
 *                   allocations
 *   rss_mib         peak resident set size of the process (getrusage)
 *   exchange_s      the exchange with every peer, wall-clock seconds
 *   op_pool_kib     of heap_kib, the pools of operation records: the tag layer's (slabs of 64
 *                   records of 40 B for posted receives, and of 64 operations of ~400 B) and the
 *                   mlx5 transport's (doubled from 64 when empty). They grow with the
 *                   operations outstanding at once (here the N-1 receives posted before the sends,
 *                   and as many sends in flight as the timing allows), so with N in this exchange,
 *                   but with what the application keeps in flight in general, not with the job
 *   qp_heap_kib     of heap_kib, rc_mlx5 only: what it keeps because each peer has a QP of its own
 *                   (the goal allows rc_mlx5 one QP per peer): each conn's send-queue state (the
 *                   queue's geometry and indexes, its op-record book-keeping, its precomputed ctrl
 *                   words, QPN and QP handle), the QPN -> rank table and the BlueFlame records
 *
 * Where the process's resident memory is after the exchange (KiB; rss_kib = rvx_kib + model_kib +
 * rest_kib + tool_kib):
 *   rss_kib         the Rss of every mapping (/proc/self/smaps)
 *   rvx_kib         rvx's share: heap_kib, reg_rss_kib, queue_kib and shm_kib
 *   reg_rss_kib       registered by rvx since before worker creation, resident (rvxsim's mr_rss)
 *   queue_kib         the QP, CQ and SRQ buffers, resident (rvxsim's queue_rss): host memory on
 *                     an adapter too, sized by rvx
 *   shm_kib           rvx's shared-memory mappings (memfds named rvx-*), resident
 *   model_kib       rvxsim's share, which an adapter would not put in the process: fabric_kib and
 *                   the model's resident heap besides the queues (rvxsim's model_rss)
 *   fabric_kib        the fabric inboxes mapped (this process's and each peer's it sent to)
 *   rest_kib        the rest: code and data of the executable and libraries, stacks (rvxsim's
 *                   engine thread's too), libc and the allocator's slack, the launcher's, and what
 *                   rvx allocated before the worker (context, bootstrap)
 *   file_kib          of rest_kib, the mappings of files (the executable, libraries): the rest
 *                     less this is anonymous memory nobody above accounts for
 *   tool_kib        this program's own table of heap blocks (below), resident: its pages are
 *                   touched as rvx allocates, so it grows with N; not in rest_kib
 *
 * The adapter-side figures come from rvxsim_counters(), rvxsim's own accounting; on a real adapter
 * they are not printed. bench/scale.sh runs this at growing N and fits the cost per rank.
 *
 * SCALE_WHO=1: the rank with the largest heap_kib also lists its blocks by the address that
 * allocated them, on stderr (`scale-who rank R +OFFSET K blocks B bytes`; addr2line -e the binary
 * OFFSET names the line).
 *
 *   rvxrun -n N build/bench/scale_rc       (LD_LIBRARY_PATH=build/sim for rvxsim) */
#ifndef SCALE_MSG
#define SCALE_MSG 1
#endif
#if SCALE_MSG
#define RVX_TAG 1
#define RVX_AM_HANDLERS(X) X(HELLO, on_hello)
#endif
#include <rvx/rvx.h>

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "scale_maps.h"

#define TAG_HELLO 0x5ca1e000ull

enum { F_CREATE, F_CPU, F_WCPU, F_QPS, F_REG, F_CQE, F_SRQ, F_VERBS, F_HEAP, F_HEAPP, F_RSS, F_EXCH, F_OPS,
       F_QPHEAP, F_RSSNOW, F_RVX, F_REGRSS, F_QUEUE, F_SHM, F_MODEL, F_FABRIC, F_REST, F_FILE, F_TOOL, F_N };
static const char *const field_name[F_N] = {
    "create_s", "create_cpu_s", "wireup_cpu_s", "qps", "registered_mib", "cq_entries", "srq_entries", "verbs", "heap_kib",
    "heap_proc_kib", "rss_mib", "exchange_s", "op_pool_kib", "qp_heap_kib", "rss_kib", "rvx_kib", "reg_rss_kib", "queue_kib",
    "shm_kib", "model_kib", "fabric_kib", "rest_kib", "file_kib", "tool_kib",
};
/* fields only rvxsim can give (heap_kib takes the registered bytes off; on rdma-core it is the
 * executable's heap including registered memory, so it is not printed either) */
static const int field_sim[F_N] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 1, 0, 0};
/* qp_heap_kib is rc_mlx5's alone: dc_mlx5's queues do not follow the peers */
#define FIELD_HERE(f) ((f) != F_QPHEAP || RVX_TL == RVX_TL_RC_MLX5)

/* ---- the executable's heap: malloc and its relatives, interposed ------------------------------
 * Each block allocated while `own_on` by a caller inside this executable's text is remembered
 * (pointer and usable size, in an open-addressing table) until it is freed; own_live is their
 * sum. glibc lets a program replace these functions; the real ones are its __libc_* entries. */
extern char __executable_start[], etext[];
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

#define OWN_SLOTS (1u << 18)
#define OWN_GONE ((void *)1)
static struct { void *p; size_t n; const void *ra; } own[OWN_SLOTS];
static size_t own_live, own_used;
static int own_on, own_full, own_lock;

static int own_caller(const void *ra)
{
    return own_on && (const char *)ra >= __executable_start && (const char *)ra < etext;
}

static unsigned own_hash(const void *p)
{
    return (unsigned)(((uintptr_t)p >> 4) * 0x9e3779b97f4a7c15ull >> 46) & (OWN_SLOTS - 1);
}

static void own_add(void *p, const void *ra)
{
    unsigned i = own_hash(p);
    while (__atomic_exchange_n(&own_lock, 1, __ATOMIC_ACQUIRE)) {}
    if (own_used >= OWN_SLOTS / 2) {
        own_full = 1; /* the figure is wrong from here: reported, not printed */
    } else {
        while (own[i].p && own[i].p != OWN_GONE) i = (i + 1) & (OWN_SLOTS - 1);
        own[i].p = p;
        own[i].n = malloc_usable_size(p);
        own[i].ra = ra;
        own_live += own[i].n;
        own_used++;
    }
    __atomic_store_n(&own_lock, 0, __ATOMIC_RELEASE);
}

/* Forget p if it is remembered; 1 if it was. */
static int own_del(void *p)
{
    unsigned i = own_hash(p);
    int found = 0;
    if (!__atomic_load_n(&own_used, __ATOMIC_RELAXED)) return 0;
    while (__atomic_exchange_n(&own_lock, 1, __ATOMIC_ACQUIRE)) {}
    for (; own[i].p; i = (i + 1) & (OWN_SLOTS - 1))
        if (own[i].p == p) {
            own[i].p = OWN_GONE; /* a tombstone: later entries of the chain stay reachable */
            own_live -= own[i].n;
            found = 1;
            break;
        }
    __atomic_store_n(&own_lock, 0, __ATOMIC_RELEASE);
    return found;
}

/* The table's pages in RAM (KiB): measuring costs memory too, and it is no one else's. */
static double own_resident_kib(void)
{
    static unsigned char vec[sizeof(own) / 4096 + 2];
    uintptr_t pg = 4096, a = (uintptr_t)own & ~(pg - 1), end = ((uintptr_t)own + sizeof(own) + pg - 1) & ~(pg - 1);
    double kib = 0;
    size_t i;
    if (mincore((void *)a, end - a, vec)) return 0;
    for (i = 0; i < (end - a) / pg; i++) kib += (vec[i] & 1) * 4.0;
    return kib;
}

void *malloc(size_t n)
{
    void *p = __libc_malloc(n);
    if (p && own_caller(__builtin_return_address(0))) own_add(p, __builtin_return_address(0));
    return p;
}

void *calloc(size_t k, size_t n)
{
    void *p = __libc_calloc(k, n);
    if (p && own_caller(__builtin_return_address(0))) own_add(p, __builtin_return_address(0));
    return p;
}

void *realloc(void *o, size_t n)
{
    int was = o && own_del(o);
    void *p = __libc_realloc(o, n);
    if (p && (was || own_caller(__builtin_return_address(0)))) own_add(p, __builtin_return_address(0));
    else if (!p && n && was) own_add(o, NULL); /* failed: o stays */
    return p;
}

void free(void *p)
{
    if (p) own_del(p);
    __libc_free(p);
}

void *memalign(size_t al, size_t n)
{
    void *p = __libc_memalign(al, n);
    if (p && own_caller(__builtin_return_address(0))) own_add(p, __builtin_return_address(0));
    return p;
}

void *aligned_alloc(size_t al, size_t n)
{
    void *p = __libc_memalign(al, n);
    if (p && own_caller(__builtin_return_address(0))) own_add(p, __builtin_return_address(0));
    return p;
}

int posix_memalign(void **pp, size_t al, size_t n)
{
    void *p = __libc_memalign(al, n);
    if (!p) return ENOMEM;
    if (own_caller(__builtin_return_address(0))) own_add(p, __builtin_return_address(0));
    *pp = p;
    return 0;
}

/* rvx's anonymous mappings made in the span (its large registered buffers: sys/mem.h, rvx__map):
 * registered memory that is not heap, so heap_kib takes off only the registered bytes that are
 * not among them. mmap itself is the system call (glibc's wrapper adds nothing to it). */
#define OWN_MAPS 64
static struct { void *p; size_t n; } own_map[OWN_MAPS];
static size_t own_mapped;

void *mmap(void *a, size_t n, int prot, int flags, int fd, off_t off)
{
    void *p = (void *)syscall(SYS_mmap, a, n, prot, flags, fd, off);
    unsigned i;
    if (p == MAP_FAILED || !(flags & MAP_ANONYMOUS) || !own_caller(__builtin_return_address(0))) return p;
    for (i = 0; i < OWN_MAPS; i++)
        if (!own_map[i].p) {
            own_map[i].p = p;
            own_map[i].n = n;
            own_mapped += n;
            return p;
        }
    own_full = 1; /* the figure is wrong from here: reported, not printed */
    return p;
}

int munmap(void *p, size_t n)
{
    unsigned i;
    for (i = 0; i < OWN_MAPS; i++)
        if (own_map[i].p == p) {
            own_mapped -= own_map[i].n;
            own_map[i].p = NULL;
        }
    return (int)syscall(SYS_munmap, p, n);
}

#if SCALE_MSG
static volatile int hellos;
static void on_hello(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    hellos++;
}
#endif

#define CHECK(call)                                                                             \
    do {                                                                                        \
        rvx_status_t st_ = (call);                                                              \
        if (st_ < 0) {                                                                          \
            fprintf(stderr, "scale: rank %d: %s:%d: %s: %s\n", me, __FILE__, __LINE__, #call,  \
                    rvx_status_str(st_));                                                       \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#define now_s() clock_s(CLOCK_MONOTONIC)
#define cpu_s() clock_s(CLOCK_THREAD_CPUTIME_ID)
#define proc_cpu_s() clock_s(CLOCK_PROCESS_CPUTIME_ID)

/* rvxsim's counters of this process (verbs, qps_peak, mr_bytes_peak, ...); 0 on rdma-core. */
typedef struct {
    double verbs, qps, mr_bytes, cqes, srq_wqes, model_bytes, mr_now, queue_bytes, queue_rss, mr_rss,
        model_rss, engine_cpu_s;
} sim_counts_t;

static int sim_counts(sim_counts_t *c)
{
    int (*fn)(char *, size_t) = (int (*)(char *, size_t))dlsym(RTLD_DEFAULT, "rvxsim_counters");
    char line[512], *s;
    memset(c, 0, sizeof(*c));
    if (!fn || fn(line, sizeof(line)) <= 0) return 0;
    if ((s = strstr(line, "verbs="))) c->verbs = strtod(s + 6, NULL);
    if ((s = strstr(line, "qps_peak="))) c->qps = strtod(s + 9, NULL);
    if ((s = strstr(line, "mr_bytes_peak="))) c->mr_bytes = strtod(s + 14, NULL);
    if ((s = strstr(line, "cqes_peak="))) c->cqes = strtod(s + 10, NULL);
    if ((s = strstr(line, "srq_wqes_peak="))) c->srq_wqes = strtod(s + 14, NULL);
    /* what the model holds and what is registered now (not their peaks): both are taken off
     * the heap the process holds */
    if ((s = strstr(line, " model_bytes="))) c->model_bytes = strtod(s + 13, NULL);
    if ((s = strstr(line, " mr_bytes="))) c->mr_now = strtod(s + 10, NULL);
    if ((s = strstr(line, " queue_bytes="))) c->queue_bytes = strtod(s + 13, NULL);
    if ((s = strstr(line, " queue_rss="))) c->queue_rss = strtod(s + 11, NULL);
    if ((s = strstr(line, " mr_rss="))) c->mr_rss = strtod(s + 8, NULL);
    if ((s = strstr(line, " model_rss="))) c->model_rss = strtod(s + 11, NULL);
    if ((s = strstr(line, " engine_cpu_ns="))) c->engine_cpu_s = 1e-9 * strtod(s + 15, NULL);
    return 1;
}

static double heap_bytes(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (double)mi.uordblks + (double)mi.hblkhd;
}

static int me;

/* Every peer once: a put of (me + 1) into our slot of its array, then (builds with messages)
 * an active message and a tag message. Returns the number of wrong slots or messages. */
static int exchange(rvx_context_t *ctx, rvx_worker_t *w, rvx_ep_t **eps, rvx_mem_t *mem, int n)
{
    unsigned char *keys = (unsigned char *)malloc((size_t)n * RVX_RKEY_PACKED_SIZE);
    uint64_t *addrs = (uint64_t *)malloc((size_t)n * sizeof(*addrs)), mine, one = (uint64_t)me + 1;
    volatile uint64_t *slot = (volatile uint64_t *)rvx_mem_addr(mem);
    unsigned char packed[RVX_RKEY_PACKED_SIZE];
    int r, bad = 0;
    if (!keys || !addrs) exit(1);
    mine = (uint64_t)(uintptr_t)rvx_mem_addr(mem);
    CHECK(rvx_rkey_pack(mem, packed));
    CHECK(rvx_allgather(ctx, packed, RVX_RKEY_PACKED_SIZE, keys));
    CHECK(rvx_allgather(ctx, &mine, sizeof(mine), addrs));
    for (r = 0; r < n; r++) {
        rvx_rkey_t rk;
        if (r == me) continue;
        CHECK(rvx_rkey_unpack(eps[r], keys + (size_t)r * RVX_RKEY_PACKED_SIZE, &rk));
        CHECK(rvx_put(eps[r], &one, sizeof(one), addrs[r] + (uint64_t)me * 8, &rk));
        rvx_rkey_release(&rk);
    }
    CHECK(rvx_worker_flush(w));
#if SCALE_MSG
    {
        rvx_request_t *rreq = (rvx_request_t *)calloc((size_t)n, sizeof(*rreq));
        rvx_request_t *sreq = (rvx_request_t *)calloc((size_t)n, sizeof(*sreq));
        rvx_status_t *rst = (rvx_status_t *)calloc((size_t)n, sizeof(*rst));
        uint64_t *rbuf = (uint64_t *)calloc((size_t)n, sizeof(*rbuf)), sum = 0;
        if (!rreq || !sreq || !rst || !rbuf) exit(1);
        for (r = 0; r < n; r++) {
            if (r == me) continue;
            rvx_request_init(&rreq[r]);
            rst[r] = rvx_tag_recv_from(w, r, &rbuf[r], 8, TAG_HELLO | (uint64_t)r, ~0ull, &rreq[r], NULL);
            CHECK(rst[r]);
        }
        /* every receive is posted before any peer sends: without this, how many messages arrive
         * unexpected (and hold an operation record each) follows the timing */
        CHECK(rvx_barrier(ctx));
        for (r = 0; r < n; r++) {
            rvx_status_t st;
            uint64_t arg = (uint64_t)me;
            if (r == me) continue;
            rvx_am_retry(w, st, rvx_am_short(eps[r], RVX_AM_HELLO, &arg, 1));
            CHECK(st);
            rvx_request_init(&sreq[r]);
            CHECK(rvx_complete(w, rvx_tag_send(eps[r], &one, 8, TAG_HELLO | (uint64_t)me, &sreq[r]), &sreq[r]));
        }
        for (r = 0; r < n; r++) {
            if (r == me) continue;
            CHECK(rvx_complete(w, rst[r], &rreq[r])); /* an immediate match left rreq as it was */
            sum += rbuf[r];
        }
        while (hellos < n - 1) rvx_progress(w);
        /* every peer's tag message, each carrying its rank + 1 */
        bad += sum != (uint64_t)n * (uint64_t)(n + 1) / 2 - one;
        free(rreq); free(sreq); free(rst); free(rbuf);
    }
#endif
    CHECK(rvx_barrier(ctx));
    for (r = 0; r < n; r++)
        if (r != me && slot[r] != (uint64_t)r + 1) bad++;
    free(keys);
    free(addrs);
    return bad;
}

int main(void)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_mem_t *mem;
    rvx_ep_t **eps;
    sim_counts_t c0, c1, c2;
    double t0, t1, t2, u0, u1, p0, p1, h0, h1, o0, o1, m0, m1, v[F_N], *all;
    struct rusage ru;
    int n, r, f, sim, bad;

    CHECK(rvx_init(&ctx));
    me = rvx_rank(ctx);
    n = rvx_size(ctx);
    eps = (rvx_ep_t **)calloc((size_t)n, sizeof(*eps));
    all = (double *)calloc((size_t)n * F_N, sizeof(double));
    if (!eps || !all) return 1;
    /* the bench's own region, registered before anything is counted */
    CHECK(rvx_mem_alloc(ctx, (size_t)n * 8, &mem));
    CHECK(rvx_barrier(ctx));

    sim = sim_counts(&c0);
    h0 = heap_bytes();
    own_on = 1;
    o0 = (double)own_live;
    m0 = (double)own_mapped;
    t0 = now_s();
    u0 = cpu_s();
    p0 = proc_cpu_s();
    CHECK(rvx_worker_create(ctx, &w));
    for (r = 0; r < n; r++)
        if (r != me) CHECK(rvx_ep_create(w, r, &eps[r]));
    u1 = cpu_s();
    p1 = proc_cpu_s();
    t1 = now_s();
    sim_counts(&c1);
    CHECK(rvx_barrier(ctx));

    bad = exchange(ctx, w, eps, mem, n);
    t2 = now_s();
    sim_counts(&c2);
    h1 = heap_bytes();
    own_on = 0;
    o1 = (double)own_live;
    m1 = (double)own_mapped;
    if (own_full) fprintf(stderr, "scale: rank %d: too many blocks to follow; heap_kib is wrong\n", me);
    getrusage(RUSAGE_SELF, &ru);

    v[F_CREATE] = t1 - t0;
    v[F_CPU] = u1 - u0;
    v[F_WCPU] = p1 - p0 - (c1.engine_cpu_s - c0.engine_cpu_s);
    v[F_QPS] = c2.qps - c0.qps;
    v[F_REG] = (c2.mr_bytes - c0.mr_bytes) / 1048576.0;
    v[F_CQE] = c2.cqes - c0.cqes;
    v[F_SRQ] = c2.srq_wqes - c0.srq_wqes;
    v[F_VERBS] = c1.verbs - c0.verbs;
    v[F_HEAP] = (o1 - o0 - (c2.mr_now - c0.mr_now - (m1 - m0))) / 1024.0;
    v[F_HEAPP] = (h1 - h0 - (c2.model_bytes - c0.model_bytes) - (c2.mr_now - c0.mr_now - (m1 - m0))) / 1024.0;
    v[F_RSS] = (double)ru.ru_maxrss / 1024.0;
    v[F_EXCH] = t2 - t1;
    v[F_OPS] = 0;
#if SCALE_MSG
    for (f = 0; f < (int)rvx__tag_of(w)->slabs.n; f++)
        v[F_OPS] += (double)malloc_usable_size(rvx__tag_of(w)->slabs.p[f]) / 1024.0;
    for (f = 0; f < (int)rvx__tag_of(w)->rslabs.n; f++)
        v[F_OPS] += (double)malloc_usable_size(rvx__tag_of(w)->rslabs.p[f]) / 1024.0;
#endif
#if RVX_TL == RVX_TL_RC_MLX5 || RVX_TL == RVX_TL_DC_MLX5
    if (w->iface[0].txrecs.r) v[F_OPS] += (double)malloc_usable_size(w->iface[0].txrecs.r) / 1024.0;
#endif
    v[F_QPHEAP] = 0;
#if RVX_TL == RVX_TL_RC_MLX5
    {
        const rvx__rc_iface_t *ifc = &w->iface[0];
        const rvx__mlx5_bf_t *b;
        for (r = 0; r < n; r++) if (ifc->conns[r].qp) v[F_QPHEAP] += (double)RVX__RC_CONN_QP_BYTES;
        v[F_QPHEAP] += (double)(malloc_usable_size(ifc->qpt_qpn) + malloc_usable_size(ifc->qpt_rank));
        for (b = ifc->bfs; b; b = b->next) v[F_QPHEAP] += (double)malloc_usable_size((void *)b);
        v[F_QPHEAP] /= 1024.0;
    }
#endif
    {
        maps_rss_t m = maps_rss();
        v[F_RSSNOW] = m.total;
        v[F_REGRSS] = (c2.mr_rss - c0.mr_rss) / 1024.0;
        v[F_QUEUE] = c2.queue_rss / 1024.0;
        v[F_SHM] = m.shm;
        v[F_RVX] = v[F_HEAP] + v[F_REGRSS] + v[F_QUEUE] + v[F_SHM];
        v[F_FABRIC] = m.fabric;
        v[F_MODEL] = m.fabric + c2.model_rss / 1024.0;
        v[F_TOOL] = own_resident_kib();
        v[F_REST] = v[F_RSSNOW] - v[F_RVX] - v[F_MODEL] - v[F_TOOL];
        v[F_FILE] = m.file;
    }
    CHECK(rvx_allgather(ctx, v, sizeof(v), all));
    if (bad) fprintf(stderr, "scale: rank %d: %d peers' data wrong after the exchange\n", me, bad);
    if (getenv("SCALE_WHO")) {
        double worst = 0;
        for (r = 0; r < n; r++) if (all[(size_t)r * F_N + F_HEAP] > worst) worst = all[(size_t)r * F_N + F_HEAP];
        if (v[F_HEAP] == worst) {
            unsigned i, j;
            static struct { const void *ra; size_t b, k; } who[256];
            unsigned nw = 0;
            for (i = 0; i < OWN_SLOTS; i++) {
                if (!own[i].p || own[i].p == OWN_GONE) continue;
                for (j = 0; j < nw && who[j].ra != own[i].ra; j++) {}
                if (j == nw && nw < 256) { who[nw].ra = own[i].ra; nw++; }
                if (j < nw) { who[j].b += own[i].n; who[j].k++; }
            }
            for (j = 0; j < nw; j++)
                fprintf(stderr, "scale-who rank %d +0x%lx %zu blocks %zu bytes\n", me,
                        (unsigned long)((const char *)who[j].ra - __executable_start), who[j].k, who[j].b);
        }
    }

    if (me == 0) {
        printf("scale-build %s %d %s\n", RVX_TL_NAME, n, SCALE_MSG ? "am+tag" : "rma");
        for (f = 0; f < F_N; f++) {
            double worst = all[f];
            if ((field_sim[f] && !sim) || !FIELD_HERE(f)) continue;
            for (r = 1; r < n; r++)
                if (all[(size_t)r * F_N + f] > worst) worst = all[(size_t)r * F_N + f];
            printf("scale %s %d %s %.6g\n", RVX_TL_NAME, n, field_name[f], worst);
        }
        fflush(stdout);
    }
    /* Everyone is done with the exchange, then everyone leaves at once without tearing down
     * (the kernel frees a process's verbs objects, as it does for one that crashes). Teardown is
     * not measured here, and an rc_mlx5 endpoint torn down after its peer left waits out the
     * transport's retries. */
    CHECK(rvx_barrier(ctx));
    fflush(stdout);
#if RVX_BOOT == RVX_BOOT_PMIX
    /* mpirun and srun count a process that leaves without PMIx_Finalize as failed: the bootstrap
     * alone is closed, the rest left to the exit as under rvxrun */
    rvx__boot_fini(&ctx->boot);
#endif
    _exit(bad != 0);
}
