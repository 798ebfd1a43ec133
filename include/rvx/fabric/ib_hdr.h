/* rvx/fabric/ib_hdr.h: cost parameters of a ConnectX-6 on HDR InfiniBand (200 Gb/s), one port.
 * Units: nanoseconds, MB/s, bytes. */
#ifndef RVX_FABRIC_IB_HDR_H
#define RVX_FABRIC_IB_HDR_H
#define RVX_FAB_NAME              "ib-hdr"
#define RVX_FAB_LATENCY_NS        700
#define RVX_FAB_OVERHEAD_NS       40
#define RVX_FAB_BW_MBS            24000
#define RVX_FAB_BCOPY_BW_MBS      8000
#define RVX_FAB_REG_OVERHEAD_NS   16000
#define RVX_FAB_REG_GROWTH_NS_PER_KB 60
#define RVX_FAB_LANES             1
#define RVX_FAB_RNDV_PERF_DIFF_PCT 1  /* d = 1 - 1/100 (see fabric/shm_local.h) */
#define RVX_FAB_PUT_BCOPY_MAX     16384
#define RVX_FAB_EAGER_ZCOPY_MIN   2048   /* eager zero-copy from here: as EDR */
#endif
