/* rvxthresh: the eager and rendezvous latency curves of a fabric header and the threshold where
 * they cross (proto/thresh.h, seed 001's model), as a table and optionally as a PNG (gnuplot).
 *
 * The fabric is chosen when the tool is built, the way every rvx build chooses it:
 *     cc -Iinclude -DRVX_FABRIC='<rvx/fabric/ib_hdr.h>' -o rvxthresh tools/rvxthresh.c
 * (make builds build/bin/rvxthresh for the default fabric; `make thresh` builds one per header in
 * include/rvx/fabric/ and draws bench/thresh_<fabric>.png).
 *
 * Usage: rvxthresh [--png out.png] [--max BYTES] [--points N] [--set name=value]...
 *   --png     draw the curves with gnuplot into out.png (log-log, thresholds marked)
 *   --max     largest size in the table and the plot (default: 4 x the larger threshold)
 *   --points  rows in the table (default 25, spaced evenly on a log scale)
 *   --set     change one parameter at run time: latency_ns overhead_ns bw_mbs bcopy_bw_mbs
 *             reg_overhead_ns reg_growth_ns_per_kb lanes perf_diff_pct fallback */
#define _GNU_SOURCE 1 /* popen, mkstemp */
#include <rvx/proto/thresh.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int set_param(rvx_thresh_params_t *p, const char *arg)
{
    static const struct { const char *name; size_t off; } f[] = {
        {"latency_ns", offsetof(rvx_thresh_params_t, latency_ns)},
        {"overhead_ns", offsetof(rvx_thresh_params_t, overhead_ns)},
        {"bw_mbs", offsetof(rvx_thresh_params_t, bw_mbs)},
        {"bcopy_bw_mbs", offsetof(rvx_thresh_params_t, bcopy_bw_mbs)},
        {"reg_overhead_ns", offsetof(rvx_thresh_params_t, reg_overhead_ns)},
        {"reg_growth_ns_per_kb", offsetof(rvx_thresh_params_t, reg_growth_ns_per_kb)},
        {"lanes", offsetof(rvx_thresh_params_t, lanes)},
        {"perf_diff_pct", offsetof(rvx_thresh_params_t, perf_diff_pct)},
        {"fallback", offsetof(rvx_thresh_params_t, fallback)},
    };
    const char *eq = strchr(arg, '=');
    size_t i;
    char *end;
    unsigned long long v;
    if (!eq) return -1;
    v = strtoull(eq + 1, &end, 0);
    if (*end || end == eq + 1) return -1;
    for (i = 0; i < sizeof(f) / sizeof(f[0]); i++) {
        if (strlen(f[i].name) == (size_t)(eq - arg) && !strncmp(f[i].name, arg, (size_t)(eq - arg))) {
            memcpy((char *)p + f[i].off, &v, sizeof(uint64_t));
            return 0;
        }
    }
    return -1;
}

static void show_thresh(const char *what, uint64_t t, uint64_t fallback)
{
    if (t == fallback) printf("%-34s %llu bytes (fallback: the curves do not meet)\n", what,
                              (unsigned long long)t);
    else printf("%-34s %llu bytes\n", what, (unsigned long long)t);
}

/* Two panels: the latencies (log-log), and rendezvous over eager, which crosses 1 at a threshold. */
static int plot(const char *png, const char *data, const rvx_thresh_params_t *p, uint64_t t0,
                uint64_t t1, double lo, double hi)
{
    FILE *g = popen("gnuplot", "w");
    char am[96], rma[96];
    int k;
    if (!g) {
        perror("gnuplot");
        return -1;
    }
    snprintf(am, sizeof(am), t0 == p->fallback ? "no crossing: fallback" : "threshold %llu B (dashed)",
             (unsigned long long)t0);
    snprintf(rma, sizeof(rma), t1 == p->fallback ? "no crossing: fallback" : "threshold %llu B (dashed)",
             (unsigned long long)t1);
    fprintf(g, "set terminal pngcairo size 900,800 font ',10'\n");
    fprintf(g, "set output '%s'\n", png);
    fprintf(g, "set multiplot layout 2,1 title \"%s: eager and rendezvous latency (rvx proto/thresh.h, "
               "seed 001 model)\\nlat %llu ns, overhead %llu ns, bw %llu MB/s, bcopy %llu MB/s, reg "
               "%llu ns + %llu ns/KB, %llu lane(s), d = %.2f\"\n",
            RVX_FAB_NAME, (unsigned long long)p->latency_ns, (unsigned long long)p->overhead_ns,
            (unsigned long long)p->bw_mbs, (unsigned long long)p->bcopy_bw_mbs,
            (unsigned long long)p->reg_overhead_ns, (unsigned long long)p->reg_growth_ns_per_kb,
            (unsigned long long)p->lanes, 1.0 - (double)p->perf_diff_pct / 100.0);
    fprintf(g, "set logscale x\nset xlabel 'message size (bytes)'\nset grid\n"
               "set format x '%%.0s%%cB'\nset xrange [%g:%g]\n", lo, hi);
    if (t0 != p->fallback && (double)t0 <= hi)
        fprintf(g, "set arrow 1 from %llu, graph 0 to %llu, graph 1 nohead dt 2 lw 1.5 lc rgb 'dark-green'\n",
                (unsigned long long)t0, (unsigned long long)t0);
    if (t1 != p->fallback && (double)t1 <= hi)
        fprintf(g, "set arrow 2 from %llu, graph 0 to %llu, graph 1 nohead dt 2 lw 1.5 lc rgb 'blue'\n",
                (unsigned long long)t1, (unsigned long long)t1);
    for (k = 0; k < 2; k++) {
        if (k == 0)
            fprintf(g, "set logscale y\nset ylabel 'latency (ns)'\nset key top left\n"
                       "plot '%s' using 1:2 with lines lw 2 lc rgb 'red' title 'eager (zcopy)', "
                       "'' using 1:3 with lines lw 2 lc rgb 'dark-green' title 'AM rendezvous (rrc=0): %s', "
                       "'' using 1:4 with lines lw 2 lc rgb 'blue' title "
                       "'RMA rendezvous, get/put/pipeline (rrc=1): %s'\n",
                    data, am, rma);
        else
            fprintf(g, "unset logscale y\nset ylabel 'rendezvous / eager'\nset key bottom left\n"
                       "set yrange [0:3]\n"
                       "plot 1 with lines lc rgb 'red' dt 3 title 'eager', "
                       "'%s' using 1:($3/$2) with lines lw 2 lc rgb 'dark-green' title 'AM rendezvous', "
                       "'' using 1:($4/$2) with lines lw 2 lc rgb 'blue' title 'RMA rendezvous'\n",
                    data);
    }
    fprintf(g, "unset multiplot\n");
    return pclose(g) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    rvx_thresh_params_t p0 = rvx_thresh_params_fabric(0), p1;
    const char *png = NULL;
    double lo = 1, hi = 0, maxarg = 0;
    int i, points = 25, status = 0;
    uint64_t t0, t1, big;
    char data[] = "/tmp/rvxthresh.XXXXXX";
    FILE *df = NULL;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--png") && i + 1 < argc) png = argv[++i];
        else if (!strcmp(argv[i], "--max") && i + 1 < argc) maxarg = strtod(argv[++i], NULL);
        else if (!strcmp(argv[i], "--points") && i + 1 < argc) points = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
            if (set_param(&p0, argv[++i])) {
                fprintf(stderr, "rvxthresh: --set %s: unknown parameter or not a number\n", argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: rvxthresh [--png out.png] [--max BYTES] [--points N] "
                            "[--set name=value]...\n");
            return 2;
        }
    }
    if (points < 2) points = 2;
    p0.rrc = 0;
    p1 = p0;
    p1.rrc = 1;
    t0 = rvx_thresh_compute(&p0);
    t1 = rvx_thresh_compute(&p1);
    if (!t0 || !t1) {
        fprintf(stderr, "rvxthresh: a parameter is outside the model's ranges (see proto/thresh.h)\n");
        return 2;
    }

    printf("fabric %s: latency %llu ns, overhead %llu ns, bw %llu MB/s, bcopy bw %llu MB/s,\n"
           "  registration %llu ns + %llu ns/KB, lanes %llu, perf diff %llu%% (d = %.2f)\n",
           RVX_FAB_NAME, (unsigned long long)p0.latency_ns, (unsigned long long)p0.overhead_ns,
           (unsigned long long)p0.bw_mbs, (unsigned long long)p0.bcopy_bw_mbs,
           (unsigned long long)p0.reg_overhead_ns, (unsigned long long)p0.reg_growth_ns_per_kb,
           (unsigned long long)p0.lanes, (unsigned long long)p0.perf_diff_pct,
           1.0 - (double)p0.perf_diff_pct / 100.0);
    show_thresh("threshold, AM rendezvous (rrc=0):", t0, p0.fallback);
    show_thresh("threshold, RMA rendezvous (rrc=1):", t1, p1.fallback);
    printf("%-34s %zu bytes (rndv=%s%s)\n", "RVX_RNDV_THRESH_BYTES of this build:",
           (size_t)RVX_RNDV_THRESH_BYTES, RVX_RNDV_NAME,
#ifdef RVX_RNDV_THRESH
           ", pinned by RVX_RNDV_THRESH"
#else
           ""
#endif
    );
    {
        /* the compile-time constant and the run-time function are one expression: say so if not */
        rvx_thresh_params_t pb = rvx_thresh_params_fabric(RVX_RNDV_RRC);
        if (RVX_RNDV_THRESH_MODEL_BYTES != rvx_thresh_compute(&pb)) {
            fprintf(stderr, "rvxthresh: compile-time %llu differs from run-time %llu\n",
                    (unsigned long long)RVX_RNDV_THRESH_MODEL_BYTES,
                    (unsigned long long)rvx_thresh_compute(&pb));
            status = 1;
        }
    }

    big = 0;
    if (t0 != p0.fallback) big = t0;
    if (t1 != p1.fallback && t1 > big) big = t1;
    hi = maxarg > 1 ? maxarg : (big ? 4.0 * (double)big : 1048576.0);
    if (hi < 1024) hi = 1024;

    printf("\n%14s %16s %16s %16s\n", "size (B)", "eager (ns)", "rndv AM (ns)", "rndv RMA (ns)");
    for (i = 0; i < points; i++) {
        size_t s = (size_t)llround(exp(log(lo) + (log(hi) - log(lo)) * i / (points - 1)));
        printf("%14zu %16.1f %16.1f %16.1f\n", s, rvx_thresh_eager_ns(&p0, s),
               rvx_thresh_rndv_ns(&p0, s), rvx_thresh_rndv_ns(&p1, s));
    }

    if (png) {
        int fd = mkstemp(data);
        if (fd < 0 || !(df = fdopen(fd, "w"))) {
            perror("rvxthresh: temporary file");
            return 1;
        }
        for (i = 0; i <= 400; i++) {
            size_t s = (size_t)llround(exp(log(lo) + (log(hi) - log(lo)) * i / 400));
            fprintf(df, "%zu %.3f %.3f %.3f\n", s, rvx_thresh_eager_ns(&p0, s),
                    rvx_thresh_rndv_ns(&p0, s), rvx_thresh_rndv_ns(&p1, s));
        }
        fclose(df);
        if (plot(png, data, &p0, t0, t1, lo, hi)) {
            fprintf(stderr, "rvxthresh: gnuplot failed (install gnuplot-nox: make deps)\n");
            status = 1;
        } else {
            printf("\nwrote %s\n", png);
        }
        unlink(data);
    }
    return status;
}
