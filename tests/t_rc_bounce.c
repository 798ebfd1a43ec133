/* t_rc_bounce: the bounce pool is per worker, lent to peers in segments. With a pool of two
 * segments and three peers, copies to every peer in turn (puts and gets through the bounce
 * memory, fetching atomics with their 8-byte slots) must take segments back from peers that have
 * nothing in flight: every byte arrives, every get and fetch reads what is there, and no more
 * than two peers ever hold a segment. */
#define RVX_MLX5_BOUNCE_SEG   (1 << 15)
#define RVX_MLX5_BOUNCE_BYTES (1 << 16)
#include <rvx/rvx.h>
#include "testlib.h"

#define NR    4
#define SLOT  (1 << 16)
#define LEN   20011
#define ROUND 12

/* Segments lent to a conn; each holder's conn points to its segment, the others to the empty
 * record. */
static unsigned holders(const rvx__tl_iface_t *ifc)
{
    unsigned i, n = 0;
    int r;
    for (i = 0; ifc->bsegs && i < RVX_MLX5_BOUNCE_BYTES / RVX_MLX5_BOUNCE_SEG; i++)
        if (ifc->bsegs[i].holder) {
            T_CHECK(ifc->bsegs[i].holder->bs == &ifc->bsegs[i], "segment %u's holder points elsewhere", i);
            n++;
        }
    for (r = 0; r < ifc->nranks; r++) {
        const rvx__rc_bseg_t *s = ifc->conns[r].bs;
        T_CHECK(s == &ifc->bnone || s->holder == &ifc->conns[r], "rank %d's conn has a segment it does not hold", r);
    }
    T_CHECK(ifc->bnone.head == 0 && ifc->bnone.lim == 0, "the empty record took a copy");
    return n;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep[NR];
    rvx_rkey_t rk[NR];
    rvx_mem_t *mem;
    t_remote_t *rm;
    unsigned char *region, *out, *in;
    unsigned most = 0;
    int me, r, i;

    t_spawn(argc, argv, NR, 120);
    me = t_start(&ctx, &w);
    region = (unsigned char *)aligned_alloc(4096, (size_t)NR * SLOT);
    out = (unsigned char *)malloc(LEN);
    in = (unsigned char *)malloc(LEN);
    memset(region, 0, (size_t)NR * SLOT);
    T_OK(rvx_mem_reg(ctx, region, (size_t)NR * SLOT, &mem));
    rm = t_exchange(ctx, mem);
    for (r = 0; r < NR; r++) {
        T_OK(rvx_ep_create(w, r, &ep[r]));
        T_OK(rvx_rkey_unpack(ep[r], rm[r].packed, &rk[r]));
    }
    T_OK(rvx_barrier(ctx));
    /* puts: round i writes the pattern (i, me, r) into our slot at every peer r, in turn */
    for (i = 0; i < ROUND; i++)
        for (r = 0; r < NR; r++) {
            if (r == me) continue;
            t_fill(out, LEN, (uint64_t)i * 100 + (uint64_t)me * 10 + (uint64_t)r);
            T_OK(rvx_put(ep[r], out, LEN, rm[r].addr + (uint64_t)me * SLOT, &rk[r]));
            if (holders(&w->iface[0]) > most) most = holders(&w->iface[0]);
        }
    for (r = 0; r < NR; r++) T_OK(rvx_ep_flush(ep[r]));
    T_OK(rvx_barrier(ctx));
    for (r = 0; r < NR; r++)
        if (r != me)
            T_CHECK(t_verify(region + (size_t)r * SLOT, LEN, (uint64_t)(ROUND - 1) * 100 + (uint64_t)r * 10 +
                             (uint64_t)me) < 0, "rank %d's last put did not land", r);
    T_OK(rvx_barrier(ctx));
    /* gets and fetching atomics, peers in turn */
    for (i = 0; i < 4; i++)
        for (r = 0; r < NR; r++) {
            rvx_request_t req;
            uint64_t old = 0;
            rvx_status_t st;
            if (r == me) continue;
            rvx_request_init(&req);
            memset(in, 0, LEN);
            st = rvx_complete(w, rvx_get(ep[r], in, LEN, rm[r].addr + (uint64_t)me * SLOT, &rk[r], &req), &req);
            T_CHECK(st == RVX_OK && t_verify(in, LEN, (uint64_t)(ROUND - 1) * 100 + (uint64_t)me * 10 +
                                             (uint64_t)r) < 0, "get from rank %d: %s", r, rvx_status_str(st));
            rvx_request_init(&req);
            st = rvx_complete(w, rvx_atomic64(ep[r], RVX_AMO_ADD, 1, 0, rm[r].addr + (uint64_t)me * SLOT + SLOT - 8,
                                              &rk[r], &old, &req), &req);
            T_CHECK(st == RVX_OK && old == (uint64_t)i, "atomic at rank %d: %s, old %llu", r,
                    rvx_status_str(st), (unsigned long long)old);
            if (holders(&w->iface[0]) > most) most = holders(&w->iface[0]);
        }
    T_CHECK(most >= 1 && most <= 2, "%u peers held a bounce segment at once (the pool has 2)", most);
    printf("rank %d: at most %u peers held a segment\n", me, most);
    T_OK(rvx_barrier(ctx));
    for (r = 0; r < NR; r++) { rvx_rkey_release(&rk[r]); rvx_ep_destroy(ep[r]); }
    rvx_mem_dereg(mem);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    free(region);
    free(out);
    free(in);
    return t_exit();
}
