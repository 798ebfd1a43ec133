/* t_atomics: four processes run every atomic operation, 32 and 64 bit, fetching and not, at the
 * same time on locations owned by rank 0; the final values and the fetched values are exact.
 * On more ranks (RVX_TEST_RANKS) the 64-bit round targets the last rank instead, so with ranks
 * placed on 2 nodes in blocks every rank meets a target on its node and one across, and each rank
 * runs NR*K/N iterations (the same total on each target word). */
#include <rvx/rvx.h>
#include "testlib.h"

#define NR   4
#define K    2000
#define MAXR 32 /* a bit per rank in the OR and AND words */

/* Slots in rank 0's region, one pair (64-bit, 32-bit) per operation under test. */
enum { S_ADD, S_FADD, S_SUB, S_INC, S_DEC, S_OR, S_AND, S_XOR, S_MIN, S_MAX, S_UMIN, S_UMAX,
       S_MULT, S_CAS, S_SWAP, S_SETGET, NSLOT };

static rvx_ep_t *ep;
static rvx_worker_t *w;
static rvx_rkey_t rk;
static uint64_t base;

/* One call for both widths; the fetched value widened to 64 bits. */
static rvx_status_t amo(int bits, rvx_amo_op_t op, uint64_t v, uint64_t cmp, int slot, uint64_t *out)
{
    rvx_request_t req;
    rvx_status_t st;
    uint64_t addr = base + (uint64_t)slot * 16 + (bits == 32 ? 8 : 0);
    req.status = RVX_INPROGRESS;
    if (bits == 64) {
        st = rvx_atomic64(ep, op, v, cmp, addr, &rk, out, out ? &req : NULL);
    } else {
        uint32_t f = 0;
        st = rvx_atomic32(ep, op, (uint32_t)v, (uint32_t)cmp, addr, &rk, out ? &f : NULL,
                          out ? &req : NULL);
        if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
        if (out) *out = f;
        return st;
    }
    if (st == RVX_INPROGRESS) st = rvx_wait(w, &req);
    return st;
}

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_mem_t *mem = NULL;
    t_remote_t *rm;
    rvx_ep_t *eps[2];
    rvx_rkey_t rks[2];
    int me, n, k, bits, i, target[2], t;
    uint64_t mask;

    t_spawn_upto(argc, argv, NR, MAXR, 300);
    me = t_start(&ctx, &w);
    n = rvx_size(ctx);
    k = n > NR ? NR * K / n : K;
    target[0] = 0;                   /* the 32-bit round */
    target[1] = n > NR ? n - 1 : 0;  /* the 64-bit round */
    if (me == target[0] || me == target[1]) {
        uint64_t *p;
        T_OK(rvx_mem_alloc(ctx, NSLOT * 16, &mem));
        p = (uint64_t *)rvx_mem_addr(mem);
        for (i = 0; i < NSLOT; i++) p[2 * i] = p[2 * i + 1] = 0;
        p[2 * S_AND] = ~0ull; ((uint32_t *)&p[2 * S_AND + 1])[0] = ~0u;
        p[2 * S_MIN] = 0; p[2 * S_MAX] = 0;
        p[2 * S_UMIN] = ~0ull; ((uint32_t *)&p[2 * S_UMIN + 1])[0] = ~0u;
        p[2 * S_MULT] = 1; ((uint32_t *)&p[2 * S_MULT + 1])[0] = 1;
        p[2 * S_DEC] = (uint64_t)n * k; ((uint32_t *)&p[2 * S_DEC + 1])[0] = (uint32_t)(n * k);
        p[2 * S_SUB] = (uint64_t)n * k * 3; ((uint32_t *)&p[2 * S_SUB + 1])[0] = (uint32_t)(n * k * 3);
    }
    rm = t_exchange(ctx, mem);
    T_OK(rvx_ep_create(w, target[0], &eps[0]));
    T_OK(rvx_rkey_unpack(eps[0], rm[target[0]].packed, &rks[0]));
    eps[1] = eps[0];
    rks[1] = rks[0];
    if (target[1] != target[0]) {
        T_OK(rvx_ep_create(w, target[1], &eps[1]));
        T_OK(rvx_rkey_unpack(eps[1], rm[target[1]].packed, &rks[1]));
    }
    T_OK(rvx_barrier(ctx));

    for (bits = 32; bits <= 64; bits += 32) {
        uint64_t fsum = 0, sx = 0, swaps = 0;
        t = bits == 64;
        ep = eps[t];
        rk = rks[t];
        base = rm[target[t]].addr;
        mask = bits == 32 ? 0xffffffffull : ~0ull;
        for (i = 0; i < k; i++) {
            uint64_t f = 0, old, seen;
            T_OK(amo(bits, RVX_AMO_ADD, 2, 0, S_ADD, NULL));
            T_OK(amo(bits, RVX_AMO_ADD, 1, 0, S_FADD, &f));
            fsum += f;
            T_OK(amo(bits, RVX_AMO_SUB, 3, 0, S_SUB, NULL));
            T_OK(amo(bits, RVX_AMO_INC, 0, 0, S_INC, i & 1 ? &f : NULL));
            T_OK(amo(bits, RVX_AMO_DEC, 0, 0, S_DEC, NULL));
            T_OK(amo(bits, RVX_AMO_XOR, (uint64_t)(me + 1) << (i % (bits - 3)), 0, S_XOR, NULL));
            /* min/max of signed values: rank r offers -(r*k+i) and +(r*k+i) */
            T_OK(amo(bits, RVX_AMO_MIN, (uint64_t)-(int64_t)(me * k + i), 0, S_MIN, NULL));
            T_OK(amo(bits, RVX_AMO_MAX, (uint64_t)(me * k + i), 0, S_MAX, NULL));
            T_OK(amo(bits, RVX_AMO_UMIN, (uint64_t)(1000 + me * k + i), 0, S_UMIN, NULL));
            T_OK(amo(bits, RVX_AMO_UMAX, (uint64_t)(1000 + me * k + i), 0, S_UMAX, NULL));
            /* a CAS loop: increment by compare-and-swap until it lands */
            T_OK(amo(bits, RVX_AMO_GET, 0, 0, S_CAS, &old));
            for (;;) {
                T_OK(amo(bits, RVX_AMO_CAS, (old + 1) & mask, old, S_CAS, &seen));
                if (seen == old) break;
                old = seen;
            }
            /* swap in unique tokens; every token but the last comes back to exactly one rank */
            T_OK(amo(bits, RVX_AMO_SWAP, (uint64_t)(me * k + i + 1), 0, S_SWAP, &f));
            sx ^= f;
            swaps ^= (uint64_t)(me * k + i + 1);
        }
        if (i == k) {
            T_OK(amo(bits, RVX_AMO_OR, 1ull << me, 0, S_OR, NULL));
            T_OK(amo(bits, RVX_AMO_AND, ~(1ull << me), 0, S_AND, NULL));
            T_OK(amo(bits, RVX_AMO_MULT, 3, 0, S_MULT, NULL));
        }
        T_OK(rvx_ep_flush(ep));
        T_OK(rvx_barrier(ctx));
        {
            /* fetch-add results: each value 0..n*k-1 came back once, so they sum to a triangle */
            uint64_t all_f[MAXR], all_x[MAXR], all_t[MAXR], tot_f = 0, tot_x = 0, tot_t = 0, v, m3 = 1;
            T_OK(rvx_allgather(ctx, &fsum, 8, all_f));
            T_OK(rvx_allgather(ctx, &sx, 8, all_x));
            T_OK(rvx_allgather(ctx, &swaps, 8, all_t));
            for (i = 0; i < n; i++) { tot_f += all_f[i]; tot_x ^= all_x[i]; tot_t ^= all_t[i]; }
            T_CHECK(tot_f == (uint64_t)n * k * ((uint64_t)n * k - 1) / 2, "%d-bit fetch-add values", bits);
            for (i = 0; i < n; i++) m3 *= 3;
#define FINAL(slot, want)                                                                     \
            do {                                                                              \
                v = 0;                                                                        \
                T_OK(amo(bits, RVX_AMO_GET, 0, 0, slot, &v));                                 \
                T_CHECK(v == ((uint64_t)(want) & mask), "%d-bit %s: %llx, expected %llx", bits, \
                        #slot, (unsigned long long)v, (unsigned long long)((want) & mask));   \
            } while (0)
            FINAL(S_ADD, 2ull * n * k);
            FINAL(S_FADD, 1ull * n * k);
            FINAL(S_SUB, 0);
            FINAL(S_INC, 1ull * n * k);
            FINAL(S_DEC, 0);
            {
                uint64_t x = 0;
                int r;
                for (r = 0; r < n; r++)
                    for (i = 0; i < k; i++) x ^= (uint64_t)(r + 1) << (i % (bits - 3));
                FINAL(S_XOR, x);
            }
            FINAL(S_OR, (1ull << n) - 1);
            FINAL(S_AND, ~((1ull << n) - 1));
            FINAL(S_MIN, (uint64_t)-(int64_t)((n - 1) * k + k - 1));
            FINAL(S_MAX, (uint64_t)((n - 1) * k + k - 1));
            FINAL(S_UMIN, 1000);
            FINAL(S_UMAX, (uint64_t)(1000 + (n - 1) * k + k - 1));
            FINAL(S_MULT, m3);
            FINAL(S_CAS, 1ull * n * k);
            /* every token was fetched once except the final one, which is still in the slot */
            v = 0;
            T_OK(amo(bits, RVX_AMO_GET, 0, 0, S_SWAP, &v));
            T_CHECK((tot_x ^ v) == (tot_t & mask), "%d-bit swap tokens", bits);
        }
        T_OK(rvx_barrier(ctx));
    }
    /* SET then GET from one rank, both widths */
    if (me == 1) {
        uint64_t v = 0;
        T_OK(amo(64, RVX_AMO_SET, 0x1122334455667788ull, 0, S_SETGET, NULL));
        T_OK(amo(64, RVX_AMO_GET, 0, 0, S_SETGET, &v));
        T_CHECK(v == 0x1122334455667788ull, "set/get 64");
        T_OK(amo(32, RVX_AMO_SET, 0xdeadbeef, 0, S_SETGET, NULL));
        T_OK(amo(32, RVX_AMO_GET, 0, 0, S_SETGET, &v));
        T_CHECK(v == 0xdeadbeef, "set/get 32");
    }
    T_OK(rvx_barrier(ctx));
    rvx_rkey_release(&rks[0]);
    if (target[1] != target[0]) rvx_rkey_release(&rks[1]);
    rvx_worker_destroy(w);
    if (mem) rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    free(rm);
    return t_exit();
}
