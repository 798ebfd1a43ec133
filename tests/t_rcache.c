/* t_rcache: the registration cache (proto/rcache.h) in one process: hits and misses, containment,
 * overlapping regions merged, LRU eviction at the entry bound, the byte bound, regions in use
 * never evicted, invalidation of idle and in-use regions, mmap/munmap/mmap at one address with
 * invalidation, and the leave-pinned policy for malloc: a freed-and-reused heap address keeps its
 * pages (checked against /proc/self/pagemap when the frame numbers are readable).
 *
 * The context's list of registered regions (ctx->nregions) counts live registrations. */
#include <rvx/rvx.h>
#include <rvx/proto/rcache.h>

#include "testlib.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/wait.h>

static rvx_context_t *ctx;
static size_t pg;

#define NREG() ((long)ctx->tl[0].nregs) /* every registration, the cache's included */

static char *area(size_t pages)
{
    void *p = mmap(NULL, pages * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    return (char *)p;
}

static int covers(rvx_mem_t *m, const void *addr, size_t len)
{
    uintptr_t b = (uintptr_t)rvx_mem_addr(m), a = (uintptr_t)addr;
    return a >= b && a + len <= b + rvx_mem_len(m);
}

/* get + put, returning the mem it was given */
static rvx_mem_t *touch(rvx__rcache_t *rc, void *addr, size_t len)
{
    rvx_mem_t *m = NULL;
    T_OK(rvx__rcache_get(rc, addr, len, &m));
    if (m) rvx__rcache_put(rc, m);
    return m;
}

static void test_hit_miss(void)
{
    rvx__rcache_t rc;
    char *buf = area(16);
    rvx_mem_t *m1 = NULL, *m2 = NULL, *m3 = NULL;
    long base = NREG();
    T_OK(rvx__rcache_init(&rc, ctx));
    T_STATUS(rvx__rcache_get(&rc, buf, 0, &m1), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx__rcache_get(&rc, NULL, 8, &m1), RVX_ERR_INVALID_PARAM);

    T_OK(rvx__rcache_get(&rc, buf + 100, 200, &m1));
    T_CHECK(rc.misses == 1 && rc.hits == 0, "misses %llu hits %llu", (unsigned long long)rc.misses,
            (unsigned long long)rc.hits);
    T_CHECK(m1 && rvx_mem_addr(m1) == buf && rvx_mem_len(m1) == pg,
            "a miss registers whole pages: %p+%zu for %p", m1 ? rvx_mem_addr(m1) : NULL,
            m1 ? rvx_mem_len(m1) : 0, (void *)buf);
    T_CHECK(NREG() == base + 1, "registrations %ld", NREG() - base);
    /* contained in the same page: hit, same registration, second reference */
    T_OK(rvx__rcache_get(&rc, buf + 300, 10, &m2));
    T_CHECK(m2 == m1 && rc.hits == 1, "hit gave %p (want %p), hits %llu", (void *)m2, (void *)m1,
            (unsigned long long)rc.hits);
    rvx__rcache_put(&rc, m2);
    rvx__rcache_put(&rc, m1);
    T_CHECK(rc.lru_head && rc.lru_head->mem == m1 && rc.lru_head->refs == 0, "idle region not in LRU");

    /* crossing into the next page: not contained, so a miss that covers the old region */
    T_OK(rvx__rcache_get(&rc, buf + pg - 10, 20, &m3));
    T_CHECK(rc.misses == 2 && rc.merged == 1, "misses %llu merged %llu",
            (unsigned long long)rc.misses, (unsigned long long)rc.merged);
    T_CHECK(m3 && rvx_mem_addr(m3) == buf && rvx_mem_len(m3) == 2 * pg, "merged region %p+%zu",
            m3 ? rvx_mem_addr(m3) : NULL, m3 ? rvx_mem_len(m3) : 0);
    T_CHECK(NREG() == base + 1 && rc.nentries == 1, "old region not deregistered: %ld, %zu entries",
            NREG() - base, rc.nentries);
    rvx__rcache_put(&rc, m3);
    T_CHECK(touch(&rc, buf, 2 * pg) == m3 && rc.hits == 2, "whole merged region is a hit");
    /* a disjoint region is a second entry; lookups find each */
    T_CHECK(touch(&rc, buf + 5 * pg + 1, pg) != m3 && rc.nentries == 2, "disjoint: %zu entries",
            rc.nentries);
    T_CHECK(rvx__rcache_find(&rc, buf + 5 * pg + 1, pg) != NULL, "second region not found");
    T_CHECK(rvx__rcache_find(&rc, buf + 3 * pg, 1) == NULL, "gap between regions found");
    T_CHECK(rc.bytes == 4 * pg, "bytes %zu, want %zu", rc.bytes, 4 * pg);
    /* a put of something the cache did not hand out is reported and ignored */
    rvx__rcache_put(&rc, m3);
    T_CHECK(rc.nentries == 2 && NREG() == base + 2, "double put changed the cache");
    rvx__rcache_fini(&rc);
    T_CHECK(NREG() == base, "fini left %ld registrations", NREG() - base);
    munmap(buf, 16 * pg);
}

static void test_overlap_in_use(void)
{
    rvx__rcache_t rc;
    char *buf = area(8);
    rvx_mem_t *ma = NULL, *mb = NULL;
    long base = NREG();
    T_OK(rvx__rcache_init(&rc, ctx));
    T_OK(rvx__rcache_get(&rc, buf, 2 * pg, &ma));
    T_OK(rvx__rcache_get(&rc, buf + pg, 2 * pg, &mb)); /* overlaps the region in use */
    T_CHECK(mb && mb != ma && rvx_mem_addr(mb) == buf && rvx_mem_len(mb) == 3 * pg,
            "union of the overlapping regions: %p+%zu", mb ? rvx_mem_addr(mb) : NULL,
            mb ? rvx_mem_len(mb) : 0);
    T_CHECK(NREG() == base + 2 && rc.nentries == 1 && rc.merged == 1,
            "the region in use stays registered outside the cache: %ld regs, %zu entries",
            NREG() - base, rc.nentries);
    T_CHECK(ma && rvx_mem_addr(ma) == buf && rvx_mem_len(ma) == 2 * pg, "holder's region changed");
    T_CHECK(touch(&rc, buf, 10) == mb, "lookup finds the union, not the replaced region");
    rvx__rcache_put(&rc, ma);
    T_CHECK(NREG() == base + 1, "replaced region not deregistered at its last put");
    rvx__rcache_put(&rc, mb);
    T_CHECK(NREG() == base + 1 && rc.nentries == 1, "union not kept after put");
    rvx__rcache_fini(&rc);
    munmap(buf, 8 * pg);
}

static void test_lru(void)
{
    rvx__rcache_t rc;
    char *buf = area(16), *R[6];
    long base = NREG();
    int i;
    for (i = 0; i < 6; i++) R[i] = buf + 2 * (size_t)i * pg + 64;
    T_OK(rvx__rcache_init(&rc, ctx));
    rc.max_entries = 4;
    for (i = 0; i < 4; i++) touch(&rc, R[i], 100);
    touch(&rc, R[0], 100); /* LRU now R1 R2 R3 R0 */
    T_CHECK(rc.misses == 4 && rc.hits == 1 && rc.evictions == 0, "warm-up");
    touch(&rc, R[4], 100); /* evicts R1 */
    T_CHECK(rc.evictions == 1 && !rvx__rcache_find(&rc, R[1], 1), "R1 (least recent) not evicted");
    T_CHECK(rvx__rcache_find(&rc, R[0], 1) && rvx__rcache_find(&rc, R[2], 1) &&
                rvx__rcache_find(&rc, R[3], 1) && rvx__rcache_find(&rc, R[4], 1),
            "a recently used region was evicted");
    touch(&rc, R[2], 100); /* LRU now R3 R0 R4 R2 */
    touch(&rc, R[5], 100); /* evicts R3 */
    T_CHECK(!rvx__rcache_find(&rc, R[3], 1) && rvx__rcache_find(&rc, R[0], 1), "R3 should go, R0 stay");
    touch(&rc, R[1], 100); /* evicts R0 */
    T_CHECK(!rvx__rcache_find(&rc, R[0], 1) && rvx__rcache_find(&rc, R[4], 1) &&
                rvx__rcache_find(&rc, R[2], 1) && rvx__rcache_find(&rc, R[5], 1) &&
                rvx__rcache_find(&rc, R[1], 1),
            "eviction order");
    T_CHECK(rc.evictions == 3 && rc.nentries == 4 && NREG() == base + 4,
            "evictions %llu entries %zu registrations %ld", (unsigned long long)rc.evictions,
            rc.nentries, NREG() - base);
    rvx__rcache_fini(&rc);
    munmap(buf, 16 * pg);
}

static void test_bytes_bound(void)
{
    rvx__rcache_t rc;
    char *buf = area(32);
    rvx_mem_t *mw = NULL;
    long base = NREG();
    T_OK(rvx__rcache_init(&rc, ctx));
    rc.max_bytes = 4 * pg;
    touch(&rc, buf, 2 * pg);          /* X */
    touch(&rc, buf + 4 * pg, 2 * pg); /* Y */
    T_CHECK(rc.bytes == 4 * pg && rc.evictions == 0, "bytes %zu", rc.bytes);
    touch(&rc, buf + 8 * pg, pg); /* Z: X must go */
    T_CHECK(rc.evictions == 1 && rc.bytes == 3 * pg && !rvx__rcache_find(&rc, buf, 1) &&
                rvx__rcache_find(&rc, buf + 4 * pg, 1) && rvx__rcache_find(&rc, buf + 8 * pg, 1),
            "byte bound: evictions %llu bytes %zu", (unsigned long long)rc.evictions, rc.bytes);
    /* larger than the bound: registered, not cached, nothing evicted for it */
    T_OK(rvx__rcache_get(&rc, buf + 12 * pg, 5 * pg, &mw));
    T_CHECK(rc.uncached == 1 && rc.evictions == 1 && !rvx__rcache_find(&rc, buf + 12 * pg, 1),
            "oversized region: uncached %llu evictions %llu", (unsigned long long)rc.uncached,
            (unsigned long long)rc.evictions);
    T_CHECK(mw && covers(mw, buf + 12 * pg, 5 * pg) && NREG() == base + 3, "oversized registration");
    rvx__rcache_put(&rc, mw);
    T_CHECK(NREG() == base + 2, "uncached region not deregistered at put");
    rvx__rcache_fini(&rc);
    munmap(buf, 32 * pg);
}

static void test_refs(void)
{
    rvx__rcache_t rc;
    char *buf = area(16), *A = buf, *B = buf + 2 * pg, *C = buf + 4 * pg, *D = buf + 6 * pg,
         *E = buf + 8 * pg;
    rvx_mem_t *ma = NULL, *md = NULL, *me = NULL;
    long base = NREG();
    T_OK(rvx__rcache_init(&rc, ctx));
    rc.max_entries = 2;
    T_OK(rvx__rcache_get(&rc, A, 8, &ma)); /* held: oldest, but never evicted */
    touch(&rc, B, 8);
    touch(&rc, C, 8); /* evicts B, not A */
    T_CHECK(rvx__rcache_find(&rc, A, 8) && !rvx__rcache_find(&rc, B, 8) && rvx__rcache_find(&rc, C, 8),
            "a region in use was evicted (or the idle one kept)");
    T_OK(rvx__rcache_get(&rc, D, 8, &md)); /* evicts C */
    T_CHECK(!rvx__rcache_find(&rc, C, 8) && rc.evictions == 2, "C not evicted");
    /* everything cached is in use: E is registered but not cached */
    T_OK(rvx__rcache_get(&rc, E, 8, &me));
    T_CHECK(me && rc.uncached == 1 && rc.evictions == 2 && rvx__rcache_find(&rc, A, 8) &&
                rvx__rcache_find(&rc, D, 8) && !rvx__rcache_find(&rc, E, 8),
            "full of regions in use: uncached %llu", (unsigned long long)rc.uncached);
    T_CHECK(NREG() == base + 3, "registrations %ld", NREG() - base);
    rvx__rcache_put(&rc, me);
    T_CHECK(NREG() == base + 2, "uncached region not deregistered");
    rvx__rcache_put(&rc, ma); /* LRU: A */
    rvx__rcache_put(&rc, md); /* LRU: A D */
    T_CHECK(rc.nentries == 2 && rc.evictions == 2, "idle regions should stay cached");
    /* the bound lowered while A is in use: at its put the least recent idle region (D) goes */
    rc.max_entries = 1;
    T_OK(rvx__rcache_get(&rc, A, 8, &ma));
    rvx__rcache_put(&rc, ma);
    T_CHECK(rc.nentries == 1 && rvx__rcache_find(&rc, A, 8) && !rvx__rcache_find(&rc, D, 8),
            "lowered bound: %zu entries", rc.nentries);
    /* fini with a region in use deregisters it too */
    T_OK(rvx__rcache_get(&rc, A, 8, &ma));
    rvx__rcache_fini(&rc);
    T_CHECK(NREG() == base, "fini left %ld registrations", NREG() - base);
    munmap(buf, 16 * pg);
}

static void test_invalidate(void)
{
    rvx__rcache_t rc;
    char *buf = area(16);
    rvx_mem_t *mb = NULL, *mb2 = NULL;
    rvx__rcache_entry_t *e;
    long base = NREG();
    T_OK(rvx__rcache_init(&rc, ctx));
    /* idle: deregistered at once */
    touch(&rc, buf, pg);
    T_CHECK(NREG() == base + 1, "registered");
    rvx__rcache_invalidate(&rc, buf + 10, 1);
    T_CHECK(rc.invalidations == 1 && NREG() == base && !rvx__rcache_find(&rc, buf, 1),
            "idle region not dropped: invalidations %llu regs %ld",
            (unsigned long long)rc.invalidations, NREG() - base);
    touch(&rc, buf, pg);
    T_CHECK(rc.misses == 2, "after invalidation a lookup misses");
    rvx__rcache_invalidate(&rc, buf, pg);

    /* in use: out of the cache now, deregistered at the last put */
    T_OK(rvx__rcache_get(&rc, buf + 2 * pg, 100, &mb));
    rvx__rcache_invalidate(&rc, buf + 2 * pg, pg);
    T_CHECK(!rvx__rcache_find(&rc, buf + 2 * pg, 100) && NREG() == base + 1,
            "in-use region: found %d, regs %ld", rvx__rcache_find(&rc, buf + 2 * pg, 100) != NULL,
            NREG() - base);
    T_OK(rvx__rcache_get(&rc, buf + 2 * pg, 100, &mb2)); /* a fresh registration */
    T_CHECK(mb2 && mb2 != mb && NREG() == base + 2 && rc.misses == 4, "fresh registration expected");
    T_CHECK(mb && rvx_mem_addr(mb) == buf + 2 * pg, "holder's registration changed");
    rvx__rcache_put(&rc, mb);
    T_CHECK(NREG() == base + 1, "invalidated region not deregistered at its put");
    rvx__rcache_put(&rc, mb2);
    e = rvx__rcache_find(&rc, buf + 2 * pg, 100);
    T_CHECK(e && e->mem == mb2 && e->refs == 0 && NREG() == base + 1, "fresh region not cached");

    /* a range drops exactly the regions it overlaps */
    touch(&rc, buf + 4 * pg, pg);
    touch(&rc, buf + 6 * pg, pg);
    touch(&rc, buf + 8 * pg, pg);
    rvx__rcache_invalidate(&rc, buf + 5 * pg - 1, 2 * pg); /* last byte of 4, all of 5..6 */
    T_CHECK(rvx__rcache_find(&rc, buf + 2 * pg, 1) && !rvx__rcache_find(&rc, buf + 4 * pg, 1) &&
                !rvx__rcache_find(&rc, buf + 6 * pg, 1) && rvx__rcache_find(&rc, buf + 8 * pg, 1),
            "range invalidation");
    T_CHECK(rc.invalidations == 5 && NREG() == base + 2, "invalidations %llu regs %ld",
            (unsigned long long)rc.invalidations, NREG() - base);
    rvx__rcache_fini(&rc);
    munmap(buf, 16 * pg);
}

/* Memory the application maps itself: after munmap, the same address can come back over new
 * pages. With invalidation the next get registers afresh; without, the cache hits the old entry
 * (it cannot see munmap), which is why the policy asks for invalidation. */
static void test_mmap_reuse(void)
{
    rvx__rcache_t rc;
    size_t len = 4 * pg;
    char *p = area(4), *q;
    rvx_mem_t *m = NULL;
    uint64_t misses, hits;
    long base = NREG();
    T_OK(rvx__rcache_init(&rc, ctx));
    touch(&rc, p, len);
    munmap(p, len);
    rvx__rcache_invalidate(&rc, p, len);
    T_CHECK(NREG() == base && rc.invalidations == 1, "invalidated before reuse");
    q = (char *)mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                     -1, 0);
    if (q != p) {
        printf("skip part: mmap did not give the same address back (%p, %p)\n", (void *)q, (void *)p);
        if (q != MAP_FAILED) munmap(q, len);
        rvx__rcache_fini(&rc);
        return;
    }
    misses = rc.misses, hits = rc.hits;
    T_OK(rvx__rcache_get(&rc, q, len, &m));
    T_CHECK(rc.misses == misses + 1 && rc.hits == hits && NREG() == base + 1,
            "after invalidation the remapped address must be registered afresh");
    rvx__rcache_put(&rc, m);

    /* without invalidation the stale entry would be used */
    munmap(q, len);
    q = (char *)mmap(p, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                     -1, 0);
    if (q == p) {
        hits = rc.hits;
        touch(&rc, q, len);
        T_CHECK(rc.hits == hits + 1, "expected the (stale) hit that invalidation exists to prevent");
        rvx__rcache_invalidate(&rc, q, len);
        munmap(q, len);
    }
    rvx__rcache_fini(&rc);
}

/* ---- freed and reused heap memory ----------------------------------------------------------- */

/* Physical frame of the page at p, or 0 when not readable (frames need CAP_SYS_ADMIN). */
static uint64_t pfn(const void *p)
{
    uint64_t ent = 0;
    int fd = open("/proc/self/pagemap", O_RDONLY);
    if (fd < 0) return 0;
    if (pread(fd, &ent, sizeof(ent), (off_t)((uintptr_t)p / pg * sizeof(ent))) != sizeof(ent)) ent = 0;
    close(fd);
    return (ent >> 63) & 1 ? ent & ((1ull << 55) - 1) : 0;
}

static int mapped(const void *p, size_t len)
{
    unsigned char vec[64];
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(pg - 1);
    size_t n = len / pg < 64 ? len / pg : 64;
    return mincore((void *)a, n * pg, vec) == 0 || errno != ENOMEM;
}

#define BIG (8u << 20) /* far above glibc's default mmap threshold (128 KiB) */

/* Without the policy (a child, before any cache exists): a freed large buffer goes back to the
 * system, so its address could come back over other pages. This is the hazard. */
static void contrast_without_policy(void)
{
    pid_t pid = fork();
    int status = 0;
    if (pid == 0) {
        char *m = (char *)malloc(BIG);
        if (!m) _exit(3);
        uintptr_t a = (uintptr_t)m;
        memset(m, 1, BIG);
        free(m);
        _exit(mapped((void *)(a + pg), BIG - 2 * pg) ? 2 : 0);
    }
    waitpid(pid, &status, 0);
    T_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "without the policy a freed 8 MiB buffer should be unmapped (exit %d)",
            WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

static void test_free_malloc(void)
{
    rvx__rcache_t rc;
    char *m, *m2;
    uintptr_t a;
    rvx_mem_t *mem = NULL, *mem2 = NULL;
    uint64_t f0, f1, hits;
    size_t i, bad = 0;
    T_OK(rvx__rcache_init(&rc, ctx)); /* sets the malloc policy */
    m = (char *)malloc(BIG);
    T_CHECK(m != NULL, "malloc");
    if (!m) return;
    for (i = 0; i < BIG; i++) m[i] = (char)t_byte(7, i);
    T_OK(rvx__rcache_get(&rc, m, BIG, &mem));
    rvx__rcache_put(&rc, mem);
    f0 = pfn(m + BIG / 2);
    a = (uintptr_t)m;
    free(m);
    T_CHECK(mapped((void *)(a + pg), BIG - 2 * pg), "under the policy a freed buffer stays mapped");
    m2 = (char *)malloc(BIG);
    T_CHECK((uintptr_t)m2 == a, "same size again should reuse the address (%p, %#lx)", (void *)m2,
            (unsigned long)a);
    if ((uintptr_t)m2 != a) {
        free(m2);
        rvx__rcache_fini(&rc);
        return;
    }
    /* same pages: the old contents are still there past the allocator's own header */
    for (i = pg; i < BIG; i++) bad += m2[i] != (char)t_byte(7, i);
    T_CHECK(bad == 0, "%zu bytes changed: the pages were replaced", bad);
    f1 = pfn(m2 + BIG / 2);
    if (f0 && f1) T_CHECK(f0 == f1, "frame %llx became %llx", (unsigned long long)f0, (unsigned long long)f1);
    else printf("pagemap frames not readable (not root): checked by contents only\n");
    hits = rc.hits;
    T_OK(rvx__rcache_get(&rc, m2, BIG, &mem2));
    T_CHECK(rc.hits == hits + 1 && mem2 == mem && covers(mem2, m2, BIG),
            "the reused address hits its registration, which still covers the same pages");
    rvx__rcache_put(&rc, mem2);
    free(m2);
    rvx__rcache_fini(&rc);
}

/* A thread's buffer comes from the main heap too (M_ARENA_MAX 1): glibc unmaps the secondary
 * heaps of thread arenas when they empty, whatever the trim threshold. */
static void *thread_alloc(void *arg)
{
    char *m = (char *)malloc(BIG);
    (void)arg;
    if (m) memset(m, 3, BIG);
    return m;
}

static void test_thread_arena(void)
{
    rvx__rcache_t rc;
    pthread_t th;
    void *m = NULL;
    uintptr_t brk_end;
    T_OK(rvx__rcache_init(&rc, ctx));
    if (pthread_create(&th, NULL, thread_alloc, NULL) != 0) {
        printf("skip part: pthread_create failed\n");
        rvx__rcache_fini(&rc);
        return;
    }
    pthread_join(th, &m);
    brk_end = (uintptr_t)sbrk(0);
    T_CHECK(m && (uintptr_t)m < brk_end && (uintptr_t)m + BIG <= brk_end,
            "a thread's buffer %p is outside the main heap (break %#lx)", m, (unsigned long)brk_end);
    free(m);
    rvx__rcache_fini(&rc);
}

/* Sanitizers bring their own allocator, to which glibc's mallopt policy does not apply. */
#if defined(__SANITIZE_ADDRESS__)
#define T_OWN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer) || __has_feature(thread_sanitizer)
#define T_OWN_ALLOCATOR 1
#endif
#endif
#ifndef T_OWN_ALLOCATOR
#define T_OWN_ALLOCATOR 0
#endif

int main(void)
{
    long p = sysconf(_SC_PAGESIZE);
    pg = p > 0 ? (size_t)p : 4096;
    if (!T_OWN_ALLOCATOR) contrast_without_policy(); /* first: before the policy is set */
    if (rvx_init(&ctx) != RVX_OK) {
        fprintf(stderr, "FAIL: rvx_init\n");
        return 1;
    }
    t_rank = rvx_rank(ctx);
    test_hit_miss();
    test_overlap_in_use();
    test_lru();
    test_bytes_bound();
    test_refs();
    test_invalidate();
    test_mmap_reuse();
    if (!T_OWN_ALLOCATOR) {
        test_free_malloc();
        test_thread_arena();
    } else {
        printf("sanitizer allocator: the malloc policy checks do not apply, skipped\n");
    }
    rvx_finalize(ctx);
    if (!t_failures) printf("rcache: all checks passed\n");
    return t_exit();
}
