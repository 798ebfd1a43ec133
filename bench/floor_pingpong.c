/*
 * floor_pingpong.c - the cache-line ping-pong floor.
 *
 * Two processes (parent and forked child) share a MAP_SHARED anonymous
 * mapping and bounce a counter back and forth through cache lines. No
 * library, no queue, no header: just a store on one core and a spinning
 * load on the other. Whatever a shared-memory messaging layer does, its
 * one-way latency cannot go below what this program measures on the same
 * machine, so it is the "floor" the rvx numbers are compared against.
 *
 * Two layouts are measured, both honest (every round trip moves the
 * counter core -> core -> core through the coherence protocol):
 *   one_line : a single 64-byte line; the parent writes odd values, the
 *              child answers with the next even value in the same word.
 *   two_lines: one line per direction (ping line written only by the
 *              parent, pong line written only by the child).
 * The reported floor is the faster of the two medians; both are printed.
 * A third layout is the floor of a request-plus-reply protocol over rings,
 * measured beside them (never the reported floor):
 *   rings    : one ring of 256 64-byte slots per direction, as rvx's shm
 *              transport lays them out: a message is an 8-byte argument
 *              and then an 8-byte header {stamp of the position + 1} with
 *              one release store, in the next slot; the receiver polls the
 *              next slot's stamp, reads the argument, and publishes its
 *              position in the ring's control line (every message), which
 *              the sender reads once a lap to know there is room. The
 *              child answers each request with the argument + 1, which
 *              the parent checks. No dispatch, no handler, no checks: what
 *              any ring protocol with one line per message has to do.
 *
 * Method per layout: warm-up, then R repetitions of N round trips timed as
 * a block (no per-iteration timer in the hot loop); one-way latency of a
 * repetition = block time / N / 2; the floor is the median over the R
 * repetitions. A separate sampling pass then timestamps every round trip
 * (rdtsc on x86-64, calibrated against CLOCK_MONOTONIC; clock_gettime
 * elsewhere) to give p50/p99 of per-iteration round-trip times.
 *
 * Output (one "key value" pair per line, machine readable):
 *   floor pinning <cpu0,cpu1|none> ...  floor params ...  [floor warning ...]
 *   floor timer <rdtsc|clock_gettime>
 *   floor timer_overhead_ns <x>     (one stamp pair; part of rt_p50/rt_p99)
 *   floor one_line oneway_ns <x>    (median over repetitions)
 *   floor one_line rt_p50_ns <x>    floor one_line rt_p99_ns <x>
 *   floor one_line oneway_min_ns <x> (the fastest repetition)
 *   floor two_lines ...  floor rings ...  (same keys)
 *   floor layout <one_line|two_lines>
 *   floor oneway_ns <x>             (the floor: faster layout's median of
 *                                    one_line and two_lines)
 *
 * Build: gcc -O2 -o build/bench/floor_pingpong bench/floor_pingpong.c
 * Usage: floor_pingpong [-n round_trips] [-r repetitions] [-w warmup]
 *                       [-s samples] [-l 1|2|3|0]   (-l 0 = all three, default)
 *                       [-p]   (a pause in every pass of the spin loops)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define HAVE_TSC 1
#else
#define HAVE_TSC 0
#endif

#define LINE 64

/* Shared area: line 0 = ping (parent writes), line 1 = pong (child
 * writes). In one_line layout only line 0 is used, by both sides. */
struct shared {
    _Alignas(LINE) volatile uint64_t ping;
    char pad0[LINE - sizeof(uint64_t)];
    _Alignas(LINE) volatile uint64_t pong;
    char pad1[LINE - sizeof(uint64_t)];
};

/* The rings layout: one ring per direction, a control line then the slots. */
#define RING_SLOTS 256
struct ring_slot {
    _Alignas(LINE) volatile uint64_t hdr;   /* stamp: position + 1 */
    volatile uint64_t arg;
    char pad[LINE - 2 * sizeof(uint64_t)];
};
struct ring {
    _Alignas(LINE) volatile uint64_t head;  /* consumer's position */
    char pad[LINE - sizeof(uint64_t)];
    struct ring_slot slot[RING_SLOTS];
};
struct rings {
    struct ring req, rep;                    /* parent -> child, child -> parent */
};

/* Set when fewer than 2 CPUs are online: a pure spin would then wait for a
 * scheduler tick per hop, so the spin loops yield the CPU instead (the
 * result is then a context-switch time, not a cache-line floor). */
static int yield_in_spin;
/* -p: a pause instruction in every pass of a spin loop, as rvx's waits do
 * (rvx_cpu_relax in rvx__backoff): the polling core then asks for the line
 * less often and leaves its core's resources to a sibling thread. */
static int pause_in_spin;

static inline void spin_hint(void)
{
    if (pause_in_spin) {
#if HAVE_TSC
        __asm__ __volatile__("pause" ::: "memory");
#elif defined(__aarch64__)
        __asm__ __volatile__("yield" ::: "memory");
#endif
    }
    if (yield_in_spin)
        sched_yield();
}

static inline uint64_t ld(volatile uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void st(volatile uint64_t *p, uint64_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Per-iteration stamp: TSC ticks on x86, nanoseconds elsewhere. */
static inline uint64_t stamp(void)
{
#if HAVE_TSC
    return __rdtsc();
#else
    return (uint64_t)now_ns();
#endif
}

/* Nanoseconds per stamp() tick, measured over ~50 ms. */
static double stamp_ns_per_tick(void)
{
#if HAVE_TSC
    double t0 = now_ns();
    uint64_t c0 = __rdtsc();
    while (now_ns() - t0 < 50e6)
        ;
    double t1 = now_ns();
    uint64_t c1 = __rdtsc();
    return (t1 - t0) / (double)(c1 - c0);
#else
    return 1.0;
#endif
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median cost of one back-to-back stamp() pair, in ns: the per-iteration
 * round trips below include it (and its granularity). */
static double stamp_overhead_ns(double ns_per_tick)
{
    enum { K = 10001 };
    static double d[K];
    for (int i = 0; i < K; i++) {
        uint64_t a = stamp();
        uint64_t b = stamp();
        d[i] = (double)(b - a) * ns_per_tick;
    }
    qsort(d, K, sizeof(double), cmp_double);
    return d[K / 2];
}

static int pin(int cpu, char *why, size_t whylen)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        snprintf(why, whylen, "cpu%d: %s", cpu, strerror(errno));
        return -1;
    }
    return 0;
}

/* Child side: answer `total` pings, then exit. */
static void responder(struct shared *sh, int one_line, uint64_t total)
{
    volatile uint64_t *in = &sh->ping;
    volatile uint64_t *out = one_line ? &sh->ping : &sh->pong;
    for (uint64_t i = 0; i < total; i++) {
        uint64_t want = 2 * i + 1;
        while (ld(in) != want)
            spin_hint();
        st(out, want + 1);
    }
}

/* A ring's ends, each owned by one process. */
struct ring_tx {
    struct ring *r;
    uint64_t tail, head_cache;
};
struct ring_rx {
    struct ring *r;
    uint64_t head;
};

static inline void ring_send(struct ring_tx *t, uint64_t arg)
{
    struct ring_slot *s = &t->r->slot[t->tail & (RING_SLOTS - 1)];
    if (t->tail - t->head_cache >= RING_SLOTS) /* once a lap: is there room? */
        while (t->tail - (t->head_cache = ld(&t->r->head)) >= RING_SLOTS)
            spin_hint();
    s->arg = arg;
    st(&s->hdr, t->tail + 1);
    t->tail++;
}

static inline uint64_t ring_recv(struct ring_rx *x)
{
    struct ring_slot *s = &x->r->slot[x->head & (RING_SLOTS - 1)];
    uint64_t arg;
    while ((uint32_t)ld(&s->hdr) != (uint32_t)(x->head + 1))
        spin_hint();
    arg = s->arg;
    st(&x->r->head, ++x->head);
    return arg;
}

/* Child side of the rings layout: answer each request with its argument + 1. */
static void ring_responder(struct rings *rs, uint64_t total)
{
    struct ring_rx in = { &rs->req, 0 };
    struct ring_tx out = { &rs->rep, 0, 0 };
    for (uint64_t i = 0; i < total; i++)
        ring_send(&out, ring_recv(&in) + 1);
}

struct ring_pinger {
    struct ring_tx out;
    struct ring_rx in;
    uint64_t seq, bad;
};

static inline void ring_round_trip(struct ring_pinger *p)
{
    ring_send(&p->out, p->seq);
    p->bad += ring_recv(&p->in) != p->seq + 1;
    p->seq++;
}

/* Parent side helpers. `seq` is the running round-trip number, shared
 * between phases so the child simply answers a fixed total count. */
struct pinger {
    volatile uint64_t *out, *in;
    uint64_t seq;
};

static inline void round_trip(struct pinger *p)
{
    uint64_t v = 2 * p->seq + 1;
    st(p->out, v);
    while (ld(p->in) != v + 1)
        spin_hint();
    p->seq++;
}

struct result {
    double oneway_med_ns, oneway_min_ns, rt_p50_ns, rt_p99_ns;
};

/* Warm-up, timed blocks (no timer inside the loop) and the sampling pass
 * (every round trip stamped), over one layout's round trip RT(P); written
 * once for both kinds, each instance a loop of its own. */
#define RUN_BLOCKS(RT, P)                                                    \
    do {                                                                     \
        for (long i = 0; i < warm; i++)                                      \
            RT(P);                                                           \
        for (int r = 0; r < reps; r++) {                                     \
            double t0 = now_ns();                                            \
            for (long i = 0; i < n; i++)                                     \
                RT(P);                                                       \
            double t1 = now_ns();                                            \
            rep_ns[r] = (t1 - t0) / (double)n / 2.0;                         \
        }                                                                    \
        for (long i = 0; i < samples; i++) {                                 \
            uint64_t a = stamp();                                            \
            RT(P);                                                           \
            uint64_t b = stamp();                                            \
            rt[i] = (uint32_t)(b - a > UINT32_MAX ? UINT32_MAX : b - a);     \
        }                                                                    \
    } while (0)

/* layout: 1 one_line, 2 two_lines, 3 rings */
static int measure(int layout, long n, int reps, long warm, long samples,
                   int cpu_child, double ns_per_tick,
                   struct result *res)
{
    int one_line = layout == 1;
    size_t size = layout == 3 ? sizeof(struct rings) : sizeof(struct shared);
    void *area = mmap(NULL, size, PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) {
        perror("mmap");
        return -1;
    }
    memset(area, 0, size);
    struct shared *sh = (struct shared *)area;
    uint64_t total = (uint64_t)warm + (uint64_t)n * reps + (uint64_t)samples;

    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return -1;
    }
    if (pid == 0) {
        char why[128];
        if (cpu_child >= 0)
            (void)pin(cpu_child, why, sizeof(why)); /* parent reports */
        if (layout == 3)
            ring_responder((struct rings *)area, total);
        else
            responder(sh, one_line, total);
        _exit(0);
    }

    double *rep_ns = calloc((size_t)reps, sizeof(double));
    uint32_t *rt = calloc((size_t)(samples > 0 ? samples : 1), sizeof(uint32_t));
    if (!rep_ns || !rt) {
        perror("calloc");
        return -1;
    }

    if (layout == 3) {
        struct rings *rs = (struct rings *)area;
        struct ring_pinger p = { { &rs->req, 0, 0 }, { &rs->rep, 0 }, 0, 0 };
        RUN_BLOCKS(ring_round_trip, &p);
        if (p.bad)
            fprintf(stderr, "floor rings: %llu wrong replies\n", (unsigned long long)p.bad);
    } else {
        struct pinger p = { &sh->ping, one_line ? &sh->ping : &sh->pong, 0 };
        RUN_BLOCKS(round_trip, &p);
    }

    int status = 0;
    waitpid(pid, &status, 0);

    qsort(rep_ns, (size_t)reps, sizeof(double), cmp_double);
    res->oneway_med_ns = reps % 2 ? rep_ns[reps / 2]
                                  : (rep_ns[reps / 2 - 1] + rep_ns[reps / 2]) / 2;
    res->oneway_min_ns = rep_ns[0];
    res->rt_p50_ns = res->rt_p99_ns = -1;
    if (samples > 0) {
        double *d = calloc((size_t)samples, sizeof(double));
        if (!d) {
            perror("calloc");
            return -1;
        }
        for (long i = 0; i < samples; i++)
            d[i] = rt[i] * ns_per_tick;
        qsort(d, (size_t)samples, sizeof(double), cmp_double);
        res->rt_p50_ns = d[(size_t)(samples * 50 / 100)];
        res->rt_p99_ns = d[(size_t)(samples * 99 / 100)];
        free(d);
    }
    free(rep_ns);
    free(rt);
    munmap(area, size);
    return 0;
}

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [-n round_trips] [-r reps] [-w warmup] [-s samples] "
            "[-l 0|1|2|3] [-p]\n  -l 1: one shared line, 2: one line per direction, "
            "3: a ring per direction;\n  0: all three, the floor the faster of 1 and 2 "
            "(default)\n  -p: pause in every pass of the spin loops\n",
            prog);
}

int main(int argc, char **argv)
{
    long n = 50000, warm = 50000, samples = 100000;
    int reps = 21, layout = 0, opt;
    while ((opt = getopt(argc, argv, "n:r:w:s:l:ph")) != -1) {
        switch (opt) {
        case 'n': n = atol(optarg); break;
        case 'r': reps = atoi(optarg); break;
        case 'w': warm = atol(optarg); break;
        case 's': samples = atol(optarg); break;
        case 'l': layout = atoi(optarg); break;
        case 'p': pause_in_spin = 1; break;
        default: usage(argv[0]); return opt == 'h' ? 0 : 2;
        }
    }
    if (n < 1 || reps < 1 || warm < 0 || samples < 0 || layout < 0 || layout > 3) {
        usage(argv[0]);
        return 2;
    }

    /* Pin parent to CPU 0 and child to CPU 1; keep going if impossible.
     * The child's own pinning result is checked here by trying it first
     * from the parent (same permissions), then moving back to CPU 0. */
    int cpu_parent = 0, cpu_child = 1;
    char why[128] = "";
    if (pin(cpu_child, why, sizeof(why)) != 0 || pin(cpu_parent, why, sizeof(why)) != 0) {
        printf("floor pinning none (sched_setaffinity failed: %s; running unpinned)\n", why);
        cpu_parent = cpu_child = -1;
    } else {
        printf("floor pinning cpu0,cpu1\n");
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 2) {
        yield_in_spin = 1;
        printf("floor warning only %ld online cpu: spin loops yield, "
               "result is NOT a cache-line floor\n", ncpu);
    }
    printf("floor params round_trips %ld reps %d warmup %ld samples %ld pause %d\n",
           n, reps, warm, samples, pause_in_spin);

    double ns_per_tick = samples > 0 ? stamp_ns_per_tick() : 1.0;
    if (samples > 0)
        printf("floor timer %s\nfloor timer_overhead_ns %.1f\n",
               HAVE_TSC ? "rdtsc" : "clock_gettime", stamp_overhead_ns(ns_per_tick));

    const char *names[4] = { NULL, "one_line", "two_lines", "rings" };
    double best = -1;
    int best_layout = 0;
    for (int l = 1; l <= 3; l++) {
        if (layout != 0 && layout != l)
            continue;
        struct result res;
        if (measure(l, n, reps, warm, samples, cpu_child,
                    ns_per_tick, &res) != 0)
            return 1;
        printf("floor %s oneway_ns %.1f\n", names[l], res.oneway_med_ns);
        printf("floor %s oneway_min_ns %.1f\n", names[l], res.oneway_min_ns);
        if (samples > 0) {
            printf("floor %s rt_p50_ns %.1f\n", names[l], res.rt_p50_ns);
            printf("floor %s rt_p99_ns %.1f\n", names[l], res.rt_p99_ns);
        }
        /* the rings are a protocol's floor, beside the cache-line floor */
        if (l != 3 && (best < 0 || res.oneway_med_ns < best)) {
            best = res.oneway_med_ns;
            best_layout = l;
        }
    }
    if (best < 0)
        return 0;
    printf("floor layout %s\n", names[best_layout]);
    printf("floor oneway_ns %.1f\n", best);
    return 0;
}
