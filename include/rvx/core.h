/* rvx/core.h: context, worker, endpoint, memory, remote keys, flush and progress.
 *
 * Objects
 *   rvx_context_t  one per process: the bootstrap (rank, size) and the transport's device state.
 *   rvx_worker_t   one per thread. A worker and everything reached through it (its endpoints,
 *                  requests, progress) belongs to one thread at a time: there are no locks, as in
 *                  UCX's UCS_THREAD_MODE_SINGLE. Creating a worker is collective: every rank
 *                  creates its k-th worker in the same order, and their addresses are exchanged.
 *   rvx_ep_t       a connection from a worker to the same-numbered worker of one rank. Both sides
 *                  create endpoints to each other: a worker polls only the peers it has endpoints
 *                  to, and messages from a peer wait in its ring until the endpoint exists.
 *   rvx_mem_t      a local memory region that peers may access through its packed rkey.
 *   rvx_rkey_t     a peer's region, unpacked once: a put reads this struct and nothing else.
 *
 * Completion semantics (every transport)
 *   local completion   the source buffer may be reused: on return for rvx_put and every AM send;
 *                      when the request completes for rvx_put_zcopy and rvx_get(_zcopy) (and on
 *                      return when they return RVX_OK).
 *   remote completion  the data is visible to the target: after rvx_ep_flush (or a completed
 *                      rvx_ep_flush_nb) on the same endpoint. On shm every put is already visible
 *                      when it returns; code that relies on that is not portable to a NIC.
 *   ordering           operations on one endpoint reach the target in the order issued, so a put
 *                      followed by an AM is seen in that order by the AM's handler (shm and RC).
 * Lanes: the context holds one transport instance per lane (rc_mlx5: one device each), tl[l];
 *   each worker an iface per lane, each endpoint a tl ep per lane, each region a registration per
 *   lane, and a packed rkey one key per lane. Lane 0 is the only one the API uses; the other lanes
 *   (RVX_LANES > 1) carry rendezvous data only (proto/rndv/), and progress polls one only while
 *   it has operations outstanding. With RVX_LANES = 1 each array has one element.
 * Functions returning RVX_INPROGRESS complete later through their request: call rvx_progress()
 * until req->status != RVX_INPROGRESS, or rvx_wait(). */
#ifndef RVX_CORE_H
#define RVX_CORE_H

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define RVX_RKEY_PACKED_SIZE (RVX_LANES * RVX__TL_RKEY_PACKED_SIZE) /* one key per lane */
/* A worker's address: one tl address per lane, each padded to 8 bytes (they hold 64-bit fields,
 * and the gathered array places them back to back). */
#define RVX__ADDR_LANE(n)   ((RVX__TL_ADDR_SIZE(n) + 7) & ~(size_t)7)
#define RVX__ADDR_STRIDE(n) (RVX_LANES * RVX__ADDR_LANE(n))
/* What the worker keeps of each address after wire-up: the part a transport still reads
 * (RVX__TL_ADDR_KEPT; all of it by default). rc_mlx5's QPN table, 4 bytes per rank in every
 * rank's address, served the wire-up alone. */
#ifdef RVX__TL_ADDR_KEPT
#define RVX__ADDR_KLANE(n)  ((RVX__TL_ADDR_KEPT(n) + 7) & ~(size_t)7)
#else
#define RVX__ADDR_KLANE(n)  RVX__ADDR_LANE(n)
#endif
#define RVX__ADDR_KSTRIDE(n) (RVX_LANES * RVX__ADDR_KLANE(n))

typedef struct rvx__region {
    uintptr_t base;
    size_t    len;
} rvx__region_t;

struct rvx_context {
    rvx__boot_t    boot;
    rvx__tl_ctx_t  tl[RVX_LANES];          /* one transport instance per lane (rc_mlx5: a device) */
    uint32_t       lane_bw[RVX_LANES];     /* MB/s of each lane, as its port reports it */
    uint64_t       lane_bw_sum;
    unsigned       nworkers, cap_workers;
    rvx_worker_t **workers;                /* progressed while a collective waits */
    unsigned       nregions, cap_regions;  /* registered regions: long-AM targets are checked */
    rvx__region_t *regions;
};

struct rvx_worker {
    rvx__tl_iface_t    iface[RVX_LANES]; /* first: progress reads lane 0's and nothing else; the
                                            other lanes are polled only while work is outstanding */
    rvx_context_t     *ctx;
    rvx_ep_t         **eps;          /* by rank */
    uint8_t           *addrs;        /* every rank's worker address (RVX__ADDR_STRIDE bytes each) */
    rvx_worker_stats_t stats;
    unsigned           reported;     /* bit per stats kind already reported on stderr */
    /* What the protocols keep per worker, read by rvx_progress (proto/hooks.h) */
    unsigned           proto_pending; /* protocol operations in flight: progress steps them */
    unsigned           proto_queued;  /* peers with protocol frames waiting for ring room */
    void              *proto;         /* the protocols' queues and state */
    unsigned           in_handler;    /* AM handlers running: requests are refused */
};

struct rvx_ep {
    rvx__tl_ep_t  tl[RVX_LANES];    /* first: the fast path reads lane 0's and nothing else */
    rvx_worker_t *worker;
    int           rank;
};

struct rvx_mem {
    rvx__tl_mem_t  tl[RVX_LANES];   /* the same bytes registered on every lane */
    rvx_context_t *ctx;
    int            allocated;
    int            exposed;         /* in ctx->regions: a peer's long AM may land in it */
};

/* What the protocol layer provides to this one, composed from every protocol of the build in
 * proto/hooks.h (included after them): per-worker state set up and torn down, an endpoint's
 * protocol operations ended before it goes, and progress. */
RVX_INLINE int rvx_progress(rvx_worker_t *w);
static rvx_status_t rvx__proto_worker_init(rvx_worker_t *w);
static void rvx__proto_worker_fini(rvx_worker_t *w);
static void rvx__proto_ep_close(rvx_ep_t *ep);

/* ---- context -------------------------------------------------------------------------------- */

/* The name of this build: transport, protocol, fabric and limits. */
static inline const char *rvx_config_string(void) { return RVX_CONFIG_STRING; }

/* Start: read the environment (RVX_RANK, RVX_SIZE, RVX_BOOT_DIR, ...) and open the transport,
 * one instance per lane. */
static inline rvx_status_t rvx_init(rvx_context_t **ctxp)
{
    rvx_context_t *ctx;
    rvx_status_t st;
    unsigned l;
    if (!ctxp) return RVX_ERR_INVALID_PARAM;
    *ctxp = NULL;
    ctx = (rvx_context_t *)calloc(1, sizeof(*ctx));
    if (!ctx) return RVX_ERR_NO_MEMORY;
    st = rvx__boot_init(&ctx->boot);
    if (st != RVX_OK) {
        free(ctx);
        return st;
    }
    for (l = 0; l < RVX_LANES; l++) {
        if ((st = rvx__tl_ctx_init(&ctx->tl[l], l)) != RVX_OK) {
            while (l--) rvx__tl_ctx_fini(&ctx->tl[l]);
            rvx__boot_fini(&ctx->boot);
            free(ctx);
            return st;
        }
        ctx->lane_bw[l] = rvx__tl_ctx_bw_mbs(&ctx->tl[l]);
        ctx->lane_bw_sum += ctx->lane_bw[l];
    }
    *ctxp = ctx;
    return RVX_OK;
}

static inline void rvx_finalize(rvx_context_t *ctx)
{
    unsigned l;
    if (!ctx) return;
    for (l = RVX_LANES; l-- > 0;) rvx__tl_ctx_fini(&ctx->tl[l]);
    rvx__boot_fini(&ctx->boot);
    free(ctx->regions);
    free(ctx->workers);
    free(ctx);
}

static inline int rvx_rank(const rvx_context_t *ctx) { return ctx->boot.rank; }
static inline int rvx_size(const rvx_context_t *ctx) { return ctx->boot.size; }

/* The bandwidth of lane l (0 .. RVX_LANES-1) in MB/s, as its port reported it; 0 for no lane. */
static inline uint32_t rvx_lane_bw_mbs(const rvx_context_t *ctx, unsigned l)
{
    return l < RVX_LANES ? ctx->lane_bw[l] : 0;
}

/* A bootstrap collective that keeps every worker of the context progressing while it waits, so
 * that a rank still waiting for an answer from one already in the collective gets it. */
RVX_COLD rvx_status_t rvx__ctx_gather(rvx_context_t *ctx, const void *mine, size_t len, void *all)
{
    unsigned spins = 0, i;
    rvx_status_t st = rvx__boot_gather_start(&ctx->boot, mine, len, all);
    if (st != RVX_OK) return st;
    while ((st = rvx__boot_gather_test(&ctx->boot, len, all)) == RVX_INPROGRESS) {
        int done = 0;
        for (i = 0; i < ctx->nworkers; i++) done += rvx_progress(ctx->workers[i]);
        if (done) spins = 0;
        else rvx__backoff_coarse(&spins);
    }
    return st;
}

/* Out-of-band collectives over the bootstrap, for exchanging rkeys and addresses (slow). Every
 * rank calls them in the same order; the context's workers are progressed while they wait. */
static inline rvx_status_t rvx_allgather(rvx_context_t *ctx, const void *mine, size_t len, void *all)
{
    if (!ctx || (!mine && len) || (!all && len)) return RVX_ERR_INVALID_PARAM;
    return rvx__ctx_gather(ctx, mine, len, all);
}

static inline rvx_status_t rvx_barrier(rvx_context_t *ctx)
{
    char one = 1, *all;
    rvx_status_t st;
    if (!ctx) return RVX_ERR_INVALID_PARAM;
    all = (char *)malloc((size_t)ctx->boot.size);
    if (!all) return RVX_ERR_NO_MEMORY;
    st = rvx__ctx_gather(ctx, &one, 1, all);
    free(all);
    return st;
}

/* ---- worker --------------------------------------------------------------------------------- */

/* Close lanes [0, nl) of a worker's transport. */
RVX_COLD void rvx__worker_close_lanes(rvx_worker_t *w, unsigned nl)
{
    while (nl--) rvx__tl_iface_fini(&w->iface[nl]);
}

/* Open the worker's transport on every lane and write each lane's address into `mine`. */
RVX_COLD rvx_status_t rvx__worker_open_lanes(rvx_worker_t *w, uint8_t *mine, int n)
{
    rvx_context_t *ctx = w->ctx;
    unsigned l;
    for (l = 0; l < RVX_LANES; l++) {
#ifdef RVX__TL_IFACE_INIT_NODE
        rvx_status_t st = rvx__tl_iface_init_node(&w->iface[l], &ctx->tl[l], ctx->boot.rank, n,
                                                  ctx->boot.node, ctx->boot.local, ctx->boot.nlocal);
#else
        rvx_status_t st = rvx__tl_iface_init(&w->iface[l], &ctx->tl[l], ctx->boot.rank, n,
                                             ctx->boot.node);
#endif
        if (st != RVX_OK) {
            rvx__worker_close_lanes(w, l);
            return st;
        }
        rvx__tl_iface_address(&w->iface[l], (rvx__tl_addr_t *)(void *)(mine + l * RVX__ADDR_LANE(n)));
    }
    return RVX_OK;
}

/* Room for one more worker in the context's list. */
RVX_COLD rvx_status_t rvx__ctx_worker_room(rvx_context_t *ctx)
{
    unsigned cap;
    rvx_worker_t **ws;
    if (ctx->nworkers < ctx->cap_workers) return RVX_OK;
    cap = ctx->cap_workers ? 2 * ctx->cap_workers : 4;
    ws = (rvx_worker_t **)realloc(ctx->workers, cap * sizeof(*ws));
    if (!ws) return RVX_ERR_NO_MEMORY;
    ctx->workers = ws;
    ctx->cap_workers = cap;
    return RVX_OK;
}

/* Every rank's address gathered; connection-oriented transports connect to every rank now, so
 * that one-sided operations reach a rank that never creates an endpoint back. */
RVX_COLD rvx_status_t rvx__worker_wireup(rvx_worker_t *w, const uint8_t *mine, int n)
{
    rvx_status_t st = rvx__ctx_gather(w->ctx, mine, RVX__ADDR_STRIDE(n), w->addrs);
    unsigned l;
    (void)n; /* unused where a tl's address size does not depend on the job's size */
    for (l = 0; l < RVX_LANES && st == RVX_OK; l++)
        st = rvx__tl_iface_wireup(&w->iface[l], w->addrs + l * RVX__ADDR_LANE(n), RVX__ADDR_STRIDE(n));
#ifdef RVX__TL_ADDR_KEPT
    if (st == RVX_OK) { /* keep only what is read later, packed (the moves go downwards) */
        size_t r;
        uint8_t *a;
        for (r = 0; r < (size_t)n; r++)
            for (l = 0; l < RVX_LANES; l++)
                memmove(w->addrs + r * RVX__ADDR_KSTRIDE(n) + l * RVX__ADDR_KLANE(n),
                        w->addrs + r * RVX__ADDR_STRIDE(n) + l * RVX__ADDR_LANE(n), RVX__ADDR_KLANE(n));
        a = (uint8_t *)realloc(w->addrs, (size_t)n * RVX__ADDR_KSTRIDE(n));
        if (a) w->addrs = a; /* else the packed copy stays in the larger block */
        for (l = 0; l < RVX_LANES; l++)
            rvx__tl_iface_addrs(&w->iface[l], w->addrs + l * RVX__ADDR_KLANE(n), RVX__ADDR_KSTRIDE(n));
    }
#endif
    return st;
}

/* Collective: every rank calls it. */
static inline rvx_status_t rvx_worker_create(rvx_context_t *ctx, rvx_worker_t **wp)
{
    rvx_worker_t *w;
    uint8_t *mine = NULL;
    rvx_status_t st;
    int n;
    if (!ctx || !wp) return RVX_ERR_INVALID_PARAM;
    *wp = NULL;
    n = ctx->boot.size;
    w = (rvx_worker_t *)calloc(1, sizeof(*w));
    if (!w) return RVX_ERR_NO_MEMORY;
    w->ctx = ctx;
    w->eps = (rvx_ep_t **)calloc((size_t)n, sizeof(*w->eps));
    w->addrs = (uint8_t *)calloc((size_t)n, RVX__ADDR_STRIDE(n));
    mine = (uint8_t *)calloc(1, RVX__ADDR_STRIDE(n));
    if (!w->eps || !w->addrs || !mine) { st = RVX_ERR_NO_MEMORY; goto fail; }
    if ((st = rvx__worker_open_lanes(w, mine, n)) != RVX_OK) goto fail;
    st = rvx__ctx_worker_room(ctx);
    if (st == RVX_OK) st = rvx__worker_wireup(w, mine, n);
    if (st == RVX_OK) st = rvx__proto_worker_init(w);
    if (st != RVX_OK) {
        rvx__worker_close_lanes(w, RVX_LANES);
        goto fail;
    }
    ctx->workers[ctx->nworkers++] = w;
    *wp = w;
    free(mine);
    return RVX_OK;
fail:
    free(mine);
    free(w->eps);
    free(w->addrs);
    free(w);
    return st;
}

static inline void rvx_ep_destroy(rvx_ep_t *ep);

static inline void rvx_worker_destroy(rvx_worker_t *w)
{
    rvx_context_t *ctx;
    unsigned i;
    int r;
    if (!w) return;
    ctx = w->ctx;
#ifdef RVX__TL_IFACE_LEAVE
    for (i = 0; i < RVX_LANES; i++) rvx__tl_iface_leave(&w->iface[i]); /* before any endpoint goes */
#endif
    for (r = 0; r < ctx->boot.size; r++)
        if (w->eps[r]) rvx_ep_destroy(w->eps[r]);
    rvx__proto_worker_fini(w);
    rvx__worker_close_lanes(w, RVX_LANES);
    for (i = 0; i < ctx->nworkers; i++)
        if (ctx->workers[i] == w) ctx->workers[i] = ctx->workers[--ctx->nworkers];
    free(w->eps);
    free(w->addrs);
    free(w);
}

static inline void rvx_worker_stats(const rvx_worker_t *w, rvx_worker_stats_t *out) { *out = w->stats; }

/* ---- endpoints ------------------------------------------------------------------------------ */

static inline rvx_status_t rvx_ep_create(rvx_worker_t *w, int rank, rvx_ep_t **epp)
{
    rvx_ep_t *ep;
    const uint8_t *addr;
    unsigned l;
    if (!w || !epp) return RVX_ERR_INVALID_PARAM;
    *epp = NULL;
    if (rank < 0 || rank >= w->ctx->boot.size) {
        rvx__log("ep_create: rank %d is not in this job (size %d)", rank, w->ctx->boot.size);
        return RVX_ERR_INVALID_PARAM;
    }
    if (w->eps[rank]) { *epp = w->eps[rank]; return RVX_OK; }
    if (posix_memalign((void **)&ep, RVX_CACHELINE, sizeof(*ep))) return RVX_ERR_NO_MEMORY;
    memset(ep, 0, sizeof(*ep));
    addr = w->addrs + (size_t)rank * RVX__ADDR_KSTRIDE(w->ctx->boot.size);
    for (l = 0; l < RVX_LANES; l++) {
        rvx_status_t st = rvx__tl_ep_connect(&w->iface[l], &ep->tl[l], rank,
                                             (rvx__tl_addr_t *)(void *)(addr + l * RVX__ADDR_KLANE(w->ctx->boot.size)));
        if (st != RVX_OK) {
            while (l--) rvx__tl_ep_disconnect(&ep->tl[l]);
            free(ep);
            return st;
        }
    }
    ep->worker = w;
    ep->rank = rank;
    w->eps[rank] = ep;
    *epp = ep;
    return RVX_OK;
}

static inline void rvx_ep_destroy(rvx_ep_t *ep)
{
    unsigned l;
    if (!ep) return;
    rvx__proto_ep_close(ep); /* its pending protocol operations end with RVX_ERR_CANCELED */
    ep->worker->eps[ep->rank] = NULL;
    for (l = RVX_LANES; l-- > 0;) rvx__tl_ep_disconnect(&ep->tl[l]);
    free(ep);
}

static inline int rvx_ep_rank(const rvx_ep_t *ep) { return ep->rank; }

/* RVX_OK while the endpoint works; RVX_ERR_PEER_FAILED once its peer is known to be gone;
 * RVX_ERR_REMOTE_ACCESS when an access error failed it (mlx5: the peer answered, the endpoint
 * must be re-created). */
static inline rvx_status_t rvx_ep_status(rvx_ep_t *ep)
{
    if (!ep) return RVX_ERR_INVALID_PARAM;
    return rvx__tl_ep_alive(&ep->tl[0]);
}

/* ---- memory and remote keys ----------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__ctx_add_region(rvx_context_t *ctx, void *addr, size_t len)
{
    if (ctx->nregions == ctx->cap_regions) {
        unsigned cap = ctx->cap_regions ? 2 * ctx->cap_regions : 8;
        rvx__region_t *r = (rvx__region_t *)realloc(ctx->regions, cap * sizeof(*r));
        if (!r) return RVX_ERR_NO_MEMORY;
        ctx->regions = r;
        ctx->cap_regions = cap;
    }
    ctx->regions[ctx->nregions].base = (uintptr_t)addr;
    ctx->regions[ctx->nregions].len = len;
    ctx->nregions++;
    return RVX_OK;
}

/* Is [addr, addr+len) inside one registered region? (checks long-AM targets sent by peers) */
RVX_COLD int rvx__ctx_owns(const rvx_context_t *ctx, uint64_t addr, uint64_t len)
{
    unsigned i;
    for (i = 0; i < ctx->nregions; i++) {
        uint64_t off = addr - ctx->regions[i].base;
        if (off <= ctx->regions[i].len && len <= ctx->regions[i].len - off) return 1;
    }
    return 0;
}

/* A region registered on lane 0 (st: how that went) is registered on the other lanes too and
 * recorded in the context; on failure everything is undone. */
RVX_COLD rvx_status_t rvx__mem_finish(rvx_context_t *ctx, rvx_mem_t *mem, rvx_status_t st,
                                      int expose, rvx_mem_t **memp)
{
    unsigned l = 1;
    if (st != RVX_OK) {
        free(mem);
        return st;
    }
    for (; l < RVX_LANES && st == RVX_OK; l++)
        st = rvx__tl_mem_reg(&ctx->tl[l], mem->tl[0].addr, mem->tl[0].len, &mem->tl[l]);
    if (st == RVX_OK && expose) st = rvx__ctx_add_region(ctx, mem->tl[0].addr, mem->tl[0].len);
    else if (st != RVX_OK) l--; /* lane l - 1 failed: lanes below it hold a registration */
    if (st != RVX_OK) {
        while (l--) rvx__tl_mem_dereg(&ctx->tl[l], &mem->tl[l]);
        free(mem);
        return st;
    }
    mem->ctx = ctx;
    *memp = mem;
    return RVX_OK;
}

/* Memory that peers can reach by plain loads and stores on shm, and that is registered with the
 * NIC on mlx5. Zero-filled. */
/* No process has more address space than this (x86-64 and aarch64 user space: 2^47 bytes). */
#define RVX__MEM_LEN_MAX ((size_t)1 << 47)

/* [addr, addr + len) does not wrap and is mapped throughout: msync walks the mappings, not the
 * pages, and fails with ENOMEM at the first hole. A NIC's registration would fail there too;
 * shm's cross-memory attach would otherwise expose whatever is mapped later in the range. */
static inline int rvx__mem_range_mapped(const void *addr, size_t len)
{
    uintptr_t a = (uintptr_t)addr, pg = (uintptr_t)sysconf(_SC_PAGESIZE), base;
    if (len > RVX__MEM_LEN_MAX || a + len < a || a + len > UINTPTR_MAX - pg) return 0;
    base = a & ~(pg - 1);
    return msync((void *)base, a + len - base, MS_ASYNC) == 0;
}

RVX_COLD rvx_status_t rvx__mem_alloc(rvx_context_t *ctx, size_t len, int expose, rvx_mem_t **memp)
{
    rvx_mem_t *mem;
    if (!ctx || !memp || !len) return RVX_ERR_INVALID_PARAM;
    *memp = NULL;
    if (len > RVX__MEM_LEN_MAX) return RVX_ERR_NO_MEMORY; /* page rounding must not wrap */
    mem = (rvx_mem_t *)calloc(1, sizeof(*mem));
    if (!mem) return RVX_ERR_NO_MEMORY;
    mem->allocated = 1;
    mem->exposed = expose;
    return rvx__mem_finish(ctx, mem, rvx__tl_mem_alloc(&ctx->tl[0], len, &mem->tl[0]), expose, memp);
}

static inline rvx_status_t rvx_mem_alloc(rvx_context_t *ctx, size_t len, rvx_mem_t **memp)
{
    return rvx__mem_alloc(ctx, len, 1, memp);
}

/* expose: a peer's long AM may land in it (what the application registered); 0 for what the
 * protocols register for themselves, such as the registration cache's whole pages, whose slack
 * the application never exposed. */
RVX_COLD rvx_status_t rvx__mem_reg(rvx_context_t *ctx, void *addr, size_t len, int expose,
                                   rvx_mem_t **memp)
{
    rvx_mem_t *mem;
    if (!ctx || !memp || !addr || !len) return RVX_ERR_INVALID_PARAM;
    *memp = NULL;
    if (!rvx__mem_range_mapped(addr, len)) return RVX_ERR_INVALID_PARAM;
    mem = (rvx_mem_t *)calloc(1, sizeof(*mem));
    if (!mem) return RVX_ERR_NO_MEMORY;
    mem->exposed = expose;
    return rvx__mem_finish(ctx, mem, rvx__tl_mem_reg(&ctx->tl[0], addr, len, &mem->tl[0]), expose,
                           memp);
}

/* Register memory the application already has. */
static inline rvx_status_t rvx_mem_reg(rvx_context_t *ctx, void *addr, size_t len, rvx_mem_t **memp)
{
    return rvx__mem_reg(ctx, addr, len, 1, memp);
}

static inline void rvx_mem_dereg(rvx_mem_t *mem)
{
    rvx_context_t *ctx;
    unsigned i;
    if (!mem) return;
    ctx = mem->ctx;
    for (i = 0; mem->exposed && i < ctx->nregions; i++) {
        if (ctx->regions[i].base == (uintptr_t)mem->tl[0].addr && ctx->regions[i].len == mem->tl[0].len) {
            ctx->regions[i] = ctx->regions[--ctx->nregions];
            break;
        }
    }
    for (i = RVX_LANES; i-- > 0;) rvx__tl_mem_dereg(&ctx->tl[i], &mem->tl[i]);
    free(mem);
}

static inline void *rvx_mem_addr(const rvx_mem_t *mem) { return mem->tl[0].addr; }
static inline size_t rvx_mem_len(const rvx_mem_t *mem) { return mem->tl[0].len; }

/* Write the region's remote key into buf (RVX_RKEY_PACKED_SIZE bytes) for a peer to unpack. */
static inline rvx_status_t rvx_rkey_pack(const rvx_mem_t *mem, void *buf)
{
    unsigned l;
    if (!mem || !buf) return RVX_ERR_INVALID_PARAM;
    for (l = 0; l < RVX_LANES; l++) {
        rvx__tl_rkey_pack(&mem->tl[l], (uint8_t *)buf + l * RVX__TL_RKEY_PACKED_SIZE);
        rvx__tl_rkey_stamp((uint8_t *)buf + l * RVX__TL_RKEY_PACKED_SIZE, rvx_rank(mem->ctx));
    }
    return RVX_OK;
}

/* Resolve a peer's packed key once (map its memory, byte-swap keys): puts then read only *rkey.
 * Release with rvx_rkey_release. (With lanes: lane 0's key, the first in the packed form.) */
static inline rvx_status_t rvx_rkey_unpack(rvx_ep_t *ep, const void *buf, rvx_rkey_t *rkey)
{
    rvx_status_t st;
    if (!ep || !buf || !rkey) return RVX_ERR_INVALID_PARAM;
    st = rvx__tl_rkey_unpack(&ep->tl[0], buf, rkey);
#if RVX_DEBUG
    rkey->dbg_ep = ep; /* after the unpack, which may write the whole key */
#endif
    return st;
}

#if RVX_DEBUG
/* A key used with another endpoint than the one it was unpacked on: refused in RVX_DEBUG builds.
 * A key holds its owner's numbers only, and those can coincide across peers (a NIC's key numbers
 * do), so the wrong peer's memory would be reached. */
static inline int rvx__rkey_foreign(const rvx_ep_t *ep, const rvx_rkey_t *rkey)
{
    if (RVX_LIKELY(rkey->dbg_ep == (const void *)ep)) return 0;
    rvx__log("rkey used on the endpoint to rank %d but unpacked on another endpoint", ep->rank);
    return 1;
}
#endif

static inline void rvx_rkey_release(rvx_rkey_t *rkey)
{
    if (rkey) rvx__tl_rkey_release(rkey);
}

/* A load/store address for [raddr, raddr + len) of the key's region, where this process maps the
 * peer's memory (shm, and the pair's peers on the node: regions from rvx_mem_alloc); NULL where
 * only the transport reaches it, or for a range outside the region. Valid until the key's
 * release. */
static inline void *rvx_rkey_ptr(const rvx_rkey_t *rkey, uint64_t raddr, size_t len)
{
    return rkey ? rvx__tl_rkey_ptr(rkey, raddr, len) : NULL;
}

/* ---- progress, flush, waiting --------------------------------------------------------------- */

/* Remote completion of everything issued on ep: RVX_OK (done), RVX_INPROGRESS (req completes
 * later) or an error (the failure of an earlier operation on this endpoint). */
RVX_INLINE rvx_status_t rvx_ep_flush_nb(rvx_ep_t *ep, rvx_request_t *req)
{
    return rvx__tl_ep_flush(&ep->tl[0], req);
}

RVX_INLINE rvx_status_t rvx_worker_flush_nb(rvx_worker_t *w, rvx_request_t *req)
{
    return rvx__tl_iface_flush(&w->iface[0], req);
}

/* Wait for a request, progressing the worker; gives up when the request's peer fails. */
static inline rvx_status_t rvx_wait(rvx_worker_t *w, rvx_request_t *req)
{
    unsigned spins = 0;
    while (req->status == RVX_INPROGRESS) {
        if (!rvx_progress(w)) rvx__backoff(&spins);
        else spins = 0;
    }
    return (rvx_status_t)req->status;
}

/* Progress until *flag becomes nonzero, or the peer of ep fails (RVX_ERR_PEER_FAILED), or
 * timeout_ms passes (RVX_ERR_TIMED_OUT; a negative timeout waits for ever). For waiting on a
 * reply that an AM handler records. */
static inline rvx_status_t rvx_wait_flag(rvx_worker_t *w, rvx_ep_t *ep, const volatile int *flag,
                                         int timeout_ms)
{
    unsigned spins = 0, polls = 0;
    double deadline = timeout_ms < 0 ? 0 : rvx__now_s() + timeout_ms / 1000.0;
    while (!*flag) {
        if (rvx_progress(w)) { spins = 0; continue; }
        /* the peer and the deadline are looked at every 1024 spinning rounds and on every
         * sleeping one (rvx__backoff), so a timeout is kept to within a sleep (at most 1 ms) */
        if ((++polls & 1023) == 0 || spins > RVX__BACKOFF_SLEEPING) {
            if (ep && rvx__tl_ep_alive(&ep->tl[0]) != RVX_OK) {
                rvx_progress(w); /* the answer may have arrived just before the peer left */
                return *flag ? RVX_OK : RVX_ERR_PEER_FAILED;
            }
            if (timeout_ms >= 0 && rvx__now_s() > deadline) return RVX_ERR_TIMED_OUT;
        }
        rvx__backoff(&spins);
    }
    return RVX_OK;
}

/* The final status of a non-blocking call: st itself, or, if it was RVX_INPROGRESS, what req
 * completes with (progressing w meanwhile). Mark req pending before the call:
 *     rvx_request_t req; rvx_request_init(&req);
 *     st = rvx_complete(w, rvx_get(ep, buf, len, raddr, &rkey, &req), &req); */
static inline void rvx_request_init(rvx_request_t *req) { req->status = RVX_INPROGRESS; }

static inline rvx_status_t rvx_complete(rvx_worker_t *w, rvx_status_t st, rvx_request_t *req)
{
    return st == RVX_INPROGRESS ? rvx_wait(w, req) : st;
}

/* Blocking flush of an endpoint / of every endpoint of a worker. */
static inline rvx_status_t rvx_ep_flush(rvx_ep_t *ep)
{
    rvx_request_t req;
    rvx_request_init(&req);
    return rvx_complete(ep->worker, rvx_ep_flush_nb(ep, &req), &req);
}

RVX_COLD rvx_status_t rvx__worker_flush_wait(rvx_worker_t *w)
{
    rvx_request_t req;
    rvx_request_init(&req);
    return rvx_complete(w, rvx_worker_flush_nb(w, &req), &req);
}

/* With nothing to flush (the transport's test in line, rvx__tl_iface_flushed: shm, rc_mlx5,
 * dc_mlx5 and the pairs) no frame and no request: a few loads (shmem_quiet is this). */
static inline rvx_status_t rvx_worker_flush(rvx_worker_t *w)
{
#ifdef RVX__TL_IFACE_FLUSHED
    if (RVX_LIKELY(rvx__tl_iface_flushed(&w->iface[0]))) return RVX_OK;
#endif
    return rvx__worker_flush_wait(w);
}

/* Report a kind of bad input once per worker (it is always counted). */
RVX_COLD void rvx__report_bad(rvx_worker_t *w, unsigned kind, const char *fmt, int a, int b)
{
    if (w->reported & (1u << kind)) return;
    w->reported |= 1u << kind;
    fprintf(stderr, "rvx: rank %d: ", w->ctx->boot.rank);
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, " (counted in rvx_worker_stats; reported once)\n");
}

#endif /* RVX_CORE_H */
