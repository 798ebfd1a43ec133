/* scale_ucx: what one process of an N-rank job costs UCX (the system's libucp) on rvxsim, for
 * beside bench/scale.c's rvx figures. rvx serves only as the out-of-band bootstrap (its shm
 * build: rvx_allgather, rvx_barrier; no verbs). Each rank creates a UCP context (RMA, TAG and AM,
 * as an MPI library asks) and one worker, gathers every worker's address, creates an endpoint to
 * every other rank, maps a small region, gathers the packed rkeys, puts 8 bytes into its slot of
 * every peer's region, flushes the worker, and waits in a barrier that keeps progressing UCX (a
 * peer's wire-up may still need this worker's replies). Rank 0 prints, for the worst rank,
 * `scale <label> <N> <field> <value>`; the label is SCALE_UCX_LABEL (ucx_<tl> or
 * ucx_<tl>-<variant>), else ucx_dc_mlx5 or ucx_rc_mlx5 from UCX_TLS. Fields:
 *
 *   qps, cq_entries   peak QPs (DCIs and DCTs included) and CQ entries, rvxsim's count, from before
 *                     ucp_init to after the exchange
 *   registered_mib    peak bytes registered over the same span, less what ucp_mem_map of the
 *                     bench's own region registered
 *   verbs             control verbs over the same span, less ucp_mem_map's
 *   wireup_cpu_s      process CPU (CLOCK_PROCESS_CPUTIME_ID, so UCX's async thread too) less
 *                     rvxsim's engine threads, over ucp_init, worker and endpoint creation and the
 *                     put and flush: UCX connects lazily, the flush waits for the wire-up. The
 *                     out-of-band exchanges and ucp_mem_map are not counted.
 *   init_cpu_s, init_verbs  of wireup_cpu_s and verbs, ucp_init's share: UCX opens the device
 *                     there (rvx's figures in bench/scale.c start after rvx_init, which does)
 *   rss_mib           peak resident set (getrusage)
 *   rss_kib           the Rss of every mapping after the exchange (/proc/self/smaps)
 *   fabric_kib        of it, rvxsim's inboxes (mappings under RVXSIM_FABRIC_DIR): the model's, not
 *                     UCX's
 *   model_kib         of rss_kib, rvxsim's share, which an adapter would not put in the process:
 *                     fabric_kib and the model's resident heap besides the queues (model_rss)
 *   queue_kib         of rss_kib, the QP, CQ and SRQ buffers UCX had the provider allocate,
 *                     resident (rvxsim's queue_rss): host memory on an adapter too
 *
 * A `scale-lanes <label> <N> ...` line shows the transports of rank 0's endpoint to rank 1.
 * Exits non-zero if a slot was not written, or if a label ucx_<tl> names a transport that no
 * lane uses (UCX falls back to another one when UCX_TLS's is not there). No teardown: every rank
 * leaves after a last barrier.
 *
 *   UCX_TLS=dc_mlx5,ud_mlx5,self rvxrun -n N build/bench/scale_ucx   (on rvxsim: bench/scale_ucx.sh) */
#define _GNU_SOURCE
#include <rvx/rvx.h>
#include <ucp/api/ucp.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "scale_maps.h"

static int me;

#define DIE(...) do { fprintf(stderr, "scale_ucx: rank %d: ", me); fprintf(stderr, __VA_ARGS__); \
                      fputc('\n', stderr); exit(1); } while (0)
#define OK(x) do { ucs_status_t s_ = (x); if (s_ != UCS_OK) DIE("%s: %s", #x, ucs_status_string(s_)); } while (0)
#define RVX(x) do { rvx_status_t s_ = (x); if (s_ < 0) DIE("%s: %s", #x, rvx_status_str(s_)); } while (0)

enum { F_QPS, F_REG, F_VERBS, F_CQE, F_RSS, F_RSSNOW, F_FABRIC, F_WCPU, F_INITCPU, F_INITVERBS,
       F_MODEL, F_QUEUE, F_N };
static const char *const field_name[F_N] = {
    "qps", "registered_mib", "verbs", "cq_entries", "rss_mib", "rss_kib", "fabric_kib", "wireup_cpu_s",
    "init_cpu_s", "init_verbs", "model_kib", "queue_kib",
};
static const int field_sim[F_N] = {1, 1, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1}; /* only rvxsim gives these */

/* rvxsim's counters of this process (sim/README.md "Counters"); 0 if not on the model */
typedef struct { double verbs, qps, mr, cqes, engine_s, model_rss, queue_rss; } sim_t;

static double key(const char *line, const char *k)
{
    const char *s = strstr(line, k);
    return s ? strtod(s + strlen(k), NULL) : 0;
}

static int sim_read(sim_t *c)
{
    /* UCX loads libibverbs (rvxsim's, on the model) with its modules, not in the global scope:
     * before ucp_init it is not there, and nothing is held yet */
    void *lib = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
    int (*fn)(char *, size_t) = lib ? (int (*)(char *, size_t))dlsym(lib, "rvxsim_counters") : NULL;
    char line[512];
    memset(c, 0, sizeof(*c));
    if (lib) dlclose(lib); /* only drops the reference NOLOAD took */
    if (!fn || fn(line, sizeof(line)) <= 0) return 0;
    c->verbs = key(line, "verbs=");
    c->qps = key(line, "qps_peak=");
    c->mr = key(line, "mr_bytes_peak=");
    c->cqes = key(line, "cqes_peak=");
    c->engine_s = 1e-9 * key(line, " engine_cpu_ns=");
    c->model_rss = key(line, " model_rss=");
    c->queue_rss = key(line, " queue_rss=");
    return 1;
}

/* CPU of the process less the model's engine threads, accumulated over the counted spans */
static double wcpu, wcpu_at;
static double proc_less_engine(void)
{
    struct timespec ts;
    sim_t c;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    sim_read(&c);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec - c.engine_s;
}
static void span_on(void) { wcpu_at = proc_less_engine(); }
static void span_off(void) { wcpu += proc_less_engine() - wcpu_at; }

/* Every rank's blob of its own length: the lengths first, then blobs padded to the longest,
 * each behind its length (rvx_allgather takes equal lengths). Returns the stride; *out holds
 * n blobs of that stride, each starting with its uint32_t length. */
static size_t gather_blobs(rvx_context_t *ctx, int n, const void *mine, uint32_t len, char **out)
{
    uint32_t *lens = malloc((size_t)n * sizeof(*lens)), max = 0;
    size_t stride;
    char *pad;
    int r;
    if (!lens) DIE("out of memory");
    RVX(rvx_allgather(ctx, &len, sizeof(len), lens));
    for (r = 0; r < n; r++) max = lens[r] > max ? lens[r] : max;
    stride = (sizeof(uint32_t) + max + 7) & ~(size_t)7;
    pad = calloc(1, stride);
    *out = malloc(stride * (size_t)n);
    if (!pad || !*out) DIE("out of memory");
    memcpy(pad, &len, sizeof(len));
    memcpy(pad + sizeof(len), mine, len);
    RVX(rvx_allgather(ctx, pad, stride, *out));
    free(pad);
    free(lens);
    return stride;
}

static void wait_req(ucp_worker_h w, ucs_status_ptr_t req, const char *what)
{
    ucs_status_t st;
    if (req == NULL) return;
    if (UCS_PTR_IS_ERR(req)) DIE("%s: %s", what, ucs_status_string(UCS_PTR_STATUS(req)));
    /* a peer that has not run yet leaves nothing to do: its core, not a spin, on few cores */
    while ((st = ucp_request_check_status(req)) == UCS_INPROGRESS)
        if (!ucp_worker_progress(w)) sched_yield();
    ucp_request_free(req);
    if (st != UCS_OK) DIE("%s: %s", what, ucs_status_string(st));
}

/* A barrier that progresses the worker while it waits: a counter in a shared page that rank 0
 * creates (rvx_barrier would leave peers without this worker's wire-up replies). */
static int *bar;
static void bar_setup(rvx_context_t *ctx, int n)
{
    int *pids = malloc((size_t)n * sizeof(*pids)), pid = (int)getpid(), fd = -1;
    char name[64];
    if (!pids) DIE("out of memory");
    RVX(rvx_allgather(ctx, &pid, sizeof(pid), pids));
    snprintf(name, sizeof(name), "/scale_ucx.%d", pids[0]);
    if (me == 0 && ((fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600)) < 0 || ftruncate(fd, 4096)))
        DIE("shm_open %s failed", name);
    RVX(rvx_barrier(ctx));
    if (me != 0 && (fd = shm_open(name, O_RDWR, 0)) < 0) DIE("shm_open %s failed", name);
    bar = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (bar == MAP_FAILED) DIE("mmap %s failed", name);
    close(fd);
    RVX(rvx_barrier(ctx));
    if (me == 0) shm_unlink(name);
    free(pids);
}

static void bar_wait(ucp_worker_h w, int n)
{
    __atomic_add_fetch(bar, 1, __ATOMIC_ACQ_REL);
    while (__atomic_load_n(bar, __ATOMIC_ACQUIRE) < n)
        if (!ucp_worker_progress(w)) sched_yield();
}

/* the label: SCALE_UCX_LABEL, else from the transports UCX_TLS names */
static const char *label(void)
{
    const char *l = getenv("SCALE_UCX_LABEL"), *tls = getenv("UCX_TLS");
    if (l && *l) return l;
    if (tls && strstr(tls, "dc_mlx5")) return "ucx_dc_mlx5";
    if (tls && strstr(tls, "rc_mlx5")) return "ucx_rc_mlx5";
    return "ucx";
}

/* the transports of an endpoint's lanes, from ucp_ep_print_info, on one line (malloc'd) */
static char *lanes(ucp_ep_h ep)
{
    char *buf = NULL, *line = NULL, *s, *e;
    size_t len = 0, llen = 0;
    FILE *f = open_memstream(&buf, &len), *g = open_memstream(&line, &llen);
    if (!f || !g) DIE("open_memstream failed");
    ucp_ep_print_info(ep, f);
    fclose(f);
    for (s = buf; s && *s; s = e ? e + 1 : NULL) {
        e = strchr(s, '\n');
        if (e) *e = 0;
        if (strstr(s, "lane[")) {
            while (*s == ' ' || *s == '#') s++;
            fprintf(g, " | %s", s);
        }
        if (!e) break;
    }
    fclose(g);
    free(buf);
    return line;
}

/* UCX falls back to what it has when a transport of UCX_TLS is missing: a label ucx_<tl> holds
 * only if <tl> carries a lane of the endpoint */
static int lanes_match(const char *text)
{
    char want[64];
    if (strncmp(label(), "ucx_", 4)) return 1;
    /* ucx_<tl>, or ucx_<tl>-<variant> */
    snprintf(want, sizeof(want), "%.*s/", (int)strcspn(label() + 4, "-"), label() + 4);
    return strstr(text, want) != NULL;
}

int main(void)
{
    rvx_context_t *ctx;
    ucp_context_h uctx;
    ucp_worker_h w;
    ucp_ep_h *eps;
    ucp_rkey_h *rkeys;
    ucs_status_ptr_t *reqs;
    ucp_mem_h memh;
    ucp_address_t *waddr;
    size_t wlen, klen, stride, kstride;
    void *kbuf;
    char *addrs, *keys, *lane_text;
    uint64_t *slots, *bases, base, one;
    sim_t c0, c1, ci, m0, m1;
    double v[F_N], *all, init_cpu;
    struct rusage ru;
    int n, r, f, sim, bad = 0, bad_lane = 0;

    RVX(rvx_init(&ctx));
    me = rvx_rank(ctx);
    n = rvx_size(ctx);
    one = (uint64_t)me + 1;
    eps = calloc((size_t)n, sizeof(*eps));
    rkeys = calloc((size_t)n, sizeof(*rkeys));
    reqs = calloc((size_t)n, sizeof(*reqs));
    bases = malloc((size_t)n * sizeof(*bases));
    all = calloc((size_t)n * F_N, sizeof(*all));
    slots = aligned_alloc(4096, 4096 > (size_t)n * 8 ? 4096 : ((size_t)n * 8 + 4095) & ~(size_t)4095);
    if (!eps || !rkeys || !reqs || !bases || !all || !slots) DIE("out of memory");
    memset(slots, 0, (size_t)n * 8);
    bar_setup(ctx, n);
    RVX(rvx_barrier(ctx));

    sim_read(&c0);
    span_on();
    {
        ucp_params_t cp = {0};
        ucp_worker_params_t wp = {0};
        cp.field_mask = UCP_PARAM_FIELD_FEATURES;
        cp.features = UCP_FEATURE_RMA | UCP_FEATURE_TAG | UCP_FEATURE_AM;
        OK(ucp_init(&cp, NULL, &uctx));
        init_cpu = proc_less_engine() - wcpu_at;
        sim_read(&ci);
        wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
        wp.thread_mode = UCS_THREAD_MODE_SINGLE;
        OK(ucp_worker_create(uctx, &wp, &w));
        OK(ucp_worker_get_address(w, &waddr, &wlen));
    }
    span_off();
    /* the bench's own region: its registration is taken off the counts */
    sim_read(&m0);
    {
        ucp_mem_map_params_t mp = {0};
        mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        mp.address = slots;
        mp.length = (size_t)n * 8;
        OK(ucp_mem_map(uctx, &mp, &memh));
        OK(ucp_rkey_pack(uctx, memh, &kbuf, &klen));
    }
    sim_read(&m1);
    stride = gather_blobs(ctx, n, waddr, (uint32_t)wlen, &addrs);
    kstride = gather_blobs(ctx, n, kbuf, (uint32_t)klen, &keys);
    base = (uint64_t)(uintptr_t)slots;
    RVX(rvx_allgather(ctx, &base, sizeof(base), bases));

    span_on();
    for (r = 0; r < n; r++) {
        ucp_ep_params_t ep = {0};
        if (r == me) continue;
        ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        ep.address = (const ucp_address_t *)(addrs + (size_t)r * stride + sizeof(uint32_t));
        OK(ucp_ep_create(w, &ep, &eps[r]));
    }
    /* every put issued, then one flush: a put to a peer not yet connected waits in UCX for the
     * wire-up, which the flush's progress completes, for all peers at once */
    for (r = 0; r < n; r++) {
        ucp_request_param_t p = {0};
        if (r == me) continue;
        OK(ucp_ep_rkey_unpack(eps[r], keys + (size_t)r * kstride + sizeof(uint32_t), &rkeys[r]));
        reqs[r] = ucp_put_nbx(eps[r], &one, 8, bases[r] + (uint64_t)me * 8, rkeys[r], &p);
        if (UCS_PTR_IS_ERR(reqs[r])) DIE("ucp_put_nbx: %s", ucs_status_string(UCS_PTR_STATUS(reqs[r])));
    }
    {
        ucp_request_param_t p = {0};
        wait_req(w, ucp_worker_flush_nbx(w, &p), "ucp_worker_flush_nbx");
    }
    for (r = 0; r < n; r++)
        if (r != me) wait_req(w, reqs[r], "ucp_put_nbx");
    span_off();
    bar_wait(w, n);
    lane_text = n > 1 ? lanes(eps[me ? 0 : 1]) : "";
    if (n > 1 && !lanes_match(lane_text)) {
        fprintf(stderr, "scale_ucx: rank %d: %s: no lane of its transport:%s\n", me, label(), lane_text);
        bad_lane = 1;
    }
    sim = sim_read(&c1);
    for (r = 0; r < n; r++)
        if (r != me && __atomic_load_n(&slots[r], __ATOMIC_ACQUIRE) != (uint64_t)r + 1) bad++;

    getrusage(RUSAGE_SELF, &ru);
    v[F_QPS] = c1.qps - c0.qps;
    v[F_REG] = (c1.mr - c0.mr - (m1.mr - m0.mr)) / 1048576.0;
    v[F_VERBS] = c1.verbs - c0.verbs - (m1.verbs - m0.verbs);
    v[F_CQE] = c1.cqes - c0.cqes;
    v[F_RSS] = (double)ru.ru_maxrss / 1024.0;
    {
        maps_rss_t m = maps_rss();
        v[F_RSSNOW] = m.total;
        v[F_FABRIC] = m.fabric;
    }
    v[F_WCPU] = wcpu;
    v[F_INITCPU] = init_cpu;
    v[F_INITVERBS] = ci.verbs - c0.verbs;
    v[F_MODEL] = v[F_FABRIC] + c1.model_rss / 1024.0;
    v[F_QUEUE] = c1.queue_rss / 1024.0;
    RVX(rvx_allgather(ctx, v, sizeof(v), all));
    if (bad) fprintf(stderr, "scale_ucx: rank %d: %d peers' slots not written after the exchange\n", me, bad);

    if (me == 0) {
        if (n > 1) printf("scale-lanes %s %d%s\n", label(), n, lane_text);
        for (f = 0; f < F_N; f++) {
            double worst = all[f];
            if (field_sim[f] && !sim) continue;
            for (r = 1; r < n; r++)
                if (all[(size_t)r * F_N + f] > worst) worst = all[(size_t)r * F_N + f];
            printf("scale %s %d %s %.6g\n", label(), n, field_name[f], worst);
        }
        fflush(stdout);
    }
    /* no teardown, as bench/scale.c: everyone leaves together after the exchange */
    RVX(rvx_barrier(ctx));
    fflush(stdout);
    _exit(bad != 0 || bad_lane);
}
