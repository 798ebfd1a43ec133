/* t_rma: put and get between two processes, every size 0..4096 and powers of two +-1 up to 1 MiB,
 * with unaligned source and target offsets, into memory from rvx_mem_alloc (mapped) and from
 * rvx_mem_reg (cross-memory attach). Guard bytes around each target must stay untouched. Both
 * ranks act as initiator at once, each on the other's memory. */
#include <rvx/rvx.h>
#include "testlib.h"

#define GUARD 64
#define MAXLEN (1u << 20)
#define REGION (MAXLEN + 2 * GUARD + 64)

static size_t sizes[8192];
static size_t nsizes;

static void make_sizes(void)
{
    size_t s, p;
    for (s = 0; s <= 4096; s++) sizes[nsizes++] = s;
    for (p = 8192; p <= MAXLEN; p *= 2) {
        sizes[nsizes++] = p - 1;
        sizes[nsizes++] = p;
        if (p < MAXLEN) sizes[nsizes++] = p + 1;
    }
}

/* Put len bytes at offset doff of the peer's region, then get the window around it back and
 * check the data and the guards on both sides. */
static void one(rvx_ep_t *ep, rvx_worker_t *w, const rvx_rkey_t *rk, uint64_t rbase,
                unsigned char *src, unsigned char *back, size_t len, size_t soff, size_t doff,
                uint64_t seed, const char *kind)
{
    rvx_request_t req;
    rvx_status_t st;
    long bad;
    size_t i;

    /* guards on both sides of the target, then the data */
    memset(back, 0xee, GUARD);
    T_OK(rvx_put(ep, back, GUARD, rbase + doff, rk));
    T_OK(rvx_put(ep, back, GUARD, rbase + GUARD + doff + len, rk));
    t_fill(src + soff, len, seed);
    st = rvx_put(ep, src + soff, len, rbase + GUARD + doff, rk);
    T_CHECK(st == RVX_OK, "%s put %zu: %s", kind, len, rvx_status_str(st));
    T_OK(rvx_ep_flush(ep));
    memset(back, 0x5a, len + 2 * GUARD);
    req.status = RVX_INPROGRESS;
    st = rvx_get(ep, back, len + 2 * GUARD, rbase + doff, rk, &req);
    if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
    T_CHECK(st == RVX_OK, "%s get %zu: %s", kind, len, rvx_status_str(st));
    bad = t_verify(back + GUARD, len, seed);
    T_CHECK(bad < 0, "%s size %zu soff %zu doff %zu: byte %ld differs", kind, len, soff, doff, bad);
    for (i = 0; i < GUARD; i++) {
        if (back[i] != 0xee || back[GUARD + len + i] != 0xee) {
            T_CHECK(0, "%s size %zu: guard byte %zu overwritten", kind, len, i);
            break;
        }
    }
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    rvx_mem_t *mapped, *reg;
    rvx_rkey_t rk_map, rk_reg;
    t_remote_t *rm, *rr;
    unsigned char *user, *src, *back;
    size_t i;
    int me, peer;

    t_spawn(argc, argv, 2, 300);
    make_sizes();
    me = t_start(&ctx, &w);
    peer = 1 - me;
    user = (unsigned char *)malloc(REGION);
    src = (unsigned char *)malloc(MAXLEN + 64);
    back = (unsigned char *)malloc(MAXLEN + 2 * GUARD + 64);
    T_OK(rvx_mem_alloc(ctx, REGION, &mapped));
    T_OK(rvx_mem_reg(ctx, user, REGION, &reg));
    memset(rvx_mem_addr(mapped), 0xee, REGION);
    memset(user, 0xee, REGION);
    rm = t_exchange(ctx, mapped);
    rr = t_exchange(ctx, reg);
    T_OK(rvx_ep_create(w, peer, &ep));
    T_OK(rvx_rkey_unpack(ep, rm[peer].packed, &rk_map));
    T_OK(rvx_rkey_unpack(ep, rr[peer].packed, &rk_reg));
#if RVX_TL == RVX_TL_SHM
    T_CHECK(rk_map.lbase != NULL && rk_reg.lbase == NULL, "mapped and attached keys");
#endif
    T_OK(rvx_barrier(ctx));

    for (i = 0; i < nsizes && t_failures < 20; i++) {
        size_t len = sizes[i], soff = i % 8, doff = (i * 3) % 8;
        one(ep, w, &rk_map, rm[peer].addr, src, back, len, soff, doff, i, "mapped");
        one(ep, w, &rk_reg, rr[peer].addr, src, back, len, soff, doff, i + 100000, "registered");
    }
    /* zero-copy variants on the largest size */
    {
        rvx_mem_t *lmem;
        rvx_request_t req;
        rvx_status_t st;
        T_OK(rvx_mem_alloc(ctx, MAXLEN, &lmem));
        t_fill(rvx_mem_addr(lmem), MAXLEN, 4242);
        req.status = RVX_INPROGRESS;
        st = rvx_put_zcopy(ep, rvx_mem_addr(lmem), MAXLEN, lmem, rm[peer].addr + GUARD, &rk_map, &req);
        if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
        T_CHECK(st == RVX_OK, "put_zcopy: %s", rvx_status_str(st));
        T_OK(rvx_ep_flush(ep));
        memset(rvx_mem_addr(lmem), 0, MAXLEN);
        req.status = RVX_INPROGRESS;
        st = rvx_get_zcopy(ep, rvx_mem_addr(lmem), MAXLEN, lmem, rm[peer].addr + GUARD, &rk_map, &req);
        if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
        T_CHECK(st == RVX_OK && t_verify(rvx_mem_addr(lmem), MAXLEN, 4242) < 0, "get_zcopy: %s",
                rvx_status_str(st));
        rvx_mem_dereg(lmem);
    }
    T_OK(rvx_barrier(ctx));
    /* The target's own view: the last full-size transfer is there, the region's edges untouched. */
    T_CHECK(t_verify((unsigned char *)rvx_mem_addr(mapped) + GUARD, MAXLEN, 4242) < 0,
            "target sees the zero-copy data");
    T_CHECK(((unsigned char *)rvx_mem_addr(mapped))[GUARD - 1] == 0xee &&
            user[GUARD - 1] == 0xee && user[REGION - 1] == 0xee, "edges of the regions");
    T_OK(rvx_barrier(ctx));
    printf("rank %d: %zu sizes x 2 memory kinds checked\n", me, nsizes);
    rvx_rkey_release(&rk_map);
    rvx_rkey_release(&rk_reg);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mapped);
    rvx_mem_dereg(reg);
    rvx_finalize(ctx);
    free(rm);
    free(rr);
    free(user);
    free(src);
    free(back);
    return t_exit();
}
