/* t_mailbox: in a pair build the shared-memory mailbox has rings for the ranks of the node, not
 * of the job. Started by tests/t_pair_mailbox.sh under rvxrun -n N --nodes K (blocks of
 * consecutive ranks: rank r on node r*K/N):
 *   t_mailbox size     every rank connects to every rank, checks that its own mailbox (the memfd
 *                      "rvx-mailbox", from /proc/self/fd) holds exactly the rings of its node's
 *                      ranks (2 rings of RVX_SHM_RING_SLOTS 64-byte slots and a control line per
 *                      sender, a line at the front) and that it maps exactly one mailbox per rank
 *                      of its node (its own and its on-node peers', from /proc/self/maps), each
 *                      that long; then short AMs to every rank and back, counted per sender, so
 *                      the rings at node-local slots carry traffic. Prints "mailbox: ..." with
 *                      the bytes (and VmRSS, before and after the traffic) for the measurement
 *                      in docs/transports.md.
 *   t_mailbox liar     rank N/2+1 (node 1) says it is on node 0 (RVX_NODE=0) but keeps its local
 *                      rank 1 of node 1: two senders would share rank 1's rings on node 0. Every
 *                      rank that says node 0 must be refused at worker creation; node 1's ranks
 *                      are not.
 *   t_mailbox unset    rank 1 drops RVX_LOCAL_RANK/RVX_LOCAL_SIZE (a mailbox for the whole job
 *                      beside node-sized ones): node 0's ranks are refused, node 1's are not.
 * Public API plus /proc (and the pair's build flags: RVX_SHM_RING_SLOTS). */
#define RVX_AM_HANDLERS(X) X(HIT, on_hit)
#include <rvx/rvx.h>
#include <sys/stat.h>
#include "testlib.h"

#define BURST 50

static int *got; /* messages received, by sender */

static void on_hit(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t;
    (void)p;
    (void)len;
    if (n == 1 && got) got[a[0]]++;
}

static long page_up(long v)
{
    long pg = sysconf(_SC_PAGESIZE);
    return (v + pg - 1) / pg * pg;
}

/* Size of this process's own mailbox (its memfd), -1 if none. */
static long own_mailbox(void)
{
    char path[64], link[256];
    long size = -1;
    int fd;
    for (fd = 0; fd < 1024; fd++) {
        struct stat sb;
        ssize_t n;
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0) continue;
        link[n] = 0;
        if (strstr(link, "memfd:rvx-mailbox") && fstat(fd, &sb) == 0) {
            T_CHECK(size < 0, "two mailbox memfds in one process (%ld and %lld bytes)", size,
                    (long long)sb.st_size);
            size = (long)sb.st_size;
        }
    }
    return size;
}

/* Mailbox mappings in this process: their number, total bytes, and how many are `want` long. */
static void mapped_mailboxes(long want, int *count, long *bytes, int *right)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    *count = *right = 0;
    *bytes = 0;
    while (f && fgets(line, sizeof(line), f)) {
        unsigned long lo, hi;
        if (!strstr(line, "memfd:rvx-mailbox") || sscanf(line, "%lx-%lx", &lo, &hi) != 2) continue;
        (*count)++;
        *bytes += (long)(hi - lo);
        if ((long)(hi - lo) == want) (*right)++;
    }
    if (f) fclose(f);
}

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6)) kb = atol(line + 6);
    if (f) fclose(f);
    return kb;
}

static int size_test(int k)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t **eps;
    int me = t_start(&ctx, &w), n = rvx_size(ctx), node = (int)((long)me * k / n), nlocal = 0;
    int r, count, right;
    long want, own, bytes;
    double t0;

    for (r = 0; r < n; r++) nlocal += (int)((long)r * k / n) == node;
    want = 64 + (long)nlocal * 2 * (64 + (long)RVX_SHM_RING_SLOTS * 64);
    T_CHECK(ctx->boot.node == node, "node %d, expected %d of %d", ctx->boot.node, node, k);
    eps = (rvx_ep_t **)calloc((size_t)n, sizeof(*eps));
    got = (int *)calloc((size_t)n, sizeof(*got));
    for (r = 0; r < n; r++) T_OK(rvx_ep_create(w, r, &eps[r]));
    own = own_mailbox();
    mapped_mailboxes(page_up(want), &count, &bytes, &right);
    printf("mailbox: rank %d of %d on node %d of %d: own %ld bytes, %d mapped (%ld bytes), "
           "rss %ld kB\n", me, n, node, k, own, count, bytes, rss_kb());
    T_CHECK(own == want, "own mailbox %ld bytes, expected %ld: rings for the %d ranks of node %d, "
            "not the job's %d (%ld)", own, want, nlocal, node, n,
            64 + (long)n * 2 * (64 + (long)RVX_SHM_RING_SLOTS * 64));
    T_CHECK(count == nlocal && right == nlocal,
            "%d mailboxes mapped (%d of %ld bytes), expected the %d of node %d", count, right,
            page_up(want), nlocal, node);
    /* every ring at its node-local slot carries a sender's messages to the right receiver */
    T_OK(rvx_barrier(ctx));
    for (r = 0; r < n; r++) {
        int i;
        uint64_t a = (uint64_t)me;
        rvx_status_t st = RVX_OK;
        for (i = 0; i < BURST && st == RVX_OK; i++) {
            rvx_am_retry(w, st, rvx_am_short(eps[r], RVX_AM_HIT, &a, 1));
            T_OK(st);
        }
    }
    t0 = t_now();
    for (r = 0; r < n && t_now() - t0 < 60; ) {
        if (got[r] >= BURST) r++;
        else rvx_progress(w);
    }
    for (r = 0; r < n; r++)
        T_CHECK(got[r] == BURST, "%d messages from rank %d, expected %d", got[r], r, BURST);
    printf("mailbox: rank %d after %d AMs to every rank: rss %ld kB\n", me, BURST, rss_kb());
    T_OK(rvx_worker_flush(w));
    T_OK(rvx_barrier(ctx));
    for (r = 0; r < n; r++) rvx_ep_destroy(eps[r]);
    free(eps);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return t_exit();
}

/* One rank's node or local rank is made wrong before init; who says node 0 must be refused. */
static int refuse_test(int liar)
{
    rvx_context_t *ctx;
    rvx_worker_t *w = NULL;
    rvx_status_t st;
    int me = atoi(getenv("RVX_RANK")), n = atoi(getenv("RVX_SIZE")), node0;
    t_rank = me;
    if (liar && me == n / 2 + 1) setenv("RVX_NODE", "0", 1);
    if (!liar && me == 1) {
        unsetenv("RVX_LOCAL_RANK");
        unsetenv("RVX_LOCAL_SIZE");
    }
    node0 = atoi(getenv("RVX_NODE")) == 0;
    T_OK(rvx_init(&ctx));
    if (t_failures) return t_exit();
    st = rvx_worker_create(ctx, &w);
    printf("rank %d (node %s): worker %s\n", me, getenv("RVX_NODE"),
           st == RVX_OK ? "created" : rvx_status_str(st));
    if (node0) T_STATUS(st, RVX_ERR_INVALID_PARAM);
    else T_OK(st);
    if (w) rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return t_exit();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "size";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!getenv("RVX_SIZE") || !getenv("RVX_NODES")) {
        printf("SKIP: start under rvxrun -n N --nodes K (tests/t_pair_mailbox.sh)\n");
        return 77;
    }
    if (!strcmp(mode, "size")) return size_test(atoi(getenv("RVX_NODES")));
    if (!strcmp(mode, "liar")) return refuse_test(1);
    if (!strcmp(mode, "unset")) return refuse_test(0);
    fprintf(stderr, "usage: t_mailbox size|liar|unset\n");
    return 2;
}
