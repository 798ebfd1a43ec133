/* rvx/proto/thresh.h: the eager/rendezvous threshold, computed at compile time from the fabric.
 *
 * The model is seed 001's (UCX's multi-lane rendezvous threshold), in its unified form:
 *
 *   eager       etime(s) = ecost + s*egro + s/ebw + eover
 *   rendezvous  rtime(s) = d*((1+rrc)*(rcost + s*rgro) + 4*rlat + 3*rover + s/rbw)
 *   crossing    s* = (d*(rcost*(1+rrc) + 4*rlat + 3*rover) - ecost - eover)
 *                  / (egro + 1/ebw - d*(rgro*(1+rrc) + 1/rbw))
 *
 * with the fabric header's per-lane constants (units: ns, MB/s = 10^6 B/s, ns per KB = 1000 B):
 *   ecost = RVX_FAB_REG_OVERHEAD_NS             rcost = LANES * RVX_FAB_REG_OVERHEAD_NS
 *   egro  = RVX_FAB_REG_GROWTH_NS_PER_KB/1000   rgro  = LANES * RVX_FAB_REG_GROWTH_NS_PER_KB/1000
 *   eover = rover = RVX_FAB_OVERHEAD_NS         rlat  = RVX_FAB_LATENCY_NS
 *   ebw   = min(BW, BCOPY_BW)                   rbw   = LANES * BW                 (rrc = 1)
 *                                               rbw   = LANES * min(BW, BCOPY_BW)  (rrc = 0)
 *   d     = 1 - RVX_FAB_RNDV_PERF_DIFF_PCT/100  LANES = RVX_LANES (default RVX_FAB_LANES)
 * Eager goes over one lane and is bounded by the copy bandwidth; rendezvous stripes over every
 * lane, so its bandwidth and its registration costs are sums over lanes (seed 001): each lane is
 * its own device, so a rendezvous buffer is registered once per lane (core.h). rrc, the
 * receiver's registration, is 0 for AM rendezvous (RVX_RNDV_AM) and 1 for RMA rendezvous (GET,
 * PUT, PIPELINE). For the bandwidths seed 000 (the single-lane form) says which one applies:
 * eager and AM rendezvous move data at the slower of zero-copy and copy, RMA at zero-copy speed.
 * Seed 000 applies d to the AM case only; seed 001, followed here, applies it to both.
 *
 * The threshold is the first whole size at which eager is slower: floor(s*) + 1. The curves meet
 * only when numerator and denominator are both positive (eager faster at size 0, rendezvous faster
 * beyond s*) and s* < RVX_THRESH_MAX_BYTES (2^48, beyond any address space); otherwise the
 * threshold is the fallback, RVX_RNDV_THRESH_FALLBACK (config.h; UCX's default is infinity, here
 * SIZE_MAX: never rendezvous).
 *
 * The closed form is evaluated exactly in 128-bit integers (all inputs are integers, so the
 * rational s* is exact), as an integer constant expression: usable in static initializers,
 * _Static_assert, enums and C++ constexpr. It is not usable in #if: the preprocessor's 64-bit
 * arithmetic cannot hold the products. The fabric constants are range-checked below so the
 * 128-bit products cannot overflow.
 *
 * What this header gives:
 *   RVX_RNDV_RRC                 0 for RVX_RNDV_AM, 1 otherwise
 *   RVX_RNDV_THRESH_MODEL_BYTES  the model's threshold for this build's fabric and RVX_RNDV
 *   RVX_RNDV_THRESH_BYTES        what the tag protocol uses: RVX_RNDV_THRESH if pinned, else the
 *                                model (size_t; messages of this size or more go by rendezvous)
 *   rvx_thresh_params_t, rvx_thresh_params_fabric(rrc), rvx_thresh_compute(p),
 *   rvx_thresh_eager_ns(p, size), rvx_thresh_rndv_ns(p, size): the same model at run time, for
 *   tools/rvxthresh and tests/t_thresh. */
#ifndef RVX_PROTO_THRESH_H
#define RVX_PROTO_THRESH_H

#include <stddef.h>
#include <stdint.h>

#include "../config.h"
#include "../sys/compiler.h"

/* ---- the fabric constants the model needs --------------------------------------------------- */
#if !defined(RVX_FAB_OVERHEAD_NS) || !defined(RVX_FAB_BCOPY_BW_MBS) || \
    !defined(RVX_FAB_REG_OVERHEAD_NS) || !defined(RVX_FAB_REG_GROWTH_NS_PER_KB)
#error "RVX_FABRIC: the threshold model needs RVX_FAB_OVERHEAD_NS, RVX_FAB_BCOPY_BW_MBS, RVX_FAB_REG_OVERHEAD_NS and RVX_FAB_REG_GROWTH_NS_PER_KB (see include/rvx/fabric/shm_local.h)"
#endif
#ifndef RVX_FAB_RNDV_PERF_DIFF_PCT
#define RVX_FAB_RNDV_PERF_DIFF_PCT 1 /* UCX's default RNDV_PERF_DIFF */
#endif

/* Ranges within which the 128-bit closed form cannot overflow (checked for the fabric here and
 * for run-time parameters in rvx_thresh_compute). */
#define RVX_THRESH_MAX_TIME_NS   10000000    /* latency, overhead: 10 ms */
#define RVX_THRESH_MAX_REG_NS    1000000000  /* registration overhead: 1 s */
#define RVX_THRESH_MAX_GROWTH    10000000    /* ns per KB */
#define RVX_THRESH_MAX_BW_MBS    10000000    /* 10 TB/s */
#define RVX_THRESH_MAX_LANES     64
#define RVX_THRESH_MAX_BYTES     ((uint64_t)1 << 48) /* a crossing beyond this does not count */

#if RVX_FAB_LATENCY_NS < 0 || RVX_FAB_LATENCY_NS > RVX_THRESH_MAX_TIME_NS || \
    RVX_FAB_OVERHEAD_NS < 0 || RVX_FAB_OVERHEAD_NS > RVX_THRESH_MAX_TIME_NS
#error "RVX_FABRIC: RVX_FAB_LATENCY_NS and RVX_FAB_OVERHEAD_NS must be between 0 and 10^7 ns"
#endif
#if RVX_FAB_REG_OVERHEAD_NS < 0 || RVX_FAB_REG_OVERHEAD_NS > RVX_THRESH_MAX_REG_NS || \
    RVX_FAB_REG_GROWTH_NS_PER_KB < 0 || RVX_FAB_REG_GROWTH_NS_PER_KB > RVX_THRESH_MAX_GROWTH
#error "RVX_FABRIC: RVX_FAB_REG_OVERHEAD_NS must be in [0, 10^9] and RVX_FAB_REG_GROWTH_NS_PER_KB in [0, 10^7]"
#endif
#if RVX_FAB_BW_MBS < 1 || RVX_FAB_BW_MBS > RVX_THRESH_MAX_BW_MBS || \
    RVX_FAB_BCOPY_BW_MBS < 1 || RVX_FAB_BCOPY_BW_MBS > RVX_THRESH_MAX_BW_MBS
#error "RVX_FABRIC: RVX_FAB_BW_MBS and RVX_FAB_BCOPY_BW_MBS must be between 1 and 10^7 MB/s"
#endif
#if RVX_FAB_LANES > RVX_THRESH_MAX_LANES
#error "RVX_FABRIC: RVX_FAB_LANES must be at most 64"
#endif
#if RVX_FAB_RNDV_PERF_DIFF_PCT < 0 || RVX_FAB_RNDV_PERF_DIFF_PCT > 99
#error "RVX_FABRIC: RVX_FAB_RNDV_PERF_DIFF_PCT must be a percentage in [0, 99]"
#endif

#if RVX_RNDV_THRESH_FALLBACK < 1
#error "RVX_RNDV_THRESH_FALLBACK must be a positive number of bytes"
#endif

#if RVX_RNDV == RVX_RNDV_AM
#define RVX_RNDV_RRC 0
#else
#define RVX_RNDV_RRC 1
#endif

/* ---- the closed form, one expression for compile time and run time ------------------------- */
__extension__ typedef __int128 rvx__i128;

/* eager and rendezvous bandwidth (MB/s) */
#define RVX__TH_EBW(bw, bc) ((rvx__i128)((bw) < (bc) ? (bw) : (bc)))
#define RVX__TH_RBW(bw, bc, L, r) ((rvx__i128)(L) * ((r) ? (rvx__i128)(bw) : RVX__TH_EBW(bw, bc)))

/* Numerator in units of ps/100:  100 * 1000 * (d*(rcost*(1+rrc) + 4 rlat + 3 rover) - ecost - eover) */
#define RVX__TH_NUM(lat, ov, C, L, P, r)                                                          \
    ((rvx__i128)1000 * ((rvx__i128)(100 - (P)) * ((rvx__i128)(L) * (C) * (1 + (r)) +            \
                                                  4 * (rvx__i128)(lat) + 3 * (rvx__i128)(ov)) - \
                        (rvx__i128)100 * ((rvx__i128)(C) + (ov))))

/* Denominator in ps/B times 100*ebw*rbw; ps/B: egro = G, 1/bw = 10^6/bw. */
#define RVX__TH_DEN(G, L, P, r, ebw, rbw)                                                  \
    ((rvx__i128)100 * (G) * (ebw) * (rbw) + (rvx__i128)100000000 * (rbw) -               \
     (rvx__i128)(100 - (P)) * ((rvx__i128)(L) * (G) * (1 + (r)) * (ebw) * (rbw) +         \
                               (rvx__i128)1000000 * (ebw)))

/* s* = NUM * ebw * rbw / DEN. */
#define RVX__TH_SELECT(num, den, x, fb)                                                    \
    ((num) > 0 && (den) > 0 && (x) / (den) < (rvx__i128)RVX_THRESH_MAX_BYTES               \
         ? (uint64_t)((x) / (den) + 1)                                                       \
         : (uint64_t)(fb))

#define RVX__TH_FORM2(lat, ov, C, G, L, P, r, fb, ebw, rbw)                                 \
    RVX__TH_SELECT(RVX__TH_NUM(lat, ov, C, L, P, r), RVX__TH_DEN(G, L, P, r, ebw, rbw),      \
                   RVX__TH_NUM(lat, ov, C, L, P, r) * (ebw) * (rbw), fb)

/* The threshold in bytes: latency, overhead (ns), zero-copy and copy bandwidth (MB/s), registration
 * overhead (ns) and growth (ns/KB), lanes, performance difference (%), rrc, fallback. */
#define RVX__THRESH_FORM(lat, ov, bw, bc, C, G, L, P, r, fb)                                 \
    RVX__TH_FORM2(lat, ov, C, G, L, P, r, fb, RVX__TH_EBW(bw, bc), RVX__TH_RBW(bw, bc, L, r))

/* ---- this build ----------------------------------------------------------------------------- */
#define RVX_RNDV_THRESH_MODEL_BYTES                                                              \
    RVX__THRESH_FORM(RVX_FAB_LATENCY_NS, RVX_FAB_OVERHEAD_NS, RVX_FAB_BW_MBS, RVX_FAB_BCOPY_BW_MBS, \
                     RVX_FAB_REG_OVERHEAD_NS, RVX_FAB_REG_GROWTH_NS_PER_KB, RVX_LANES,              \
                     RVX_FAB_RNDV_PERF_DIFF_PCT, RVX_RNDV_RRC, RVX_RNDV_THRESH_FALLBACK)

#ifdef RVX_RNDV_THRESH
#define RVX_RNDV_THRESH_BYTES ((size_t)(RVX_RNDV_THRESH))
#else
#define RVX_RNDV_THRESH_BYTES ((size_t)RVX_RNDV_THRESH_MODEL_BYTES)
#endif

RVX_STATIC_ASSERT(RVX_RNDV_THRESH_BYTES >= 1, "the eager/rendezvous threshold is at least 1 byte");

/* ---- run time: the same model on parameters given at run time ------------------------------ */
typedef struct rvx_thresh_params {
    uint64_t latency_ns;           /* one-way latency of a message (rlat) */
    uint64_t overhead_ns;          /* sender CPU time per message (eover, rover) */
    uint64_t bw_mbs;               /* zero-copy bandwidth of one lane */
    uint64_t bcopy_bw_mbs;         /* copy bandwidth of one lane */
    uint64_t reg_overhead_ns;      /* fixed cost of one registration on one lane */
    uint64_t reg_growth_ns_per_kb; /* registration cost per 1000 bytes on one lane */
    uint64_t lanes;                /* rendezvous lanes (eager uses one) */
    uint64_t perf_diff_pct;        /* d = 1 - perf_diff_pct/100 */
    uint64_t rrc;                  /* receiver registers: 0 AM rendezvous, 1 RMA rendezvous */
    uint64_t fallback;             /* the threshold when the curves do not meet */
} rvx_thresh_params_t;

/* The parameters of this build's fabric (rrc 0 or 1). */
static inline rvx_thresh_params_t rvx_thresh_params_fabric(int rrc)
{
    rvx_thresh_params_t p;
    p.latency_ns = RVX_FAB_LATENCY_NS;
    p.overhead_ns = RVX_FAB_OVERHEAD_NS;
    p.bw_mbs = RVX_FAB_BW_MBS;
    p.bcopy_bw_mbs = RVX_FAB_BCOPY_BW_MBS;
    p.reg_overhead_ns = RVX_FAB_REG_OVERHEAD_NS;
    p.reg_growth_ns_per_kb = RVX_FAB_REG_GROWTH_NS_PER_KB;
    p.lanes = RVX_LANES;
    p.perf_diff_pct = RVX_FAB_RNDV_PERF_DIFF_PCT;
    p.rrc = rrc ? 1 : 0;
    p.fallback = RVX_RNDV_THRESH_FALLBACK;
    return p;
}

/* Are the parameters inside the ranges the closed form is exact for? */
static inline int rvx_thresh_params_ok(const rvx_thresh_params_t *p)
{
    return p->latency_ns <= RVX_THRESH_MAX_TIME_NS && p->overhead_ns <= RVX_THRESH_MAX_TIME_NS &&
           p->bw_mbs >= 1 && p->bw_mbs <= RVX_THRESH_MAX_BW_MBS && p->bcopy_bw_mbs >= 1 &&
           p->bcopy_bw_mbs <= RVX_THRESH_MAX_BW_MBS && p->reg_overhead_ns <= RVX_THRESH_MAX_REG_NS &&
           p->reg_growth_ns_per_kb <= RVX_THRESH_MAX_GROWTH && p->lanes >= 1 &&
           p->lanes <= RVX_THRESH_MAX_LANES && p->perf_diff_pct <= 99 && p->rrc <= 1 &&
           p->fallback >= 1;
}

/* The threshold in bytes (the first size at which rendezvous wins), p->fallback when the curves
 * do not meet, 0 when a parameter is out of range. Same expression as RVX_RNDV_THRESH_MODEL_BYTES. */
static inline uint64_t rvx_thresh_compute(const rvx_thresh_params_t *p)
{
    rvx__i128 lat, ov, bw, bc, C, G, L, P, r;
    if (!p || !rvx_thresh_params_ok(p)) return 0;
    lat = p->latency_ns, ov = p->overhead_ns, bw = p->bw_mbs, bc = p->bcopy_bw_mbs;
    C = p->reg_overhead_ns, G = p->reg_growth_ns_per_kb, L = p->lanes, P = p->perf_diff_pct;
    r = p->rrc;
    return RVX__THRESH_FORM(lat, ov, bw, bc, C, G, L, P, r, p->fallback);
}

/* The two latency curves of the model, in ns, for a message of `size` bytes. */
static inline double rvx_thresh_eager_ns(const rvx_thresh_params_t *p, size_t size)
{
    double s = (double)size;
    double ebw = (double)(p->bw_mbs < p->bcopy_bw_mbs ? p->bw_mbs : p->bcopy_bw_mbs);
    return (double)p->reg_overhead_ns + s * (double)p->reg_growth_ns_per_kb / 1000.0 +
           s * 1000.0 / ebw + (double)p->overhead_ns;
}

static inline double rvx_thresh_rndv_ns(const rvx_thresh_params_t *p, size_t size)
{
    double s = (double)size, L = (double)p->lanes, rrc = (double)p->rrc;
    double d = 1.0 - (double)p->perf_diff_pct / 100.0;
    double lane_bw = (double)(p->rrc || p->bw_mbs < p->bcopy_bw_mbs ? p->bw_mbs : p->bcopy_bw_mbs);
    double rcost = L * (double)p->reg_overhead_ns, rgro = L * (double)p->reg_growth_ns_per_kb / 1000.0;
    return d * ((1.0 + rrc) * (rcost + s * rgro) + 4.0 * (double)p->latency_ns +
                3.0 * (double)p->overhead_ns + s * 1000.0 / (L * lane_bw));
}

#endif /* RVX_PROTO_THRESH_H */
