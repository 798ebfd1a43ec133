/* t_bad_input: what a NIC would refuse, rvx refuses, and what a broken peer sends is counted and
 * dropped. Rank 0 attacks, rank 1 is the target and checks afterwards that nothing outside the
 * allowed bytes changed and that it still works.
 *  - puts, gets and atomics outside the rkey's region (before, after, straddling, wrapping):
 *    RVX_ERR_REMOTE_ACCESS, target and local buffer untouched; for both memory kinds
 *  - corrupt rkeys and an rkey unpacked on the wrong endpoint: RVX_ERR_INVALID_PARAM
 *  - raw frames injected below the AM layer: unknown handler id, inconsistent lengths, too many
 *    arguments, oversized medium, a long AM aimed outside every registered region
 *  - oversized medium from the API: RVX_ERR_EXCEEDS_LIMIT, nothing sent
 *  - a malformed environment: rvx_init fails with a message */
#define RVX_AM_HANDLERS(X) X(HELLO, on_hello) X(END, on_end)
#include <rvx/rvx.h>
#include "testlib.h"

#include <sys/wait.h>

#define REGION 4096

static int hellos, ends;

static void on_hello(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    hellos++;
}

static void on_end(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    ends++;
}

/* Write a frame the AM layer would never build. */
static void inject(rvx_ep_t *ep, unsigned info, size_t len, uint64_t raddr)
{
    uint8_t *body = (uint8_t *)rvx__tl_am_claim(&ep->tl[0], RVX__CHAN_REQUEST, len);
    T_CHECK(body != NULL, "no room to inject");
    if (!body) return;
    memset(body, 0, len);
    if (len >= 16) { memcpy(body + len - 16, &raddr, 8); memcpy(body + len - 8, &len, 8); }
    rvx__tl_am_publish(&ep->tl[0], RVX__CHAN_REQUEST, body, len, info);
}

/* rvx_init must refuse a broken environment, in a child so our own context is unaffected. */
static void check_env(const char *var, const char *val)
{
    pid_t pid = fork();
    int st;
    if (pid == 0) {
        rvx_context_t *c;
        setenv(var, val, 1);
        _exit(rvx_init(&c) == RVX_ERR_INVALID_PARAM ? 0 : 1);
    }
    waitpid(pid, &st, 0);
    T_CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rvx_init accepted %s=%s", var, val);
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep, *self;
    rvx_mem_t *mapped, *reg;
    rvx_rkey_t rkm, rkr, wrong;
    t_remote_t *rm, *rr;
    static unsigned char user[REGION], local[2 * REGION], junk[RVX_AM_MAX_MEDIUM + 8];
    int me, peer, k;
    uint64_t v = 0;

    t_spawn(argc, argv, 2, 120);
    me = t_start(&ctx, &w);
    peer = 1 - me;
    T_OK(rvx_mem_alloc(ctx, REGION, &mapped));
    T_OK(rvx_mem_reg(ctx, user, REGION, &reg));
    memset(rvx_mem_addr(mapped), 0xab, REGION);
    memset(user, 0xcd, REGION);
    rm = t_exchange(ctx, mapped);
    rr = t_exchange(ctx, reg);
    T_OK(rvx_ep_create(w, peer, &ep));
    T_OK(rvx_ep_create(w, me, &self));
    T_OK(rvx_rkey_unpack(ep, rm[peer].packed, &rkm));
    T_OK(rvx_rkey_unpack(ep, rr[peer].packed, &rkr));
    T_OK(rvx_barrier(ctx));

    if (me == 0) {
        const rvx_rkey_t *keys[2] = {&rkm, &rkr};
        uint64_t bases[2] = {rm[peer].addr, rr[peer].addr};
        unsigned char bad[RVX_RKEY_PACKED_SIZE];
        int m;
        memset(local, 0x11, sizeof(local));
        for (m = 0; m < 2; m++) {
            const rvx_rkey_t *rk = keys[m];
            uint64_t b = bases[m];
            struct { uint64_t addr; size_t len; } cases[] = {
                {b - 1, 1}, {b - 8, 16}, {b + REGION, 1}, {b + REGION - 4, 8}, {b, REGION + 1},
                {b + 1, (size_t)-1}, {b + REGION + 4096, 8}, {~0ull - 3, 8}, {0, 8}};
            for (k = 0; k < (int)(sizeof(cases) / sizeof(cases[0])); k++) {
                size_t len = cases[k].len > sizeof(local) ? sizeof(local) : cases[k].len;
                if (cases[k].len == (size_t)-1) len = REGION; /* b+1 .. b+REGION+1 */
                T_STATUS(rvx_put(ep, local, len, cases[k].addr, rk), RVX_ERR_REMOTE_ACCESS);
                T_STATUS(rvx_get(ep, local, len, cases[k].addr, rk, NULL), RVX_ERR_REMOTE_ACCESS);
            }
            T_STATUS(rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, b + REGION, rk, NULL, NULL), RVX_ERR_REMOTE_ACCESS);
            T_STATUS(rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, b - 8, rk, NULL, NULL), RVX_ERR_REMOTE_ACCESS);
            T_STATUS(rvx_atomic32(ep, RVX_AMO_ADD, 1, 0, b + REGION - 2, rk, NULL, NULL), RVX_ERR_REMOTE_ACCESS);
            T_STATUS(rvx_am_long(ep, RVX_AM_HELLO, NULL, 0, local, 16, b + REGION - 8, rk),
                     RVX_ERR_REMOTE_ACCESS);
        }
        /* cross-memory attach memory is not atomic: refused, untouched */
        T_STATUS(rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, rr[peer].addr, &rkr, NULL, NULL), RVX_ERR_UNSUPPORTED);
        for (k = 0; k < (int)sizeof(local); k++)
            if (local[k] != 0x11) { T_CHECK(0, "failed get wrote local byte %d", k); break; }

        /* corrupt keys, and a key of rank 1 unpacked on the loopback endpoint */
        memcpy(bad, rm[peer].packed, sizeof(bad));
        bad[3] ^= 0x40;
        T_STATUS(rvx_rkey_unpack(ep, bad, &wrong), RVX_ERR_INVALID_PARAM);
        memcpy(bad, rm[peer].packed, sizeof(bad));
        memset(bad + 8, 0xff, 16); /* base + len wraps around */
        T_STATUS(rvx_rkey_unpack(ep, bad, &wrong), RVX_ERR_INVALID_PARAM);
        T_STATUS(rvx_rkey_unpack(self, rm[peer].packed, &wrong), RVX_ERR_INVALID_PARAM);
        T_STATUS(rvx_rkey_unpack(ep, NULL, &wrong), RVX_ERR_INVALID_PARAM);

        /* API-level refusals send nothing */
        T_STATUS(rvx_am_medium(ep, RVX_AM_HELLO, NULL, 0, junk, RVX_AM_MAX_MEDIUM + 1), RVX_ERR_EXCEEDS_LIMIT);
        T_STATUS(rvx_am_short(ep, 200, NULL, 0), RVX_ERR_INVALID_PARAM);

        /* frames from a broken peer: each kind once, then a good one */
        inject(ep, 200 | RVX__AM_SHORT << 8, 0, 0);                        /* unknown id */
        inject(ep, RVX_AM_HELLO | 0u << 8, 0, 0);                          /* kind 0 */
        inject(ep, RVX_AM_HELLO | RVX__AM_SHORT << 8 | 2u << 10, 8, 0);    /* 2 args, 8 bytes */
        inject(ep, RVX_AM_HELLO | RVX__AM_SHORT << 8 | 15u << 10, 120, 0); /* too many args */
        inject(ep, RVX_AM_HELLO | RVX__AM_MEDIUM << 8, RVX_AM_MAX_MEDIUM + 1, 0); /* oversized */
        inject(ep, RVX_AM_HELLO | 1u << 14 | RVX__AM_SHORT << 8, 0, 0);    /* unknown class */
        inject(ep, RVX_AM_HELLO | RVX__AM_LONG << 8, 16, 0x1000);          /* target unregistered */
        inject(ep, RVX_AM_HELLO | RVX__AM_LONG << 8, 16, rm[peer].addr + REGION - 4); /* straddles */
        T_OK(rvx_am_short(ep, RVX_AM_HELLO, NULL, 0));
        T_OK(rvx_am_short(ep, RVX_AM_END, NULL, 0));
    } else {
        rvx_worker_stats_t s;
        T_CHECK(rvx_wait_flag(w, ep, &ends, 20000) == RVX_OK, "rank 0 never finished");
        rvx_worker_stats(w, &s);
        T_CHECK(s.am_unknown_id == 1, "unknown ids counted: %llu", (unsigned long long)s.am_unknown_id);
        T_CHECK(s.am_bad_frame == 5, "malformed frames counted: %llu", (unsigned long long)s.am_bad_frame);
        T_CHECK(s.am_bad_long_target == 2, "bad long targets counted: %llu",
                (unsigned long long)s.am_bad_long_target);
        T_CHECK(hellos == 1, "only the good AM reached the handler (%d)", hellos);
        for (k = 0; k < REGION; k++) {
            if (((unsigned char *)rvx_mem_addr(mapped))[k] != 0xab || user[k] != 0xcd) {
                T_CHECK(0, "byte %d of a target region changed", k);
                break;
            }
        }
    }
    T_OK(rvx_barrier(ctx));
    /* both still work after all that */
    T_OK(rvx_atomic64(ep, RVX_AMO_ADD, 5, 0, rm[peer].addr, &rkm, &v, NULL));
    T_OK(rvx_ep_flush(ep));
    T_OK(rvx_barrier(ctx));
    T_CHECK(*(uint64_t *)rvx_mem_addr(mapped) == 0xababababababababull + 5, "atomic after the attack");

    if (me == 0) {
        check_env("RVX_RANK", "x");
        check_env("RVX_RANK", "7");
        check_env("RVX_SIZE", "0");
        check_env("RVX_BOOT_TIMEOUT", "-3");
    }
    T_OK(rvx_barrier(ctx));
    rvx_rkey_release(&rkm);
    rvx_rkey_release(&rkr);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mapped);
    rvx_mem_dereg(reg);
    rvx_finalize(ctx);
    free(rm);
    free(rr);
    return t_exit();
}
