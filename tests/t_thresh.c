/* t_thresh: the eager/rendezvous threshold of proto/thresh.h against a numeric crossover search.
 *
 * The test writes seed 001's two latency curves again (long double, its own code), finds by
 * bisection the first size at which eager is slower than rendezvous, and requires the closed form
 * rvx_thresh_compute() to agree within one byte on random parameter sets, and to give the fallback
 * on sets where the curves do not meet. It also checks the compile-time RVX_RNDV_THRESH_BYTES of
 * this build against rvx_thresh_compute() on the build's fabric.
 *
 *   t_thresh [--build] [--seed N] [--sets N]
 * --build checks this build's constants only (tests/t_thresh_fabrics.sh compiles this file once
 * per fabric header and RVX_RNDV); T_SEED in the environment also sets the seed. */
#include <rvx/rvx.h>
#include <rvx/proto/thresh.h>

#include "testlib.h"

#include <time.h>

/* The threshold must be a constant expression (folded, usable in static initializers). */
RVX_STATIC_ASSERT(RVX_RNDV_THRESH_BYTES >= 1, "RVX_RNDV_THRESH_BYTES is an integer constant");
static const size_t t_build_thresh = RVX_RNDV_THRESH_BYTES;

static uint64_t t_rng;
static uint64_t rnd(void) /* splitmix64 */
{
    uint64_t z = (t_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static uint64_t rnd_in(uint64_t lo, uint64_t hi) { return lo + rnd() % (hi - lo + 1); }
/* roughly log-uniform in [lo, hi] (lo >= 1) */
static uint64_t rnd_log(uint64_t lo, uint64_t hi)
{
    uint64_t v = lo, top = hi;
    while (v < top / 2 && (rnd() & 1)) v *= 2;
    v = rnd_in(v, v * 2 < top ? v * 2 : top);
    return v;
}

/* ---- the model again, independently: seed 001, etime and rtime ------------------------------ */
typedef long double ld;
static ld ns_per_byte(uint64_t mbs) { return 1000.0L / (ld)mbs; } /* 1 B at mbs*10^6 B/s */

static ld m_eager(const rvx_thresh_params_t *p, ld s)
{
    uint64_t ebw = p->bcopy_bw_mbs < p->bw_mbs ? p->bcopy_bw_mbs : p->bw_mbs;
    ld ecost = (ld)p->reg_overhead_ns, egro = (ld)p->reg_growth_ns_per_kb / 1000.0L;
    return ecost + s * egro + s * ns_per_byte(ebw) + (ld)p->overhead_ns;
}

static ld m_rndv(const rvx_thresh_params_t *p, ld s)
{
    ld d = (100.0L - (ld)p->perf_diff_pct) / 100.0L, n = (ld)p->lanes, rrc = (ld)p->rrc;
    /* AM rendezvous moves data at copy speed where that is slower, RMA at zero-copy speed */
    uint64_t lane = p->rrc ? p->bw_mbs : (p->bcopy_bw_mbs < p->bw_mbs ? p->bcopy_bw_mbs : p->bw_mbs);
    ld rcost = n * (ld)p->reg_overhead_ns, rgro = n * (ld)p->reg_growth_ns_per_kb / 1000.0L;
    ld rbw_ns_per_byte = ns_per_byte(lane) / n;
    return d * ((1 + rrc) * (rcost + s * rgro) + 4 * (ld)p->latency_ns + 3 * (ld)p->overhead_ns +
                s * rbw_ns_per_byte);
}

static int eager_slower(const rvx_thresh_params_t *p, uint64_t s)
{
    return m_eager(p, (ld)s) > m_rndv(p, (ld)s);
}

/* First size in [0, 2^48) at which eager is slower, given that it is faster at size 0; 0 if the
 * curves do not meet (eager not faster at 0, or never slower below 2^48). Bisection: the curves
 * are straight lines, so "eager slower" is monotone in the size. */
static uint64_t search(const rvx_thresh_params_t *p)
{
    uint64_t lo = 0, hi = RVX_THRESH_MAX_BYTES;
    if (!(m_eager(p, 0) < m_rndv(p, 0))) return 0;
    if (!eager_slower(p, hi - 1)) return 0;
    hi--; /* invariant: !eager_slower(lo), eager_slower(hi) */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (eager_slower(p, mid)) hi = mid;
        else lo = mid;
    }
    return hi;
}

static void show(const rvx_thresh_params_t *p, char *buf, size_t n)
{
    snprintf(buf, n,
             "lat=%llu ov=%llu bw=%llu bcopy=%llu reg=%llu gro=%llu lanes=%llu pct=%llu rrc=%llu",
             (unsigned long long)p->latency_ns, (unsigned long long)p->overhead_ns,
             (unsigned long long)p->bw_mbs, (unsigned long long)p->bcopy_bw_mbs,
             (unsigned long long)p->reg_overhead_ns, (unsigned long long)p->reg_growth_ns_per_kb,
             (unsigned long long)p->lanes, (unsigned long long)p->perf_diff_pct,
             (unsigned long long)p->rrc);
}

static int n_cross, n_nocross, n_far, n_exact, n_tie;

/* The curves differ at size s by more than long double's rounding could explain. */
static int clear(const rvx_thresh_params_t *p, uint64_t s)
{
    ld e = m_eager(p, (ld)s), r = m_rndv(p, (ld)s), diff = e > r ? e - r : r - e;
    return diff > 1e-14L * (e + r);
}

/* One parameter set: closed form against the search, and the header's curves against ours. */
static void check_set(const rvx_thresh_params_t *p)
{
    char desc[256];
    uint64_t closed = rvx_thresh_compute(p), found = search(p);
    size_t probe[3];
    int i;
    show(p, desc, sizeof(desc));
    if (!clear(p, 0)) {
        /* A tie at size 0 (numerator 0) that rounding may tip either way: fallback, or 1 byte. */
        n_tie++;
        T_CHECK(closed == p->fallback || closed == 1, "%s: tie at size 0 but closed form %llu",
                desc, (unsigned long long)closed);
    } else if (found) {
        n_cross++;
        T_CHECK(closed != p->fallback && (closed + 1 >= found && closed <= found + 1),
                "%s: closed form %llu, search %llu", desc, (unsigned long long)closed,
                (unsigned long long)found);
        /* Where long double decides both sides clearly, the exact closed form must be exact. */
        if (clear(p, found - 1) && clear(p, found)) {
            n_exact++;
            T_CHECK(closed == found, "%s: closed form %llu, search %llu (unambiguous)", desc,
                    (unsigned long long)closed, (unsigned long long)found);
        }
    } else {
        n_nocross++;
        T_CHECK(closed == p->fallback, "%s: curves do not meet but closed form gives %llu",
                desc, (unsigned long long)closed);
    }
    probe[0] = 0;
    probe[1] = found ? (size_t)found : 4096;
    probe[2] = (size_t)rnd_in(1, 1u << 30);
    for (i = 0; i < 3; i++) {
        ld e = m_eager(p, (ld)probe[i]), r = m_rndv(p, (ld)probe[i]);
        ld he = rvx_thresh_eager_ns(p, probe[i]), hr = rvx_thresh_rndv_ns(p, probe[i]);
        T_CHECK((he - e) * (he - e) <= 1e-22L * (e * e + 1) && (hr - r) * (hr - r) <= 1e-22L * (r * r + 1),
                "%s: header curves at %zu: eager %.6Lf/%.6Lf rndv %.6Lf/%.6Lf", desc, probe[i], he,
                e, hr, r);
    }
}

static void random_params(rvx_thresh_params_t *p)
{
    p->latency_ns = rnd() % 4 ? rnd_log(1, 100000) : rnd_in(0, 3);
    p->overhead_ns = rnd() % 4 ? rnd_log(1, 20000) : 0;
    p->bw_mbs = rnd_log(100, 1000000);
    p->bcopy_bw_mbs = rnd() % 4 ? rnd_log(100, 1000000) : p->bw_mbs;
    p->reg_overhead_ns = rnd() % 4 ? rnd_log(1, 1000000) : 0;
    p->reg_growth_ns_per_kb = rnd() % 4 ? rnd_log(1, 5000) : 0;
    p->lanes = rnd() % 2 ? 1 : rnd_log(1, 64);
    p->perf_diff_pct = rnd() % 8 ? rnd_in(0, 10) : rnd_in(0, 99);
    p->rrc = rnd() & 1;
    p->fallback = ((uint64_t)1 << 49) + rnd() % 1000000; /* never a real crossing */
}

/* Sets built not to meet, each way: rendezvous never slower at size 0 (numerator <= 0), the
 * eager curve no steeper (denominator <= 0), and a crossing beyond 2^48 bytes. */
static void nocross_params(rvx_thresh_params_t *p, int kind)
{
    random_params(p);
    switch (kind) {
    case 0: /* registration dominates and the rendezvous registers as much: numerator < 0 */
        p->latency_ns = rnd_in(0, 50);
        p->overhead_ns = rnd_in(0, 50);
        p->reg_overhead_ns = rnd_log(100000, 1000000);
        p->lanes = 1;
        p->rrc = 0;
        p->perf_diff_pct = rnd_in(5, 50);
        break;
    case 1: /* rendezvous registers on every lane and on both sides: denominator < 0 */
        p->reg_growth_ns_per_kb = rnd_log(1000, 10000);
        p->bw_mbs = rnd_log(1000, 1000000); /* 1/ebw <= 1000 ps/B < 2.6 * egro */
        p->bcopy_bw_mbs = rnd_log(1000, 1000000);
        p->lanes = rnd_in(2, 64);
        p->rrc = 1;
        p->perf_diff_pct = rnd_in(0, 10);
        break;
    case 2: /* same slope (d = 1, AM, one lane): denominator == 0 */
        p->perf_diff_pct = 0;
        p->lanes = 1;
        p->rrc = 0;
        break;
    default: /* slopes differ by ~1e-8 ps per byte: they meet near 4e14 bytes, beyond 2^48 */
        p->perf_diff_pct = 0;
        p->lanes = 1;
        p->rrc = 1;
        p->reg_overhead_ns = 0;
        p->reg_growth_ns_per_kb = 0;
        p->latency_ns = 1000;
        p->overhead_ns = 0;
        p->bw_mbs = 10000000;
        p->bcopy_bw_mbs = 9999999;
        break;
    }
}

/* This build: RVX_RNDV_THRESH_BYTES (compile time) against rvx_thresh_compute (run time). */
static void check_build(void)
{
    rvx_thresh_params_t p0 = rvx_thresh_params_fabric(0), p1 = rvx_thresh_params_fabric(1);
    rvx_thresh_params_t pb = rvx_thresh_params_fabric(RVX_RNDV_RRC);
    uint64_t model = RVX_RNDV_THRESH_MODEL_BYTES;
    T_CHECK(RVX_RNDV_RRC == (RVX_RNDV == RVX_RNDV_AM ? 0 : 1), "rrc %d for rndv %s", RVX_RNDV_RRC,
            RVX_RNDV_NAME);
    T_CHECK(model == rvx_thresh_compute(&pb), "compile time %llu, run time %llu",
            (unsigned long long)model, (unsigned long long)rvx_thresh_compute(&pb));
#ifdef RVX_RNDV_THRESH
    T_CHECK(t_build_thresh == (size_t)RVX_RNDV_THRESH, "pinned %zu, got %zu",
            (size_t)RVX_RNDV_THRESH, t_build_thresh);
#else
    T_CHECK(t_build_thresh == (size_t)rvx_thresh_compute(&pb), "RVX_RNDV_THRESH_BYTES %zu, run time %llu",
            t_build_thresh, (unsigned long long)rvx_thresh_compute(&pb));
#endif
    check_set(&p0);
    check_set(&p1);
    printf("fabric %s rndv=%s: threshold rrc=0 %llu, rrc=1 %llu; RVX_RNDV_THRESH_BYTES %zu\n",
           RVX_FAB_NAME, RVX_RNDV_NAME, (unsigned long long)rvx_thresh_compute(&p0),
           (unsigned long long)rvx_thresh_compute(&p1), t_build_thresh);
}

int main(int argc, char **argv)
{
    int i, build_only = 0, sets = 2000, iter;
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    rvx_thresh_params_t p;
    if (getenv("T_SEED")) seed = strtoull(getenv("T_SEED"), NULL, 0);
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--build")) build_only = 1;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--sets") && i + 1 < argc) sets = atoi(argv[++i]);
        else { fprintf(stderr, "usage: t_thresh [--build] [--seed N] [--sets N]\n"); return 1; }
    }
    t_rng = seed;
    printf("seed %llu (rerun with T_SEED=%llu)\n", (unsigned long long)seed, (unsigned long long)seed);
    check_build();
    if (build_only) return t_exit();

    /* Random sets until at least `sets` of them cross and 200 do not. */
    for (iter = 0; (n_cross < sets || n_nocross < 200) && iter < 100 * sets; iter++) {
        random_params(&p);
        check_set(&p);
    }
    T_CHECK(n_cross >= sets && n_nocross >= 200, "only %d crossing and %d non-crossing sets",
            n_cross, n_nocross);
    printf("random sets: %d crossing (closed form within one byte of the search, %d of them "
           "exact where the search is unambiguous), %d not (fallback)\n",
           n_cross, n_exact, n_nocross);
    T_CHECK(n_exact >= n_cross / 2, "only %d of %d crossings were unambiguous", n_exact, n_cross);

    /* Sets made not to cross, each way: the closed form gives the fallback. */
    for (i = 0; i < 400; i++) {
        int before = n_nocross + n_tie;
        nocross_params(&p, i % 4);
        check_set(&p);
        T_CHECK(n_nocross + n_tie == before + 1, "kind %d set crosses, expected not to", i % 4);
        if (i % 4 == 3) n_far++;
    }
    printf("generated non-crossing sets: 400 (%d with the crossing beyond 2^48 bytes); ties at size "
           "0: %d\n", n_far, n_tie);

    /* Out-of-range parameters are refused (0), not computed with overflow. */
    p = rvx_thresh_params_fabric(1);
    p.lanes = 0;
    T_CHECK(rvx_thresh_compute(&p) == 0, "lanes 0 accepted");
    p = rvx_thresh_params_fabric(1);
    p.bw_mbs = RVX_THRESH_MAX_BW_MBS + 1;
    T_CHECK(rvx_thresh_compute(&p) == 0, "bandwidth above the range accepted");
    p = rvx_thresh_params_fabric(1);
    p.perf_diff_pct = 100;
    T_CHECK(rvx_thresh_compute(&p) == 0, "perf_diff 100%% accepted");

    /* At the edges of the ranges the 128-bit closed form still matches the search. */
    p.latency_ns = p.overhead_ns = RVX_THRESH_MAX_TIME_NS;
    p.reg_overhead_ns = RVX_THRESH_MAX_REG_NS;
    p.reg_growth_ns_per_kb = 1;
    p.bw_mbs = p.bcopy_bw_mbs = RVX_THRESH_MAX_BW_MBS;
    p.lanes = RVX_THRESH_MAX_LANES;
    p.perf_diff_pct = 99;
    p.rrc = 1;
    p.fallback = 7;
    check_set(&p);
    p.perf_diff_pct = 0;
    p.bcopy_bw_mbs = 1;
    p.reg_growth_ns_per_kb = 0;
    p.lanes = 1;
    check_set(&p);
    return t_exit();
}
