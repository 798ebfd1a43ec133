/* rvx/fabric/ib_edr.h: cost parameters of a ConnectX-5/6 on EDR InfiniBand (100 Gb/s), one port.
 * Units: nanoseconds, MB/s, bytes. Figures of the order published for EDR and used by seed 001. */
#ifndef RVX_FABRIC_IB_EDR_H
#define RVX_FABRIC_IB_EDR_H
#define RVX_FAB_NAME              "ib-edr"
#define RVX_FAB_LATENCY_NS        800
#define RVX_FAB_OVERHEAD_NS       40
#define RVX_FAB_BW_MBS            12000
#define RVX_FAB_BCOPY_BW_MBS      6000
#define RVX_FAB_REG_OVERHEAD_NS   16000
#define RVX_FAB_REG_GROWTH_NS_PER_KB 60
#define RVX_FAB_LANES             1
#define RVX_FAB_RNDV_PERF_DIFF_PCT 1  /* d = 1 - 1/100 (see fabric/shm_local.h) */
#define RVX_FAB_PUT_BCOPY_MAX     8192
#define RVX_FAB_EAGER_ZCOPY_MIN   2048   /* eager zero-copy from here: a copy of 2 KiB costs about what a cache lookup and a signaled completion do */
#endif
