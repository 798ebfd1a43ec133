/* t_rma: put and get between two processes, every size 0..4096 and powers of two +-1 up to 1 MiB,
 * with unaligned source and target offsets, into memory from rvx_mem_alloc (mapped) and from
 * rvx_mem_reg (cross-memory attach). Guard bytes around each target must stay untouched. Both
 * ranks act as initiator at once, each on the other's memory.
 * On more ranks (RVX_TEST_RANKS, an even count) each rank works with two partners, rank^1 and
 * rank+N/2 (on a node and across nodes when ranks are placed in 2 blocks), each in its own slot of
 * the target's regions; the sizes are dealt between the two partners, so every size still runs on
 * every rank, and the bytes depend on sender, receiver and position. */
#include <rvx/rvx.h>
#include "testlib.h"

#define GUARD 64
#define MAXLEN (1u << 20)
#define REGION (MAXLEN + 2 * GUARD + 64)
#define MAXR   64

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

/* The bytes rank `from` writes to rank `to` for size index i: a stream of its own per triple. */
static uint64_t seed_of(int from, int to, size_t i)
{
    return (uint64_t)i + ((uint64_t)from * MAXR + (uint64_t)to) * 1000003u;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep[2];
    rvx_mem_t *mapped, *reg;
    rvx_rkey_t rk_map[2], rk_reg[2];
    t_remote_t *rm, *rr;
    unsigned char *user, *src, *back;
    size_t i;
    int me, n, np, j, peer[2];

    t_spawn_upto(argc, argv, 2, MAXR, 300);
    make_sizes();
    me = t_start(&ctx, &w);
    n = rvx_size(ctx);
    /* partner j writes slot j of our regions: rank^1 is slot 0, rank+N/2 slot 1 (the same rank
     * on 2 ranks, so one slot) */
    np = t_partners("t_rma", me, n, peer);
    user = (unsigned char *)malloc((size_t)np * REGION);
    src = (unsigned char *)malloc(MAXLEN + 64);
    back = (unsigned char *)malloc(MAXLEN + 2 * GUARD + 64);
    T_OK(rvx_mem_alloc(ctx, (size_t)np * REGION, &mapped));
    T_OK(rvx_mem_reg(ctx, user, (size_t)np * REGION, &reg));
    memset(rvx_mem_addr(mapped), 0xee, (size_t)np * REGION);
    memset(user, 0xee, (size_t)np * REGION);
    rm = t_exchange(ctx, mapped);
    rr = t_exchange(ctx, reg);
    for (j = 0; j < np; j++) {
        T_OK(rvx_ep_create(w, peer[j], &ep[j]));
        T_OK(rvx_rkey_unpack(ep[j], rm[peer[j]].packed, &rk_map[j]));
        T_OK(rvx_rkey_unpack(ep[j], rr[peer[j]].packed, &rk_reg[j]));
#if RVX_TL == RVX_TL_SHM
        T_CHECK(rk_map[j].lbase != NULL && rk_reg[j].lbase == NULL, "mapped and attached keys");
#endif
    }
    T_OK(rvx_barrier(ctx));

    for (i = 0; i < nsizes && t_failures < 20; i++) {
        size_t len = sizes[i], soff = i % 8, doff = (i * 3) % 8;
        uint64_t slot;
        j = (int)(i % (size_t)np);
        slot = (uint64_t)j * REGION;
        one(ep[j], w, &rk_map[j], rm[peer[j]].addr + slot, src, back, len, soff, doff,
            seed_of(me, peer[j], i), "mapped");
        one(ep[j], w, &rk_reg[j], rr[peer[j]].addr + slot, src, back, len, soff, doff,
            seed_of(me, peer[j], i + 100000), "registered");
    }
    /* zero-copy variants on the largest size, to each partner */
    for (j = 0; j < np; j++) {
        rvx_mem_t *lmem;
        rvx_request_t req;
        rvx_status_t st;
        uint64_t at = rm[peer[j]].addr + (uint64_t)j * REGION + GUARD, seed = seed_of(me, peer[j], 4242);
        T_OK(rvx_mem_alloc(ctx, MAXLEN, &lmem));
        t_fill(rvx_mem_addr(lmem), MAXLEN, seed);
        req.status = RVX_INPROGRESS;
        st = rvx_put_zcopy(ep[j], rvx_mem_addr(lmem), MAXLEN, lmem, at, &rk_map[j], &req);
        if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
        T_CHECK(st == RVX_OK, "put_zcopy to %d: %s", peer[j], rvx_status_str(st));
        T_OK(rvx_ep_flush(ep[j]));
        memset(rvx_mem_addr(lmem), 0, MAXLEN);
        req.status = RVX_INPROGRESS;
        st = rvx_get_zcopy(ep[j], rvx_mem_addr(lmem), MAXLEN, lmem, at, &rk_map[j], &req);
        if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
        T_CHECK(st == RVX_OK && t_verify(rvx_mem_addr(lmem), MAXLEN, seed) < 0, "get_zcopy from %d: %s",
                peer[j], rvx_status_str(st));
        rvx_mem_dereg(lmem);
    }
    T_OK(rvx_barrier(ctx));
    /* The target's own view: each partner's last full-size transfer is in its slot, the slots'
     * edges untouched. */
    for (j = 0; j < np; j++) {
        unsigned char *m = (unsigned char *)rvx_mem_addr(mapped) + (size_t)j * REGION, *u = user + (size_t)j * REGION;
        T_CHECK(t_verify(m + GUARD, MAXLEN, seed_of(peer[j], me, 4242)) < 0,
                "target sees the zero-copy data of rank %d", peer[j]);
        T_CHECK(m[GUARD - 1] == 0xee && u[GUARD - 1] == 0xee && u[REGION - 1] == 0xee,
                "edges of the regions (slot %d)", j);
    }
    /* Loads and stores where this process maps the peer's region (shm; the pair on the node):
     * rvx_rkey_ptr sees the partner's zero-copy data in it, and nothing outside the region or
     * through a key of attached memory or of the NIC's */
    for (j = 0; j < np; j++) {
        uint64_t at = rm[peer[j]].addr + (uint64_t)j * REGION + GUARD, end = rm[peer[j]].addr + (uint64_t)np * REGION;
        unsigned char *p = (unsigned char *)rvx_rkey_ptr(&rk_map[j], at, MAXLEN);
        int mapped_here = RVX_TL == RVX_TL_SHM || (RVX_PAIR && t_same_node(me, peer[j], n));
        T_CHECK(!p == !mapped_here, "rvx_rkey_ptr to rank %d: %p (%s expected)", peer[j], (void *)p,
                mapped_here ? "an address" : "NULL");
        if (p) {
            T_CHECK(t_verify(p, MAXLEN, seed_of(me, peer[j], 4242)) < 0, "loads through rvx_rkey_ptr");
            T_CHECK((unsigned char *)rvx_rkey_ptr(&rk_map[j], rm[peer[j]].addr, (size_t)np * REGION) ==
                        p - (at - rm[peer[j]].addr), "rvx_rkey_ptr of the whole region");
        }
        T_CHECK(!rvx_rkey_ptr(&rk_map[j], end - 4, 8) && !rvx_rkey_ptr(&rk_map[j], rm[peer[j]].addr - 1, 2) &&
                !rvx_rkey_ptr(&rk_map[j], end + 1, 0) && !rvx_rkey_ptr(&rk_map[j], at, SIZE_MAX),
                "rvx_rkey_ptr refuses ranges outside the region");
        T_CHECK(!rvx_rkey_ptr(&rk_reg[j], rr[peer[j]].addr, 8), "no address for attached memory");
    }
    T_OK(rvx_barrier(ctx));
    printf("rank %d: %zu sizes x 2 memory kinds checked with %d partner(s)\n", me, nsizes, np);
    for (j = 0; j < np; j++) {
        rvx_rkey_release(&rk_map[j]);
        rvx_rkey_release(&rk_reg[j]);
    }
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
