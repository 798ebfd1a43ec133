/* rvx/proto/rcache.h: a registration cache: memory stays registered after use, so a buffer sent
 * again skips registration (Open MPI's leave-pinned, seed 003). Include after core.h (rvx.h does).
 *
 * What it is
 *   - Interval-based: a lookup of [addr, addr+len) hits when one cached region contains it. New
 *     registrations are page-aligned and cover every cached region they overlap (merged into one;
 *     the old ones leave the cache), so cached regions never overlap and sit in an array sorted by
 *     address: a lookup is a binary search.
 *   - Bounded: at most max_entries regions and max_bytes bytes cached (RVX_RCACHE_MAX_ENTRIES,
 *     RVX_RCACHE_MAX_BYTES; the fields may be lowered after init). Idle regions are evicted least
 *     recently used first; a region in use (its reference count is not 0) is never evicted. When
 *     everything cached is in use and a new region does not fit, it is registered uncached and
 *     deregistered when its reference is dropped, so a transfer never fails for want of room.
 *   - Invalidation: rvx__rcache_invalidate drops every cached region overlapping a range; a region
 *     in use leaves the cache at once (no lookup finds it) and is deregistered at its last put.
 *   - One owner: like a worker, a cache belongs to one thread at a time (no locks).
 *
 * Freed and reused memory (the cache cannot see free() or munmap())
 *   A registration describes pages, and the application may free a buffer and get the same
 *   address back over different pages; a cache hit would then send from or to the old pages. rvx's
 *   policy, for the glibc allocator: rvx__rcache_init tells malloc never to give memory back to the
 *   system (mallopt M_MMAP_MAX 0: no chunk is mmapped, so none is munmapped at free;
 *   M_TRIM_THRESHOLD -1: the heap top is never trimmed; M_ARENA_MAX 1: every thread allocates from
 *   the main heap, since glibc drops the secondary heaps of thread arenas when they empty). A
 *   freed-and-reused heap address then keeps its pages, and its cached registration stays right.
 *   This is process-wide and stays in force after rvx__rcache_fini; arenas that threads created
 *   before the cache was initialised keep their behaviour. Memory the application maps and unmaps
 *   itself (mmap, shm segments, another allocator, malloc_trim) must be invalidated before it is
 *   unmapped or reused: rvx__rcache_invalidate(rc, addr, len).
 *
 * API (private: the tag/rendezvous protocol owns the cache)
 *   rvx__rcache_init(rc, ctx) / rvx__rcache_fini(rc)
 *   rvx__rcache_get(rc, addr, len, &mem)  hit or register; takes a reference
 *   rvx__rcache_put(rc, mem)              drops it
 *   rvx__rcache_invalidate(rc, addr, len)
 *   counters: hits, misses, evictions, invalidations, merged, uncached. */
#ifndef RVX_SYS_RCACHE_H
#define RVX_SYS_RCACHE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#define RVX__RC_CACHED 1u /* in the index (found by lookups); otherwise detached: in use only */

typedef struct rvx__rcache_entry {
    uintptr_t                 base;    /* page-aligned */
    size_t                    len;     /* whole pages */
    rvx_mem_t                *mem;
    unsigned                  refs;
    unsigned                  flags;
    struct rvx__rcache_entry *prev, *next; /* LRU list (cached, idle) or detached list (in use) */
} rvx__rcache_entry_t;

typedef struct rvx__rcache {
    rvx_context_t        *ctx;
    size_t                page;
    size_t                max_entries, max_bytes; /* bounds on what is cached */
    size_t                nentries, bytes;        /* cached now */
    size_t                cap;
    rvx__rcache_entry_t **index;                  /* cached regions sorted by base, disjoint */
    rvx__rcache_entry_t  *lru_head, *lru_tail;    /* cached idle regions, least recent first */
    rvx__rcache_entry_t  *detached;               /* in use but no longer cached */
    uint64_t hits, misses, evictions, invalidations;
    uint64_t merged;   /* cached regions replaced by a larger one that covers them */
    uint64_t uncached; /* registrations handed out without caching (bounds full of regions in use) */
} rvx__rcache_t;

/* ---- lists ---------------------------------------------------------------------------------- */
static inline void rvx__rcache_lru_unlink(rvx__rcache_t *rc, rvx__rcache_entry_t *e)
{
    if (e->prev) e->prev->next = e->next;
    else rc->lru_head = e->next;
    if (e->next) e->next->prev = e->prev;
    else rc->lru_tail = e->prev;
    e->prev = e->next = NULL;
}

static inline void rvx__rcache_lru_push(rvx__rcache_t *rc, rvx__rcache_entry_t *e)
{
    e->next = NULL;
    e->prev = rc->lru_tail;
    if (rc->lru_tail) rc->lru_tail->next = e;
    else rc->lru_head = e;
    rc->lru_tail = e;
}

RVX_COLD void rvx__rcache_detach_push(rvx__rcache_t *rc, rvx__rcache_entry_t *e)
{
    e->flags &= ~RVX__RC_CACHED;
    e->prev = NULL;
    e->next = rc->detached;
    if (rc->detached) rc->detached->prev = e;
    rc->detached = e;
}

RVX_COLD void rvx__rcache_detach_unlink(rvx__rcache_t *rc, rvx__rcache_entry_t *e)
{
    if (e->prev) e->prev->next = e->next;
    else rc->detached = e->next;
    if (e->next) e->next->prev = e->prev;
    e->prev = e->next = NULL;
}

/* ---- the index ------------------------------------------------------------------------------ */

/* Number of cached regions whose base is <= addr (the candidate container is the one before). */
static inline size_t rvx__rcache_upper(const rvx__rcache_t *rc, uintptr_t addr)
{
    size_t lo = 0, hi = rc->nentries;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (rc->index[mid]->base <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The cached region containing [addr, addr+len), or NULL. No side effects (tests use it). */
static inline rvx__rcache_entry_t *rvx__rcache_find(const rvx__rcache_t *rc, const void *addr,
                                                    size_t len)
{
    uintptr_t a = (uintptr_t)addr;
    size_t i = rvx__rcache_upper(rc, a);
    rvx__rcache_entry_t *e;
    if (!i) return NULL;
    e = rc->index[i - 1];
    return a - e->base <= e->len && len <= e->len - (a - e->base) ? e : NULL;
}

RVX_COLD void rvx__rcache_index_remove(rvx__rcache_t *rc, size_t i)
{
    rc->index[i]->flags &= ~RVX__RC_CACHED;
    rc->nentries--;
    rc->bytes -= rc->index[i]->len;
    memmove(&rc->index[i], &rc->index[i + 1], (rc->nentries - i) * sizeof(rc->index[0]));
}

RVX_COLD rvx_status_t rvx__rcache_index_insert(rvx__rcache_t *rc, rvx__rcache_entry_t *e)
{
    size_t i;
    if (rc->nentries == rc->cap) {
        size_t cap = rc->cap ? 2 * rc->cap : 16;
        rvx__rcache_entry_t **n =
            (rvx__rcache_entry_t **)realloc(rc->index, cap * sizeof(*n));
        if (!n) return RVX_ERR_NO_MEMORY;
        rc->index = n;
        rc->cap = cap;
    }
    i = rvx__rcache_upper(rc, e->base);
    memmove(&rc->index[i + 1], &rc->index[i], (rc->nentries - i) * sizeof(rc->index[0]));
    rc->index[i] = e;
    rc->nentries++;
    rc->bytes += e->len;
    e->flags |= RVX__RC_CACHED;
    return RVX_OK;
}

RVX_COLD void rvx__rcache_release(rvx__rcache_entry_t *e)
{
    rvx_mem_dereg(e->mem);
    free(e);
}

/* Take cached region i out of the cache: deregister it if idle, else leave it to its last put. */
RVX_COLD void rvx__rcache_drop(rvx__rcache_t *rc, size_t i)
{
    rvx__rcache_entry_t *e = rc->index[i];
    rvx__rcache_index_remove(rc, i);
    if (e->refs == 0) {
        rvx__rcache_lru_unlink(rc, e);
        rvx__rcache_release(e);
    } else {
        rvx__rcache_detach_push(rc, e);
    }
}

/* Evict idle regions, least recently used first, until `more` regions of `more_bytes` in all fit
 * within the bounds. 0: they cannot (too large, or what is left is in use). */
RVX_COLD int rvx__rcache_make_room(rvx__rcache_t *rc, size_t more, size_t more_bytes)
{
    if (more > rc->max_entries || more_bytes > rc->max_bytes) return 0;
    while (rc->nentries + more > rc->max_entries || rc->bytes + more_bytes > rc->max_bytes) {
        rvx__rcache_entry_t *victim = rc->lru_head;
        if (!victim) return 0;
        rvx__rcache_drop(rc, rvx__rcache_upper(rc, victim->base) - 1);
        rc->evictions++;
    }
    return 1;
}

/* ---- init, fini ----------------------------------------------------------------------------- */

static inline rvx_status_t rvx__rcache_init(rvx__rcache_t *rc, rvx_context_t *ctx)
{
    long page;
    if (!rc || !ctx) return RVX_ERR_INVALID_PARAM;
    memset(rc, 0, sizeof(*rc));
    page = sysconf(_SC_PAGESIZE);
    rc->ctx = ctx;
    rc->page = page > 0 ? (size_t)page : 4096;
    rc->max_entries = (size_t)RVX_RCACHE_MAX_ENTRIES;
    rc->max_bytes = (size_t)RVX_RCACHE_MAX_BYTES;
#ifdef __GLIBC__
    /* The leave-pinned policy above: freed heap memory keeps its pages. */
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, -1);
    mallopt(M_ARENA_MAX, 1);
#endif
    return RVX_OK;
}

/* Deregisters everything, regions still in use too (their holders must not use them again). */
static inline void rvx__rcache_fini(rvx__rcache_t *rc)
{
    size_t i, busy = 0;
    if (!rc || !rc->ctx) return;
    for (i = 0; i < rc->nentries; i++) {
        busy += rc->index[i]->refs != 0;
        rvx__rcache_release(rc->index[i]);
    }
    while (rc->detached) {
        rvx__rcache_entry_t *e = rc->detached;
        rc->detached = e->next;
        busy++;
        rvx__rcache_release(e);
    }
    if (busy) rvx__log("rcache: %zu region(s) still in use at fini were deregistered", busy);
    free(rc->index);
    rc->index = NULL;
    rc->nentries = rc->cap = rc->bytes = 0;
    rc->lru_head = rc->lru_tail = NULL;
    rc->ctx = NULL;
}

/* ---- get, put, invalidate ------------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__rcache_miss(rvx__rcache_t *rc, uintptr_t a, size_t len, rvx_mem_t **memp)
{
    uintptr_t start = a & ~(uintptr_t)(rc->page - 1);
    uintptr_t end = (a + len + rc->page - 1) & ~(uintptr_t)(rc->page - 1);
    uintptr_t ustart = start, uend = end;
    rvx__rcache_entry_t *e;
    rvx_status_t st;
    size_t i;
    if (end <= a) return RVX_ERR_INVALID_PARAM; /* wraps around the address space */
    rc->misses++;

    /* Cached regions overlapping [start, end) are contiguous in the index; the new region covers
     * them all and replaces them. */
    i = rvx__rcache_upper(rc, start);
    if (i && rc->index[i - 1]->base + rc->index[i - 1]->len > start) i--;
    while (i < rc->nentries && rc->index[i]->base < end) {
        e = rc->index[i];
        if (e->base < ustart) ustart = e->base;
        if (e->base + e->len > uend) uend = e->base + e->len;
        rvx__rcache_drop(rc, i);
        rc->merged++;
    }

    e = (rvx__rcache_entry_t *)calloc(1, sizeof(*e));
    if (!e) return RVX_ERR_NO_MEMORY;
    st = rvx__mem_reg(rc->ctx, (void *)ustart, uend - ustart, 0, &e->mem);
    if (st != RVX_OK && (ustart != start || uend != end)) {
        /* part of a merged region may have been unmapped without invalidation: this range only */
        ustart = start;
        uend = end;
        st = rvx__mem_reg(rc->ctx, (void *)ustart, uend - ustart, 0, &e->mem);
    }
    if (st != RVX_OK) {
        free(e);
        return st;
    }
    e->base = ustart;
    e->len = uend - ustart;
    e->refs = 1;
    if (!rvx__rcache_make_room(rc, 1, e->len) || rvx__rcache_index_insert(rc, e) != RVX_OK) {
        rc->uncached++;
        rvx__rcache_detach_push(rc, e);
    }
    *memp = e->mem;
    return RVX_OK;
}

/* A registration covering [addr, addr+len), with a reference held until rvx__rcache_put. The
 * region returned is page-aligned and may be larger than asked. */
static inline rvx_status_t rvx__rcache_get(rvx__rcache_t *rc, void *addr, size_t len,
                                           rvx_mem_t **mem)
{
    rvx__rcache_entry_t *e;
    if (RVX_UNLIKELY(!rc || !addr || !len || !mem)) return RVX_ERR_INVALID_PARAM;
    e = rvx__rcache_find(rc, addr, len);
    if (RVX_UNLIKELY(!e)) return rvx__rcache_miss(rc, (uintptr_t)addr, len, mem);
    if (e->refs++ == 0) rvx__rcache_lru_unlink(rc, e);
    rc->hits++;
    *mem = e->mem;
    return RVX_OK;
}

RVX_COLD rvx__rcache_entry_t *rvx__rcache_find_detached(rvx__rcache_t *rc, rvx_mem_t *mem)
{
    rvx__rcache_entry_t *e;
    for (e = rc->detached; e; e = e->next)
        if (e->mem == mem) return e;
    return NULL;
}

static inline void rvx__rcache_put(rvx__rcache_t *rc, rvx_mem_t *mem)
{
    rvx__rcache_entry_t *e;
    size_t i;
    if (RVX_UNLIKELY(!rc || !mem)) return;
    i = rvx__rcache_upper(rc, (uintptr_t)rvx_mem_addr(mem));
    e = i ? rc->index[i - 1] : NULL;
    if (RVX_UNLIKELY(!e || e->mem != mem)) {
        e = rvx__rcache_find_detached(rc, mem);
        if (!e || !e->refs) {
            rvx__log("rcache: put of a region the cache did not hand out (or put twice)");
            return;
        }
        if (--e->refs == 0) {
            rvx__rcache_detach_unlink(rc, e);
            rvx__rcache_release(e);
        }
        return;
    }
    if (RVX_UNLIKELY(!e->refs)) {
        rvx__log("rcache: put of a region with no reference (put twice)");
        return;
    }
    if (--e->refs == 0) {
        rvx__rcache_lru_push(rc, e);
        if (RVX_UNLIKELY(rc->nentries > rc->max_entries || rc->bytes > rc->max_bytes))
            rvx__rcache_make_room(rc, 0, 0); /* the bounds were lowered while it was in use */
    }
}

/* Drop every cached region that overlaps [addr, addr+len): call it before memory the cache may
 * have registered is unmapped or given new pages. */
static inline void rvx__rcache_invalidate(rvx__rcache_t *rc, void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr, end = a + len;
    size_t i;
    if (!rc || !len) return;
    if (end < a) end = UINTPTR_MAX;
    i = rvx__rcache_upper(rc, a);
    if (i && rc->index[i - 1]->base + rc->index[i - 1]->len > a) i--;
    while (i < rc->nentries && rc->index[i]->base < end) {
        rvx__rcache_drop(rc, i);
        rc->invalidations++;
    }
}

#endif /* RVX_SYS_RCACHE_H */
