/* tests/placement.h: where rvxrun puts a rank, for tests that expect a path by node. Shared by
 * testlib.h and the OpenSHMEM tests (which are programs of the specification and do not include
 * testlib.h). */
#ifndef RVX_TESTS_PLACEMENT_H
#define RVX_TESTS_PLACEMENT_H

#include <stdlib.h>

/* Whether ranks a and b of n share a node: rvxrun places rank r on node r * K / N of K
 * (RVX_NODES; every rank on node 0 without it). */
static inline int t_same_node(int a, int b, int n)
{
    const char *k = getenv("RVX_NODES");
    long nodes = k && atol(k) > 0 ? atol(k) : 1;
    return (long)a * nodes / n == (long)b * nodes / n;
}

#endif /* RVX_TESTS_PLACEMENT_H */
