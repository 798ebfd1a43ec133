/* tests/shmem/t_shmem_api.c: an OpenSHMEM 1.5 program (only <shmem.h>) that checks the
 * specification's semantics on every transport: RMA for every standard type, AMOs from all PEs
 * at once with exact results, fence and quiet ordering, wait_until seeing puts and AMOs, barrier,
 * the collectives, teams, contexts, locks, the active-set forms, symmetric global and static
 * variables and the generic interfaces. Data depends on sender, receiver and offset. Built by
 * rvxshcc for each transport, run by tests/t_shmem.sh under rvxrun (2 or more PEs). Exit 0 pass,
 * 1 fail. */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../placement.h"   /* where rvxrun puts each PE */

static int me, npes, fails;
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            if (++fails <= 20) {                                                                   \
                fprintf(stderr, "FAIL PE %d line %d: %s: ", me, __LINE__, #c);                     \
                fprintf(stderr, __VA_ARGS__);                                                      \
                fputc('\n', stderr);                                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* what PE s writes into element i at PE r */
#define VAL(s, r, i) ((s) * 37 + (r) * 11 + (i) + 1)

/* symmetric global and static data */
long g_counter;
int g_init[4] = {5, 6, 7, 8};
static long s_flag;
static long s_data[64];
static uint32_t s_bits;
static long s_lock;
static long s_psync[SHMEM_BARRIER_SYNC_SIZE];
static long s_psync2[SHMEM_REDUCE_SYNC_SIZE];
static long s_src[8], s_dst[64];

#define NE 16
#define RMA_TEST(T, N)                                                                             \
    do {                                                                                           \
        T *a = (T *)shmem_calloc(4 * NE, sizeof(T)), src[4 * NE], got[NE];                         \
        int to = (me + 1) % npes, from = (me + npes - 1) % npes, i;                                \
        for (i = 0; i < NE; i++) src[i] = (T)VAL(me, to, i);                                       \
        shmem_##N##_put(a, src, NE, to);                            /* a[0..NE) */                 \
        for (i = 0; i < NE / 2; i++) shmem_##N##_p(&a[NE + i], (T)VAL(me, to, i + 100), to);      \
        shmem_##N##_iput(&a[2 * NE], src, 2, 1, NE / 2, to);        /* even a[2NE..3NE) */         \
        shmem_##N##_put_nbi(&a[3 * NE], src, NE, to);                                              \
        shmem_barrier_all();                                                                       \
        for (i = 0; i < NE; i++) {                                                                 \
            CHECK(a[i] == (T)VAL(from, me, i), #N " put [%d]", i);                                 \
            CHECK(a[3 * NE + i] == (T)VAL(from, me, i), #N " put_nbi [%d]", i);                    \
        }                                                                                          \
        for (i = 0; i < NE / 2; i++) {                                                             \
            CHECK(a[NE + i] == (T)VAL(from, me, i + 100), #N " p [%d]", i);                        \
            CHECK(a[2 * NE + 2 * i] == (T)VAL(from, me, i), #N " iput [%d]", i);                   \
            CHECK(a[2 * NE + 2 * i + 1] == (T)0, #N " iput gap [%d]", i);                          \
        }                                                                                          \
        shmem_##N##_get(got, a, NE, to);         /* what I put there */                             \
        for (i = 0; i < NE; i++) CHECK(got[i] == (T)VAL(me, to, i), #N " get [%d]", i);            \
        CHECK(shmem_##N##_g(&a[NE + 3], to) == (T)VAL(me, to, 103), #N " g");                     \
        memset(got, 0, sizeof(got));                                                               \
        shmem_##N##_iget(got, &a[2 * NE], 1, 2, NE / 2, to);                                       \
        for (i = 0; i < NE / 2; i++) CHECK(got[i] == (T)VAL(me, to, i), #N " iget [%d]", i);       \
        memset(got, 0, sizeof(got));                                                               \
        shmem_##N##_get_nbi(got, &a[3 * NE], NE, to);                                              \
        shmem_quiet();                                                                             \
        for (i = 0; i < NE; i++) CHECK(got[i] == (T)VAL(me, to, i), #N " get_nbi [%d]", i);        \
        shmem_free(a);                                                                             \
    } while (0);

static void test_rma(void)
{
#define RMA_ONE(T, N) RMA_TEST(T, N)
    RVX__SH_RMA_TYPES(RMA_ONE)
    /* putmem/getmem, sized forms, into static data */
    {
        long v[8], w[8];
        int to = (me + 1) % npes, from = (me + npes - 1) % npes, i;
        for (i = 0; i < 8; i++) v[i] = VAL(me, to, i) * 1000;
        shmem_putmem(&s_data[0], v, sizeof(v), to);
        shmem_put64(&s_data[8], v, 8, to);
        shmem_put32(&s_data[16], v, 16, to);
        shmem_put128(&s_data[24], v, 4, to);
        shmem_barrier_all();
        for (i = 0; i < 8; i++) {
            CHECK(s_data[i] == VAL(from, me, i) * 1000, "putmem static [%d]", i);
            CHECK(s_data[8 + i] == VAL(from, me, i) * 1000, "put64 [%d]", i);
            CHECK(s_data[16 + i] == VAL(from, me, i) * 1000, "put32 [%d]", i);
            CHECK(s_data[24 + i] == VAL(from, me, i) * 1000, "put128 [%d]", i);
        }
        shmem_getmem(w, &s_data[0], sizeof(w), to);
        for (i = 0; i < 8; i++) CHECK(w[i] == VAL(me, to, i) * 1000, "getmem static [%d]", i);
        CHECK(shmem_int_g(&g_init[2], to) == 7, "initialized global");
        shmem_barrier_all();
    }
}

/* every PE hammers one word on every PE at once; exact totals */
#define AMO_ROUNDS 8
#define AMO_TEST(T, N)                                                                             \
    do {                                                                                           \
        T *c = (T *)shmem_calloc(4, sizeof(T));                                                    \
        int k, pe;                                                                                 \
        static long fsum_s, fsum_d;                                                                \
        fsum_s = 0;                                                                                \
        for (k = 0; k < AMO_ROUNDS; k++)                                                           \
            for (pe = 0; pe < npes; pe++) {                                                        \
                shmem_##N##_atomic_add(&c[0], (T)(me + 1), pe);                                     \
                fsum_s += (long)shmem_##N##_atomic_fetch_inc(&c[1], pe);                            \
                shmem_##N##_atomic_inc(&c[2], pe);                                                 \
                (void)shmem_##N##_atomic_fetch_add(&c[3], (T)2, pe);                               \
            }                                                                                      \
        shmem_barrier_all();                                                                       \
        CHECK(c[0] == (T)(AMO_ROUNDS * npes * (npes + 1) / 2), #N " add: %lld", (long long)c[0]);  \
        CHECK(c[1] == (T)(AMO_ROUNDS * npes), #N " fetch_inc: %lld", (long long)c[1]);             \
        CHECK(c[2] == (T)(AMO_ROUNDS * npes), #N " inc: %lld", (long long)c[2]);                   \
        CHECK(c[3] == (T)(2 * AMO_ROUNDS * npes), #N " fetch_add: %lld", (long long)c[3]);         \
        shmem_long_sum_reduce(SHMEM_TEAM_WORLD, &fsum_d, &fsum_s, 1);                              \
        CHECK(fsum_d == (long)npes * (AMO_ROUNDS * npes) * (AMO_ROUNDS * npes - 1) / 2,            \
              #N " fetch_inc fetched %ld", fsum_d);                                                  \
        shmem_barrier_all();                                                                       \
        /* compare_swap: exactly one PE wins each word of PE 0 */                                  \
        {                                                                                          \
            T old = shmem_##N##_atomic_compare_swap(&c[0], (T)(AMO_ROUNDS * npes * (npes + 1) / 2), \
                                                    (T)(100 + me), 0);                             \
            int won = old == (T)(AMO_ROUNDS * npes * (npes + 1) / 2), wins = 0;                     \
            static long w_src, w_dst;                                                              \
            w_src = won;                                                                           \
            shmem_long_sum_reduce(SHMEM_TEAM_WORLD, &w_dst, &w_src, 1);                            \
            wins = (int)w_dst;                                                                     \
            CHECK(wins == 1, #N " compare_swap winners %d", wins);                                 \
            T now = shmem_##N##_atomic_fetch(&c[0], 0);                                            \
            CHECK(now >= (T)100 && now < (T)(100 + npes), #N " cswap value");                      \
            shmem_barrier_all();                                                                   \
            if (me == 0) shmem_##N##_atomic_set(&c[0], (T)7, npes - 1);                            \
            shmem_barrier_all();                                                                   \
            if (me == 0) CHECK(shmem_##N##_atomic_swap(&c[0], (T)9, npes - 1) == (T)7, #N " swap");  \
        }                                                                                          \
        shmem_barrier_all();                                                                       \
        shmem_free(c);                                                                             \
    } while (0);

#define BIT_TEST(T, N)                                                                             \
    do {                                                                                           \
        T *c = (T *)shmem_calloc(4, sizeof(T));                                                    \
        int pe;                                                                                    \
        c[1] = (T)~(T)0;                                                                           \
        shmem_barrier_all();                                                                       \
        for (pe = 0; pe < npes; pe++) {                                                            \
            shmem_##N##_atomic_or(&c[0], (T)1 << (me + pe) % 16, pe);                              \
            (void)shmem_##N##_atomic_fetch_and(&c[1], (T)~((T)1 << me), pe);                       \
            shmem_##N##_atomic_xor(&c[2], (T)((T)3 << me), pe);                                    \
            (void)shmem_##N##_atomic_fetch_xor(&c[2], (T)((T)1 << me), pe);                        \
            (void)shmem_##N##_atomic_fetch_or(&c[3], (T)1 << me, pe);                              \
        }                                                                                          \
        shmem_barrier_all();                                                                       \
        T want0 = 0, want1 = (T)~(T)0, want2 = 0;                                                  \
        for (pe = 0; pe < npes; pe++) {                                                            \
            want0 |= (T)1 << (pe + me) % 16;                                                       \
            want1 &= (T)~((T)1 << pe);                                                             \
            want2 ^= (T)((T)3 << pe) ^ (T)((T)1 << pe);                                            \
        }                                                                                          \
        CHECK(c[0] == want0, #N " or");                                                            \
        CHECK(c[1] == want1, #N " fetch_and");                                                     \
        CHECK(c[2] == want2, #N " xor");                                                           \
        CHECK(c[3] == (T)(((T)1 << npes) - 1), #N " fetch_or");                                    \
        shmem_barrier_all();                                                                       \
        shmem_free(c);                                                                             \
    } while (0);

static void test_amo(void)
{
    RVX__SH_AMO_STD(AMO_TEST)
    RVX__SH_AMO_BIT(BIT_TEST)
    /* float and double: fetch, set, swap */
    {
        double *d = (double *)shmem_calloc(1, sizeof(double));
        float *f = (float *)shmem_calloc(1, sizeof(float));
        int to = (me + 1) % npes;
        shmem_double_atomic_set(d, 1.5 * (me + 1), to);
        shmem_float_atomic_set(f, 0.25f * (me + 1), to);
        shmem_barrier_all();
        CHECK(*d == 1.5 * ((me + npes - 1) % npes + 1), "double set");
        CHECK(shmem_float_atomic_fetch(f, to) == 0.25f * (me + 1), "float fetch");
        shmem_barrier_all();
        CHECK(shmem_double_atomic_swap(d, -2.0, to) == 1.5 * (me + 1), "double swap");
        shmem_barrier_all();
        CHECK(*d == -2.0, "double swapped");
        shmem_free(d);
        shmem_free(f);
    }
    /* atomics on static and global variables, from every PE */
    {
        int pe, k;
        for (k = 0; k < AMO_ROUNDS; k++)
            for (pe = 0; pe < npes; pe++) {
                shmem_long_atomic_add(&g_counter, me + 1, pe);
                shmem_uint32_atomic_or(&s_bits, 1u << me, pe);
            }
        shmem_barrier_all();
        CHECK(g_counter == (long)AMO_ROUNDS * npes * (npes + 1) / 2, "global counter %ld", g_counter);
        CHECK(s_bits == (1u << npes) - 1, "static bits %x", s_bits);
        /* the nbi fetching forms and the 1.3 names */
        long f1 = -1;
        shmem_long_atomic_fetch_add_nbi(&f1, &g_counter, 0, me);
        shmem_quiet();
        CHECK(f1 == g_counter, "fetch_add_nbi");
        CHECK(shmem_long_fadd(&g_counter, 0, me) == g_counter, "fadd");
        shmem_barrier_all();
    }
}

/* fence and quiet: data then a flag; the flag's reader must see the data */
static void test_order(void)
{
    int to = (me + 1) % npes, from = (me + npes - 1) % npes, r, i;
    for (r = 1; r <= 6; r++) {
        long v[32];
        for (i = 0; i < 32; i++) v[i] = VAL(me, to, i) * r;
        shmem_long_put(s_data, v, 32, to);
        if (r & 1) shmem_fence(); else shmem_quiet();
        shmem_long_p(&s_flag, r, to);
        shmem_long_wait_until(&s_flag, SHMEM_CMP_GE, r);
        for (i = 0; i < 32; i++) CHECK(s_data[i] == VAL(from, me, i) * r, "order r %d [%d]", r, i);
        /* AMO after put: fence orders them too */
        shmem_long_put(&s_data[32], v, 16, to);
        shmem_fence();
        shmem_long_atomic_inc(&g_counter, to);
        shmem_barrier_all();
    }
    /* put with signal: the signal never before the data */
    {
        uint64_t *sig = (uint64_t *)shmem_calloc(1, 8);
        long *buf = (long *)shmem_calloc(64, sizeof(long));
        long v[64];
        uint64_t s;
        for (i = 0; i < 64; i++) v[i] = VAL(me, to, i);
        shmem_long_put_signal(buf, v, 64, sig, 1, SHMEM_SIGNAL_ADD, to);
        s = shmem_signal_wait_until(sig, SHMEM_CMP_EQ, 1);
        CHECK(s == 1 && shmem_signal_fetch(sig) == 1, "signal");
        for (i = 0; i < 64; i++) CHECK(buf[i] == VAL(from, me, i), "signal data [%d]", i);
        shmem_barrier_all();
        shmem_free(sig);
        shmem_free(buf);
    }
}

/* wait_until sees puts and atomics; the vector forms */
static void test_wait(void)
{
    int *iv = (int *)shmem_calloc(8, sizeof(int));
    int to = (me + 1) % npes, st[8] = {0}, i;
    size_t idx[8], k;
    shmem_int_atomic_add(&iv[0], 5, to);
    shmem_int_wait_until(&iv[0], SHMEM_CMP_EQ, 5);
    shmem_int_p(&iv[1], me + 10, to);
    shmem_int_wait_until(&iv[1], SHMEM_CMP_NE, 0);
    CHECK(iv[1] == (me + npes - 1) % npes + 10, "wait put");
    for (i = 2; i < 8; i++) shmem_int_atomic_inc(&iv[i], to);
    shmem_int_wait_until_all(&iv[2], 6, NULL, SHMEM_CMP_EQ, 1);
    st[0] = 1;
    k = shmem_int_wait_until_any(&iv[2], 6, st, SHMEM_CMP_EQ, 1);
    CHECK(k >= 1 && k < 6, "wait_until_any %zu", k);
    k = shmem_int_wait_until_some(&iv[2], 6, idx, NULL, SHMEM_CMP_GT, 0);
    CHECK(k == 6, "wait_until_some %zu", k);
    {
        int vals[6] = {1, 1, 1, 1, 1, 1};
        CHECK(shmem_int_test_all_vector(&iv[2], 6, NULL, SHMEM_CMP_EQ, vals), "test_all_vector");
        vals[3] = 2;
        CHECK(shmem_int_test_any_vector(&iv[2], 6, NULL, SHMEM_CMP_EQ, vals) == 0, "test_any_vector");
        CHECK(shmem_int_test_some_vector(&iv[2], 6, idx, NULL, SHMEM_CMP_EQ, vals) == 5, "test_some_vector");
    }
    CHECK(shmem_int_test(&iv[0], SHMEM_CMP_LT, 6), "test");
    CHECK(shmem_int_test_any(&iv[2], 6, NULL, SHMEM_CMP_EQ, 2) == SIZE_MAX, "test_any none");
    shmem_barrier_all();
    shmem_free(iv);
}

static void test_coll(void)
{
    long *src = (long *)shmem_malloc(64 * sizeof(long)), *dst = (long *)shmem_malloc(64 * npes * sizeof(long));
    double *ds = (double *)shmem_malloc(4 * sizeof(double)), *dd = (double *)shmem_malloc(4 * sizeof(double));
    int i, j, root = npes - 1;
    for (i = 0; i < 64; i++) src[i] = VAL(me, 0, i);
    shmem_long_broadcast(SHMEM_TEAM_WORLD, dst, src, 8, root);
    for (i = 0; i < 8; i++) CHECK(dst[i] == VAL(root, 0, i), "broadcast [%d]", i);
    shmem_long_fcollect(SHMEM_TEAM_WORLD, dst, src, 4);
    for (j = 0; j < npes; j++)
        for (i = 0; i < 4; i++) CHECK(dst[j * 4 + i] == VAL(j, 0, i), "fcollect %d %d", j, i);
    shmem_long_collect(SHMEM_TEAM_WORLD, dst, src, (size_t)me + 1);
    {
        int off = 0;
        for (j = 0; j < npes; j++)
            for (i = 0; i <= j; i++, off++) CHECK(dst[off] == VAL(j, 0, i), "collect %d %d", j, i);
    }
    for (j = 0; j < npes; j++)
        for (i = 0; i < 2; i++) src[j * 2 + i] = VAL(me, j, i);
    shmem_long_alltoall(SHMEM_TEAM_WORLD, dst, src, 2);
    for (j = 0; j < npes; j++)
        for (i = 0; i < 2; i++) CHECK(dst[j * 2 + i] == VAL(j, me, i), "alltoall %d %d", j, i);
    shmem_long_alltoalls(SHMEM_TEAM_WORLD, dst, src, 2, 1, 2);
    for (j = 0; j < npes; j++)
        for (i = 0; i < 2; i++) CHECK(dst[(j * 2 + i) * 2] == VAL(j, me, i), "alltoalls %d %d", j, i);
    for (i = 0; i < 4; i++) src[i] = VAL(me, 0, i);
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, dst, src, 4);
    for (i = 0; i < 4; i++) {
        long want = 0;
        for (j = 0; j < npes; j++) want += VAL(j, 0, i);
        CHECK(dst[i] == want, "sum [%d]", i);
    }
    shmem_long_max_reduce(SHMEM_TEAM_WORLD, dst, src, 4);
    CHECK(dst[0] == VAL(npes - 1, 0, 0), "max");
    shmem_long_min_reduce(SHMEM_TEAM_WORLD, src, src, 4); /* in place */
    CHECK(src[1] == VAL(0, 0, 1), "min in place");
    src[0] = 0xff ^ (1L << me);
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, dst, src, 1);
    {
        uint64_t *u = (uint64_t *)shmem_malloc(16), *ud = (uint64_t *)shmem_malloc(16);
        u[0] = ~(1ull << me);
        u[1] = 1ull << me;
        shmem_uint64_and_reduce(SHMEM_TEAM_WORLD, ud, u, 1);
        shmem_uint64_or_reduce(SHMEM_TEAM_WORLD, &ud[1], &u[1], 1);
        CHECK(ud[0] == ~((1ull << npes) - 1), "and_reduce");
        CHECK(ud[1] == (1ull << npes) - 1, "or_reduce");
        shmem_uint64_xor_reduce(SHMEM_TEAM_WORLD, ud, &u[1], 1);
        CHECK(ud[0] == (1ull << npes) - 1, "xor_reduce");
        shmem_free(u);
        shmem_free(ud);
    }
    ds[0] = 0.5 * (me + 1);
    shmem_double_prod_reduce(SHMEM_TEAM_WORLD, dd, ds, 1);
    {
        double want = 1;
        for (j = 0; j < npes; j++) want *= 0.5 * (j + 1);
        CHECK(dd[0] == want, "prod %g %g", dd[0], want);
    }
    /* generic forms */
    shmem_sum_reduce(SHMEM_TEAM_WORLD, dd, ds, 1);
    CHECK(dd[0] == 0.5 * npes * (npes + 1) / 2, "generic sum");
    shmem_free(src);
    shmem_free(dst);
    shmem_free(ds);
    shmem_free(dd);
}

static void test_teams(void)
{
    shmem_team_t even = SHMEM_TEAM_INVALID, x = SHMEM_TEAM_INVALID, y = SHMEM_TEAM_INVALID;
    int neven = (npes + 1) / 2, rc;
    long *v = (long *)shmem_calloc(8, sizeof(long)), *r = (long *)shmem_calloc(8, sizeof(long));
    rc = shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, neven, NULL, 0, &even);
    CHECK(rc == 0, "split_strided rc %d", rc);
    if (me % 2 == 0) {
        CHECK(even != SHMEM_TEAM_INVALID, "even team");
        CHECK(shmem_team_my_pe(even) == me / 2 && shmem_team_n_pes(even) == neven, "even numbering");
        CHECK(shmem_team_translate_pe(even, 1 % neven, SHMEM_TEAM_WORLD) == 2 * (1 % neven), "translate");
        v[0] = me + 1;
        shmem_long_sum_reduce(even, r, v, 1);
        CHECK(r[0] == (long)neven * neven, "even sum %ld", r[0]); /* 1 + 3 + 5 ... */
        shmem_team_sync(even);
        /* a context on the team: PE numbers are the team's */
        {
            shmem_ctx_t c = SHMEM_CTX_DEFAULT;
            CHECK(shmem_team_create_ctx(even, 0, &c) == 0, "team ctx");
            shmem_ctx_long_p(c, &v[1], 1000 + me, (shmem_team_my_pe(even) + 1) % neven);
            shmem_ctx_quiet(c);
            shmem_team_sync(even);
            CHECK(v[1] == 1000 + 2 * ((me / 2 + neven - 1) % neven), "ctx put %ld", v[1]);
            shmem_ctx_destroy(c);
        }
        shmem_team_destroy(even);
    } else {
        CHECK(even == SHMEM_TEAM_INVALID, "odd PE outside the even team");
        CHECK(shmem_team_translate_pe(SHMEM_TEAM_WORLD, me, SHMEM_TEAM_WORLD) == me, "translate world");
    }
    shmem_barrier_all();
    rc = shmem_team_split_2d(SHMEM_TEAM_WORLD, 2, NULL, 0, &x, NULL, 0, &y);
    CHECK(rc == 0 && x && y, "split_2d");
    if (x && y) {
        CHECK(shmem_team_my_pe(x) == me % 2 && shmem_team_my_pe(y) == me / 2, "2d numbering");
        v[2] = me;
        shmem_long_sum_reduce(x, &r[2], &v[2], 1);
        CHECK(r[2] == (me / 2 * 2) * 2 + (me / 2 * 2 + 1 < npes ? 1 : -(me / 2 * 2)), "row sum %ld", r[2]);
        shmem_long_max_reduce(y, &r[3], &v[2], 1);
        {
            int last = me % 2;
            while (last + 2 < npes) last += 2;
            CHECK(r[3] == last, "column max %ld", r[3]);
        }
        shmem_team_destroy(x);
        shmem_team_destroy(y);
    }
    {
        shmem_ctx_t c = SHMEM_CTX_DEFAULT;
        shmem_team_t t = SHMEM_TEAM_INVALID;
        CHECK(shmem_ctx_create(SHMEM_CTX_PRIVATE, &c) == 0, "ctx_create");
        CHECK(shmem_ctx_get_team(c, &t) == 0 && t == SHMEM_TEAM_WORLD, "ctx team");
        shmem_ctx_long_atomic_add(c, &v[4], me + 1, 0);
        shmem_ctx_quiet(c);
        shmem_ctx_destroy(c);
        shmem_barrier_all();
        if (me == 0) CHECK(v[4] == (long)npes * (npes + 1) / 2, "ctx atomics %ld", v[4]);
    }
    CHECK(shmem_team_n_pes(SHMEM_TEAM_SHARED) >= 1, "shared team");
    shmem_barrier_all();
    shmem_free(v);
    shmem_free(r);
}

/* locks: an unprotected read-modify-write of a counter on PE 0, under the lock */
static void test_locks(void)
{
    long *cnt = (long *)shmem_calloc(1, sizeof(long));
    int k;
    for (k = 0; k < 5; k++) {
        long v;
        if (k & 1) shmem_set_lock(&s_lock);
        else while (shmem_test_lock(&s_lock)) {}
        v = shmem_long_g(cnt, 0);
        shmem_long_p(cnt, v + me + 1, 0);
        shmem_clear_lock(&s_lock);
    }
    shmem_barrier_all();
    if (me == 0) CHECK(*cnt == 5L * npes * (npes + 1) / 2, "lock counter %ld", *cnt);
    shmem_barrier_all();
    shmem_free(cnt);
}

/* the deprecated active-set forms with pSync */
static void test_active_set(void)
{
    int i;
    for (i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++) s_psync[i] = SHMEM_SYNC_VALUE;
    for (i = 0; i < SHMEM_REDUCE_SYNC_SIZE; i++) s_psync2[i] = SHMEM_SYNC_VALUE;
    shmem_barrier_all();
    shmem_barrier(0, 0, npes, s_psync);
    for (i = 0; i < 8; i++) s_src[i] = VAL(me, 0, i);
    memset(s_dst, 0, sizeof(s_dst));
    shmem_broadcast64(s_dst, s_src, 8, 0, 0, 0, npes, s_psync);
    for (i = 0; i < 8; i++) CHECK(s_dst[i] == (me == 0 ? 0 : VAL(0, 0, i)), "broadcast64 [%d]", i);
    if (me % 2 == 0) { /* the even PEs: start 0, log stride 1 */
        long wrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
        shmem_long_sum_to_all(s_dst, s_src, 2, 0, 1, (npes + 1) / 2, wrk, s_psync2);
        long want = 0;
        for (i = 0; i < npes; i += 2) want += VAL(i, 0, 0);
        CHECK(s_dst[0] == want, "sum_to_all evens %ld %ld", s_dst[0], want);
    }
    shmem_fcollect64(s_dst, s_src, 2, 0, 0, npes, s_psync);
    for (i = 0; i < npes; i++) CHECK(s_dst[2 * i + 1] == VAL(i, 0, 1), "fcollect64 [%d]", i);
    shmem_barrier(0, 0, npes, s_psync);
    for (i = 0; i < SHMEM_BARRIER_SYNC_SIZE; i++) CHECK(s_psync[i] == SHMEM_SYNC_VALUE, "pSync restored [%d]", i);
    shmem_barrier_all();
}

/* Whether this process maps PE pe's symmetric heap: every PE on shm, the PEs of this node in the
 * pair, itself alone through a NIC. */
static int heap_mapped(int pe)
{
    return pe == me || RVX_TL == RVX_TL_SHM || (RVX_PAIR && t_same_node(pe, me, npes));
}

/* shmem_ptr: a store through it reaches the owner; NULL where loads cannot reach (a NIC's peer,
 * another PE's static variable, memory that is not symmetric); SHMEM_TEAM_SHARED is exactly the
 * PEs it reaches, and synchronizes */
static void test_ptr(void)
{
    long *x = (long *)shmem_calloc((size_t)npes, sizeof(long)), local = 0;
    int pe, reach = 0, my = -1;
    for (pe = 0; pe < npes; pe++) {
        long *p = (long *)shmem_ptr(&x[me], pe);
        CHECK(!p == !heap_mapped(pe), "shmem_ptr to PE %d: %p", pe, (void *)p);
        if (p) {
            if (pe == me) my = reach;
            *p = 1000L * me + pe;
            reach++;
        }
        CHECK(!shmem_ptr(&local, pe), "shmem_ptr of a stack variable");
        CHECK(!shmem_ptr(&s_flag, pe) == (pe != me), "shmem_ptr of a static variable on PE %d", pe);
    }
    CHECK(!shmem_ptr(x, -1) && !shmem_ptr(x, npes), "shmem_ptr to no PE");
    shmem_barrier_all();
    for (pe = 0; pe < npes; pe++)
        CHECK(x[pe] == (heap_mapped(pe) ? 1000L * pe + me : 0), "store of PE %d through shmem_ptr: %ld", pe, x[pe]);
    CHECK(shmem_team_n_pes(SHMEM_TEAM_SHARED) == reach && shmem_team_my_pe(SHMEM_TEAM_SHARED) == my,
          "SHMEM_TEAM_SHARED: %d PEs, this one %d (reached %d, %d)", shmem_team_n_pes(SHMEM_TEAM_SHARED),
          shmem_team_my_pe(SHMEM_TEAM_SHARED), reach, my);
    for (pe = 0; pe < shmem_team_n_pes(SHMEM_TEAM_SHARED); pe++)
        CHECK(shmem_team_ptr(SHMEM_TEAM_SHARED, x, pe) != NULL, "shmem_team_ptr to shared PE %d", pe);
    shmem_team_sync(SHMEM_TEAM_SHARED);
    shmem_barrier_all();
    shmem_free(x);
}

static void test_misc(void)
{
    int major, minor, i;
    char name[SHMEM_MAX_NAME_LEN];
    long *a = (long *)shmem_malloc(100), *b = (long *)shmem_align(4096, 64), *offs;
    long *c = (long *)shmem_malloc_with_hints(64, SHMEM_MALLOC_ATOMICS_REMOTE);
    shmem_info_get_version(&major, &minor);
    shmem_info_get_name(name);
    CHECK(major == 1 && minor == 5 && name[0], "info");
    CHECK(shmem_ptr(a, me) == a && shmem_addr_accessible(a, (me + 1) % npes), "ptr, accessible");
    CHECK(shmem_addr_accessible(&s_flag, 0) && !shmem_addr_accessible(&i, 0), "static accessible");
    CHECK(shmem_pe_accessible(npes - 1) && !shmem_pe_accessible(npes), "pe_accessible");
    CHECK(((uintptr_t)b & 4095) == 0, "align");
    /* the same offsets everywhere */
    offs = (long *)shmem_malloc(3 * npes * sizeof(long));
    {
        long mine[3] = {(long)((char *)a - (char *)offs), (long)((char *)b - (char *)offs),
                        (long)((char *)c - (char *)offs)};
        long *m = (long *)shmem_malloc(3 * sizeof(long));
        memcpy(m, mine, sizeof(mine));
        shmem_long_fcollect(SHMEM_TEAM_WORLD, offs, m, 3);
        for (i = 0; i < 3 * npes; i++) CHECK(offs[i] == mine[i % 3], "offsets differ");
        shmem_free(m);
    }
    for (i = 0; i < 12; i++) a[i] = VAL(me, me, i);
    a = (long *)shmem_realloc(a, 4000);
    for (i = 0; i < 12; i++) CHECK(a[i] == VAL(me, me, i), "realloc kept [%d]", i);
    shmem_long_p(&a[400], me, (me + 1) % npes);
    shmem_barrier_all();
    CHECK(a[400] == (me + npes - 1) % npes, "realloc'd symmetric");
    /* generic interfaces */
    {
        long gv = 3;
        unsigned int *u = (unsigned int *)shmem_calloc(2, sizeof(unsigned int));
        shmem_p(&a[401], gv + me, (me + 1) % npes);
        shmem_put(&a[402], &gv, 1, (me + 1) % npes);
        shmem_atomic_add(&u[0], 2u, 0);
        shmem_atomic_fetch_or(&u[1], 1u << me, 0);
        shmem_barrier_all();
        CHECK(shmem_g(&a[401], me) == 3 + (me + npes - 1) % npes && a[402] == 3, "generic rma");
        if (me == 0) CHECK(u[0] == 2u * npes && u[1] == (1u << npes) - 1, "generic amo");
        shmem_wait_until(&a[402], SHMEM_CMP_EQ, 3);
        {
            long f = -1, f2 = -1;
            shmem_atomic_fetch_nbi(&f, &a[402], me);
            shmem_atomic_fetch_inc_nbi(&f2, &a[402], me);
            shmem_quiet();
            CHECK(f == 3 && f2 == 3 && a[402] == 4, "generic nbi amo");
        }
        shmem_sync(0, 0, npes, s_psync);
        shmem_free(u);
    }
    shmem_free(offs);
    shmem_free(a);
    shmem_free(b);
    shmem_free(c);
}

int main(void)
{
    int provided = -1;
    long *fl;
    shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
    me = shmem_my_pe();
    npes = shmem_n_pes();
    if (npes < 2) {
        printf("SKIP: needs 2 or more PEs (run under rvxrun -n 4)\n");
        return 77;
    }
    if (provided != SHMEM_THREAD_SERIALIZED) fails++;
    test_rma();
    test_amo();
    test_order();
    test_wait();
    test_coll();
    test_teams();
    test_locks();
    test_active_set();
    test_misc();
    test_ptr();
    /* every PE's verdict */
    fl = (long *)shmem_calloc(2, sizeof(long));
    fl[0] = fails;
    shmem_long_sum_reduce(SHMEM_TEAM_WORLD, &fl[1], &fl[0], 1);
    if (me == 0) printf("t_shmem_api: %d PEs, %ld failure(s)\n", npes, fl[1]);
    shmem_finalize();
    return fails ? 1 : 0;
}
