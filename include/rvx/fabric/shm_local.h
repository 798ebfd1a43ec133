/* rvx/fabric/shm_local.h: cost parameters of shared memory between processes on one machine.
 *
 * A fabric header gives the numbers the protocols derive their thresholds from at compile time
 * (seed 000/001's cost model). Units: nanoseconds, MB/s (10^6 bytes per second), bytes.
 * Measured on a 2-core x86-64 VM; `bench/` re-measures them (see bench/RESULTS.md). */
#ifndef RVX_FABRIC_SHM_LOCAL_H
#define RVX_FABRIC_SHM_LOCAL_H
#define RVX_FAB_NAME              "shm-local"
#define RVX_FAB_LATENCY_NS        100    /* one-way latency of a cache-line message */
#define RVX_FAB_OVERHEAD_NS       20     /* sender CPU time per message */
#define RVX_FAB_BW_MBS            8000   /* single-copy bandwidth into a peer's mapping */
#define RVX_FAB_BCOPY_BW_MBS      5000   /* bandwidth of a copy through a bounce buffer */
#define RVX_FAB_REG_OVERHEAD_NS   0      /* no registration on shared memory */
#define RVX_FAB_REG_GROWTH_NS_PER_KB 0 /* registration time per KB (1000 bytes) */
#define RVX_FAB_LANES             1
#define RVX_FAB_RNDV_PERF_DIFF_PCT 1  /* seed 001's d = 1 - this/100: rendezvous may be this
                                        * much slower than eager and still be chosen (UCX: 1) */
#define RVX_FAB_PUT_BCOPY_MAX     8192   /* above this, puts and gets are zero-copy where possible */
#define RVX_FAB_EAGER_ZCOPY_MIN   2048   /* eager zero-copy from here: shm copies anyway (no zero-copy between processes); set so the path runs */
#endif
