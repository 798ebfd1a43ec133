/* halo: a 1-D halo exchange. A periodic line of cells is split evenly over N ranks; each step
 * every cell becomes the mean of itself and its two neighbours. A rank owns `cells` cells plus
 * one ghost cell at each end holding its neighbours' edge values, which they put there before
 * each step and announce with an active message. At the end every rank recomputes the whole line
 * on its own, serially, and checks that its part is bit for bit the same.
 *
 * Ghost cells are double-buffered by step parity: a neighbour can be at most one step ahead (it
 * cannot compute step s+1 before our values of step s arrived), so the buffer it writes is never
 * the one being read.
 *
 *   rvxrun -n 4 build/examples/halo [cells_per_rank] [steps]          local bootstrap
 *   mpirun -np 4 build/examples/halo-pmix [cells_per_rank] [steps]    the PMIx build of this file
 *   srun --mpi=pmix -n 4 build/examples/halo-pmix                     the same under Slurm */
#define RVX_AM_HANDLERS(X) X(HALO, on_halo)
#include <rvx/rvx.h>

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define WAIT_MS 30000

/* Remote layout of each rank's region: ghost[parity][side], side 0 = from the left neighbour. */
typedef struct ghosts {
    double g[2][2];
} ghosts_t;

static volatile int got[2];       /* ghost values received for the step of this parity */
static volatile int bad_msgs;

static void on_halo(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n != 1) { bad_msgs++; return; }
    got[a[0] & 1]++;
}

static double initial(long x) { return (double)((x * 7919) % 1000) / 10.0; }

/* One step over cells [0, n) of a line whose neighbours are lo (left of 0) and hi (right of n-1). */
static void step_line(const double *u, double *v, long n, double lo, double hi)
{
    long i;
    for (i = 0; i < n; i++) {
        double a = i ? u[i - 1] : lo, c = i + 1 < n ? u[i + 1] : hi;
        v[i] = (a + u[i] + c) / 3.0;
    }
}

#define CHECK(call)                                                                            \
    do {                                                                                       \
        rvx_status_t st_ = (call);                                                             \
        if (st_ != RVX_OK) {                                                                   \
            fprintf(stderr, "halo: rank %d: %s: %s\n", me, #call, rvx_status_str(st_));        \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

/* Progress until both ghost values of this parity are in, or a neighbour fails or goes silent. */
static rvx_status_t wait_ghosts(rvx_worker_t *w, rvx_ep_t *l, rvx_ep_t *r, int parity)
{
    double deadline = rvx__now_s() + WAIT_MS / 1000.0;
    unsigned spins = 0;
    while (got[parity] < 2) {
        if (rvx_progress(w)) { spins = 0; continue; }
        if (rvx_ep_status(l) != RVX_OK || rvx_ep_status(r) != RVX_OK) {
            rvx_progress(w);
            if (got[parity] >= 2) break;
            return RVX_ERR_PEER_FAILED;
        }
        if (rvx__now_s() > deadline) return RVX_ERR_TIMED_OUT;
        rvx__backoff(&spins);
    }
    got[parity] -= 2;
    return RVX_OK;
}

int main(int argc, char **argv)
{
    long cells = argc > 1 ? strtol(argv[1], NULL, 0) : 1000, total, i, wrong = 0, *wrongs;
    long steps = argc > 2 ? strtol(argv[2], NULL, 0) : 200, s;
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *left, *right;
    rvx_mem_t *mem;
    rvx_rkey_t kl, kr;
    unsigned char packed[RVX_RKEY_PACKED_SIZE], *pall;
    uint64_t mine, *addrs;
    double *u, *v, *line, *next, t0, t1;
    ghosts_t *gh;
    int me = -1, n, l, r;
    rvx_status_t st;

    if (cells < 1 || steps < 1) {
        fprintf(stderr, "usage: halo [cells_per_rank > 0] [steps > 0]\n");
        return 2;
    }
    CHECK(rvx_init(&ctx));
    me = rvx_rank(ctx);
    n = rvx_size(ctx);
    l = (me + n - 1) % n;
    r = (me + 1) % n;
    total = cells * n;
    if (me == 0) printf("halo: %s\n", rvx_config_string());

    CHECK(rvx_worker_create(ctx, &w));
    CHECK(rvx_mem_alloc(ctx, sizeof(ghosts_t), &mem));
    gh = (ghosts_t *)rvx_mem_addr(mem);
    CHECK(rvx_ep_create(w, l, &left));
    CHECK(rvx_ep_create(w, r, &right));
    u = (double *)malloc((size_t)cells * sizeof(double));
    v = (double *)malloc((size_t)cells * sizeof(double));
    line = (double *)malloc((size_t)total * sizeof(double));
    next = (double *)malloc((size_t)total * sizeof(double));
    pall = (unsigned char *)malloc((size_t)n * sizeof(packed));
    addrs = (uint64_t *)malloc((size_t)n * sizeof(*addrs));
    wrongs = (long *)malloc((size_t)n * sizeof(*wrongs));
    if (!u || !v || !line || !next || !pall || !addrs || !wrongs) return 1;
    for (i = 0; i < cells; i++) u[i] = initial((long)me * cells + i);

    CHECK(rvx_rkey_pack(mem, packed));
    mine = (uint64_t)(uintptr_t)gh;
    CHECK(rvx_allgather(ctx, packed, sizeof(packed), pall));
    CHECK(rvx_allgather(ctx, &mine, sizeof(mine), addrs));
    CHECK(rvx_rkey_unpack(left, pall + (size_t)l * sizeof(packed), &kl));
    CHECK(rvx_rkey_unpack(right, pall + (size_t)r * sizeof(packed), &kr));
    CHECK(rvx_barrier(ctx));

    t0 = rvx__now_s();
    for (s = 0; s < steps; s++) {
        int p = (int)(s & 1);
        uint64_t arg = (uint64_t)s;
        double *tmp;
        /* my first cell is my left neighbour's right ghost, my last its right neighbour's left */
        CHECK(rvx_put(left, &u[0], sizeof(double),
                      addrs[l] + offsetof(ghosts_t, g) + (size_t)(2 * p + 1) * sizeof(double), &kl));
        rvx_am_retry(w, st, rvx_am_short(left, RVX_AM_HALO, &arg, 1));
        CHECK(st);
        CHECK(rvx_put(right, &u[cells - 1], sizeof(double),
                      addrs[r] + offsetof(ghosts_t, g) + (size_t)(2 * p) * sizeof(double), &kr));
        rvx_am_retry(w, st, rvx_am_short(right, RVX_AM_HALO, &arg, 1));
        CHECK(st);
        CHECK(wait_ghosts(w, left, right, p));
        step_line(u, v, cells, gh->g[p][0], gh->g[p][1]);
        tmp = u; u = v; v = tmp;
    }
    t1 = rvx__now_s();

    /* the same computation on the whole line, serially */
    for (i = 0; i < total; i++) line[i] = initial(i);
    for (s = 0; s < steps; s++) {
        double *tmp;
        step_line(line, next, total, line[total - 1], line[0]);
        tmp = line; line = next; next = tmp;
    }
    for (i = 0; i < cells; i++)
        if (u[i] != line[(long)me * cells + i]) {
            if (!wrong)
                fprintf(stderr, "halo: rank %d: cell %ld is %.17g, the serial run has %.17g\n", me,
                        (long)me * cells + i, u[i], line[(long)me * cells + i]);
            wrong++;
        }
    wrong += bad_msgs;
    CHECK(rvx_allgather(ctx, &wrong, sizeof(wrong), wrongs));
    if (me == 0) {
        long sum = 0;
        int k;
        for (k = 0; k < n; k++) sum += wrongs[k];
        printf("halo: %d rank%s x %ld cells, %ld steps: %s (%.1f us per step)\n", n,
               n == 1 ? "" : "s", cells, steps,
               sum ? "DIFFERS from the serial run" : "every cell matches the serial run",
               1e6 * (t1 - t0) / (double)steps);
    }
    CHECK(rvx_worker_flush(w)); /* everything sent has landed (on a NIC: acknowledged) */
    CHECK(rvx_barrier(ctx));      /* nobody unmaps before everyone is done */
    rvx_rkey_release(&kl);
    rvx_rkey_release(&kr);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(u); free(v); free(line); free(next); free(pall); free(addrs); free(wrongs);
    return wrong ? 1 : 0;
}
