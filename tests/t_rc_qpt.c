/* t_rc_qpt: rc_mlx5's QPN -> rank table is sized by the job, so no rank limit comes from it. For
 * jobs of 1 to 5000 ranks: a QP per rank and the hello QP (random distinct 24-bit QPNs) are all
 * found with their ranks; unknown QPNs are not; QPs retired (GONE) are no longer found while the others
 * still are, and their slots take new QPs. No device needed. */
#include <rvx/rvx.h>
#include "testlib.h"

static uint32_t rnd(uint64_t *s)
{
    *s ^= *s << 13; *s ^= *s >> 7; *s ^= *s << 17;
    return (uint32_t)(*s >> 11);
}

/* What the table holds for the i-th QP: its rank, the last one is the hello QP. */
static int32_t want_of(int i, int nranks)
{
    return i < nranks ? i : RVX__RC_QPT_HELLO;
}

static void job(int nranks, uint64_t seed)
{
    rvx__tl_iface_t ifc;
    int n = nranks + 1, i, bad = 0, wrong = 0;
    uint32_t *qpn = (uint32_t *)malloc((size_t)n * 2 * sizeof(*qpn));
    uint8_t *used = (uint8_t *)calloc(1u << 24, 1);
    memset(&ifc, 0, sizeof(ifc));
    T_OK(rvx__rc_qpt_init(&ifc, nranks));
    T_CHECK(ifc.qpt_mask + 1 >= 2u * (uint32_t)n, "%d ranks: a table of %u slots", nranks, ifc.qpt_mask + 1);
    for (i = 0; i < 2 * n; i++) { /* distinct QPNs: n in the table, n never added */
        uint32_t q;
        do q = rnd(&seed) & 0xffffff; while (used[q]);
        used[q] = 1;
        qpn[i] = q;
    }
    for (i = 0; i < n; i++)
        if (rvx__rc_qpt_add(&ifc, qpn[i], want_of(i, nranks)) != RVX_OK) bad++;
    T_CHECK(bad == 0, "%d ranks: %d QPs did not fit", nranks, bad);
    for (i = 0; i < n; i++)
        if (rvx__rc_qpt_find(&ifc, qpn[i], NULL) != (want_of(i, nranks))) wrong++;
    for (i = n; i < 2 * n; i++)
        if (rvx__rc_qpt_find(&ifc, qpn[i], NULL) != -1) wrong++;
    T_CHECK(wrong == 0, "%d ranks: %d lookups wrong", nranks, wrong);
    /* every third QP retires; as many new ones (the unknown QPNs) come in */
    for (i = 0; i < n; i += 3) rvx__rc_qpt_set(&ifc, qpn[i], RVX__RC_QPT_GONE);
    for (i = 0; i < n; i += 3) T_OK(rvx__rc_qpt_add(&ifc, qpn[n + i], i % nranks));
    wrong = 0;
    for (i = 0; i < n; i++) {
        int32_t want = i % 3 == 0 ? -1 : want_of(i, nranks);
        if (rvx__rc_qpt_find(&ifc, qpn[i], NULL) != want) wrong++;
        if (i % 3 == 0 && rvx__rc_qpt_find(&ifc, qpn[n + i], NULL) != i % nranks) wrong++;
    }
    T_CHECK(wrong == 0, "%d ranks: %d lookups wrong after QPs retired", nranks, wrong);
    free(ifc.qpt_qpn);
    free(ifc.qpt_rank);
    free(qpn);
    free(used);
}

int main(void)
{
    static const int sizes[] = {1, 2, 3, 128, 129, 1000, 5000};
    unsigned k;
    for (k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) job(sizes[k], 0x9e3779b97f4a7c15ull + k);
    if (!t_failures) printf("QPN tables from 1 to 5000 ranks: every lookup right\n");
    return t_exit();
}
