/* rvx/fabric/shm_local.h: cost parameters of shared memory between processes on one machine.
 *
 * A fabric header gives the numbers the protocols derive their thresholds from at compile time
 * (seed 000/001's cost model). Units: nanoseconds, MB/s (10^6 bytes per second), bytes.
 *
 * Fitted to tag latency measured on a 2-core x86-64 VM (build/bench/tag_lat built once with the
 * switch pinned above 4 MiB, all eager, and once at 1 byte, all rendezvous GET; bench/RESULTS.md,
 * "Fitting shm_local.h"):
 *   eager       94 ns at 8 B; 0.0516 ns per byte from 64 KiB to 2 MiB (19.4 GB/s: the sender
 *               copies into the ring while the receiver copies out, on the other core)
 *   rendezvous  2240 ns at 8 B (RTS, the receiver's process_vm_readv, ATS); 0.0868 ns per byte
 *               (11.5 GB/s: the kernel pins the sender's pages for every transfer)
 * Copies run at memory speed either way, so the bandwidths are the eager figure; the kernel's
 * work for a rendezvous is the "registration" (it is what a single copy between processes pays
 * per transfer): 1790 ns fixed, so that the model's difference at small sizes is the measured
 * 2150 ns, and 18 ns per KB, half the measured difference in slope (the model charges it to both
 * sides of an RMA rendezvous). The model charges registration to eager as well, which shm's eager
 * does not pay, so its absolute eager curve is high; the difference between the curves is what
 * decides. Fitted this way the curves do not meet (rendezvous is slower per byte and per message,
 * as measured up to 4 MiB), and the switch is the fallback below. The machine's speed drifts: an
 * hour later the same runs gave eager 298 ns and 8.6 GB/s, rendezvous 3014 ns and 11.4 GB/s, and
 * there rendezvous overtook eager at 64 KiB (up to 2 MiB); in both states eager won below 64 KiB. */
#ifndef RVX_FABRIC_SHM_LOCAL_H
#define RVX_FABRIC_SHM_LOCAL_H
#define RVX_FAB_NAME              "shm-local"
#define RVX_FAB_LATENCY_NS        90     /* one-way latency of an 8-byte tag message */
#define RVX_FAB_OVERHEAD_NS       20     /* sender CPU time per message */
#define RVX_FAB_BW_MBS            19400  /* copy bandwidth between processes (memory speed) */
#define RVX_FAB_BCOPY_BW_MBS      19400  /* bandwidth of eager's copies through the ring */
#define RVX_FAB_REG_OVERHEAD_NS   1790   /* per-transfer kernel work of a single copy (CMA) */
#define RVX_FAB_REG_GROWTH_NS_PER_KB 18  /* and per KB (1000 bytes): pinning pages */
#define RVX_FAB_LANES             1
#define RVX_FAB_RNDV_PERF_DIFF_PCT 1  /* seed 001's d = 1 - this/100: rendezvous may be this
                                        * much slower than eager and still be chosen (UCX: 1) */
/* Where the curves do not meet: rendezvous from 64 KiB anyway. Not for speed (eager is faster at
 * every size measured here) but for memory and fairness: an unexpected eager message is staged
 * whole at the receiver, and a long one holds the ring that every smaller message to that peer
 * waits behind. RVX_RNDV_THRESH pins the switch; RVX_RNDV_THRESH_FALLBACK replaces this. */
#define RVX_FAB_RNDV_THRESH_FALLBACK 65536
#define RVX_FAB_PUT_BCOPY_MAX     8192   /* the copy chunk of rvx_put and rvx_get (shm copies directly and does not use it) */
#define RVX_FAB_EAGER_ZCOPY_MIN   2048   /* eager zero-copy from here: shm copies anyway (no zero-copy between processes); set so the path runs */
#endif
