/* rvx/config.h: every build macro, its default, and an #error for what does not fit together.
 *
 * Define any of these before including <rvx/rvx.h> (or with -D); one build is one configuration.
 *
 *   RVX_TL              transport: RVX_TL_SHM (default), RVX_TL_RC_MLX5 or RVX_TL_DC_MLX5 (link with
 *                       -libverbs -lmlx5; RVX_MLX5_* options below)
 *   RVX_TL_INTRA        RVX_TL_SHM beside an mlx5 RVX_TL: a pair build (RVX_PAIR is then 1), shared
 *                       memory to peers on the node, RVX_TL to the others (tl/pair.h); the limits
 *                       of both transports hold (the smaller of each); RVX_LANES must be 1
 *   RVX_RNDV            rendezvous protocol: RVX_RNDV_GET (default), RVX_RNDV_PUT, RVX_RNDV_AM,
 *                       RVX_RNDV_PIPELINE (used by tag matching)
 *   RVX_FABRIC          header with the fabric's cost parameters, e.g. <rvx/fabric/ib_hdr.h>;
 *                       default <rvx/fabric/shm_local.h> for shm, <rvx/fabric/ib_edr.h> for mlx5
 *   RVX_AM_HANDLERS(X)  X-macro list of active-message handlers: X(NAME, function) ...
 *   RVX_AM              1: active messages compiled in (default: 1 iff RVX_AM_HANDLERS is defined)
 *   RVX_TAG             1: tag matching compiled in (default 0); its limits RVX_TAG_SHORT_MAX
 *                       and RVX_PIPE_* are described in the RVX_TAG section below
 *   RVX_AM_MAX_ARGS     64-bit arguments per active message (default 8, at most 15)
 *   RVX_AM_MAX_MEDIUM   largest medium payload in bytes (default 3992, at least 512)
 *   RVX_PUT_SHORT_MAX   puts up to this size take the short path (default: the tl's inline size)
 *   RVX_PUT_BCOPY_MAX   the chunk in which rvx_put copies what is longer than RVX_PUT_SHORT_MAX
 *                       (rc_mlx5: one WRITE per chunk from the bounce ring); rvx_put never goes
 *                       zero-copy by itself, that is rvx_put_zcopy (default: the fabric
 *                       header's RVX_FAB_PUT_BCOPY_MAX)
 *   RVX_RNDV_THRESH     pin the eager/rendezvous switch in bytes (default: computed from the fabric
 *                       header by proto/thresh.h, seed 001's model)
 *   RVX_RNDV_THRESH_FALLBACK  the switch when the model's curves do not meet (default: the fabric
 *                       header's RVX_FAB_RNDV_THRESH_FALLBACK, else SIZE_MAX: never rendezvous, as
 *                       UCX's default of infinity)
 *   RVX_LANES           rendezvous lanes (default: the fabric header's RVX_FAB_LANES, 1 to 8). Lane 0
 *                       carries everything; lanes 1.. (each one more device: RVX_DEV=mlx5_0,mlx5_1)
 *                       carry only rendezvous data, striped by lane bandwidth. rc_mlx5 only.
 *   RVX_LANE_STRIPE_MIN messages smaller than this (bytes) move on lane 0 alone (default 65536)
 *   RVX_RCACHE_MAX_ENTRIES, RVX_RCACHE_MAX_BYTES  bounds of the registration cache (proto/rcache.h;
 *                       default 1024 regions, 1 GiB)
 *   RVX_SHM_RING_SLOTS  64-byte slots per shared-memory ring (default 256, power of two, 64..1024)
 *   RVX_DEBUG           1: argument checks on the fast path too (default 0: only on set-up calls)
 *   RVX_WAIT_SPIN_NS    how long a blocking call spins before it starts to sleep (default 20000)
 *   RVX_BOOT            bootstrap: RVX_BOOT_LOCAL (default: environment, rvxrun) or RVX_BOOT_PMIX
 *                       (mpirun, srun --mpi=pmix; link with `pkg-config --libs pmix`)
 *
 * Run-time settings are only what cannot be known at build time (environment, read once at
 * rvx_init): RVX_RANK, RVX_SIZE, RVX_BOOT_DIR (set by rvxrun), RVX_BOOT_TIMEOUT (seconds),
 * RVX_DEV (adapter and port for mlx5 transports). */
#ifndef RVX_CONFIG_H
#define RVX_CONFIG_H

#define RVX_VERSION_STRING "0.1"

/* ---- transport ------------------------------------------------------------------------------ */
#define RVX_TL_SHM      1
#define RVX_TL_RC_MLX5  2
#define RVX_TL_DC_MLX5  3

#ifndef RVX_TL
#define RVX_TL RVX_TL_SHM
#endif

/* A pair build (RVX_PAIR): RVX_TL_INTRA=RVX_TL_SHM beside an mlx5 RVX_TL. Peers on this rank's
 * node are reached through shared memory, the others through RVX_TL; each endpoint picks its path
 * once, at creation (tl/pair.h). */
#ifdef RVX_TL_INTRA
#if RVX_TL_INTRA != RVX_TL_SHM
#error "RVX_TL_INTRA must be RVX_TL_SHM (the transport between ranks of one node)"
#endif
#if RVX_TL != RVX_TL_RC_MLX5 && RVX_TL != RVX_TL_DC_MLX5
#error "RVX_TL_INTRA=RVX_TL_SHM needs RVX_TL=RVX_TL_RC_MLX5 or RVX_TL_DC_MLX5 (the transport between nodes)"
#endif
#define RVX_PAIR 1
#else
#define RVX_PAIR 0
#endif
/* Which transports the build compiles in: their limits below all apply. */
#define RVX__HAS_SHM  (RVX_TL == RVX_TL_SHM || RVX_PAIR)
#define RVX__HAS_MLX5 (RVX_TL == RVX_TL_RC_MLX5 || RVX_TL == RVX_TL_DC_MLX5)

#if RVX_TL == RVX_TL_SHM
#define RVX__TL_NET_NAME "shm"
#elif RVX_TL == RVX_TL_RC_MLX5
#define RVX__TL_NET_NAME "rc_mlx5"
#elif RVX_TL == RVX_TL_DC_MLX5
#define RVX__TL_NET_NAME "dc_mlx5"
#else
#error "RVX_TL has an unknown value: define it as RVX_TL_SHM, RVX_TL_RC_MLX5 or RVX_TL_DC_MLX5"
#endif
#if RVX_PAIR
#define RVX_TL_NAME "shm+" RVX__TL_NET_NAME
#else
#define RVX_TL_NAME RVX__TL_NET_NAME
#endif

/* ---- bootstrap ------------------------------------------------------------------------------ */
/* How ranks find each other: RVX_BOOT_LOCAL reads RVX_RANK/RVX_SIZE/RVX_BOOT_DIR from the
 * environment (rvxrun, one machine); RVX_BOOT_PMIX asks the launcher's PMIx server (mpirun, srun
 * --mpi=pmix, any PMIx launcher) and needs `pkg-config --cflags --libs pmix` (libpmix-dev). */
#define RVX_BOOT_LOCAL 1
#define RVX_BOOT_PMIX  2
#ifndef RVX_BOOT
#define RVX_BOOT RVX_BOOT_LOCAL
#endif
#if RVX_BOOT == RVX_BOOT_LOCAL
#define RVX_BOOT_NAME "local"
#elif RVX_BOOT == RVX_BOOT_PMIX
#define RVX_BOOT_NAME "pmix"
#else
#error "RVX_BOOT has an unknown value: define it as RVX_BOOT_LOCAL (rvxrun, environment) or RVX_BOOT_PMIX (mpirun/srun; add `pkg-config --cflags --libs pmix`)"
#endif
/* ---- end of bootstrap ----------------------------------------------------------------------- */

/* ---- fabric --------------------------------------------------------------------------------- */
#ifndef RVX_FABRIC
#if RVX_TL == RVX_TL_SHM
#define RVX_FABRIC <rvx/fabric/shm_local.h>
#else
#define RVX_FABRIC <rvx/fabric/ib_edr.h>
#endif
#endif
#include RVX_FABRIC
#if !defined(RVX_FAB_NAME) || !defined(RVX_FAB_LATENCY_NS) || !defined(RVX_FAB_BW_MBS) || \
    !defined(RVX_FAB_PUT_BCOPY_MAX) || !defined(RVX_FAB_LANES)
#error "RVX_FABRIC: the fabric header must define RVX_FAB_NAME, RVX_FAB_LATENCY_NS, RVX_FAB_BW_MBS, RVX_FAB_PUT_BCOPY_MAX and RVX_FAB_LANES (see include/rvx/fabric/shm_local.h)"
#endif
#if RVX_FAB_LANES < 1
#error "RVX_FAB_LANES must be at least 1"
#endif

/* ---- lanes ---------------------------------------------------------------------------------- */
#define RVX_LANES_MAX 8
#ifndef RVX_LANES
#define RVX_LANES RVX_FAB_LANES
#endif
#if RVX_LANES < 1 || RVX_LANES > RVX_LANES_MAX
#error "RVX_LANES must be between 1 and 8 (it defaults to the fabric header's RVX_FAB_LANES)"
#endif
#if RVX_LANES > 1 && RVX_PAIR
#error "RVX_LANES > 1 is not supported yet in a pair build (RVX_TL_INTRA): define RVX_LANES=1"
#endif
#if RVX_LANES > 1 && RVX_TL != RVX_TL_RC_MLX5 && RVX_TL != RVX_TL_DC_MLX5
#error "RVX_LANES > 1 needs RVX_TL=RVX_TL_RC_MLX5 or RVX_TL_DC_MLX5 (a lane is one more device); shared memory has one lane: define RVX_LANES=1"
#endif
#ifndef RVX_LANE_STRIPE_MIN
#define RVX_LANE_STRIPE_MIN 65536
#endif
#if RVX_LANE_STRIPE_MIN < 4096
#error "RVX_LANE_STRIPE_MIN must be at least 4096 bytes"
#endif

/* ---- rendezvous ----------------------------------------------------------------------------- */
#define RVX_RNDV_GET      1
#define RVX_RNDV_PUT      2
#define RVX_RNDV_AM       3
#define RVX_RNDV_PIPELINE 4
#ifndef RVX_RNDV
#define RVX_RNDV RVX_RNDV_GET
#endif
#if RVX_RNDV == RVX_RNDV_GET
#define RVX_RNDV_NAME "get"
#elif RVX_RNDV == RVX_RNDV_PUT
#define RVX_RNDV_NAME "put"
#elif RVX_RNDV == RVX_RNDV_AM
#define RVX_RNDV_NAME "am"
#elif RVX_RNDV == RVX_RNDV_PIPELINE
#define RVX_RNDV_NAME "pipeline"
#else
#error "RVX_RNDV has an unknown value: define it as RVX_RNDV_GET, RVX_RNDV_PUT, RVX_RNDV_AM or RVX_RNDV_PIPELINE"
#endif
#if defined(RVX_RNDV_THRESH) && (RVX_RNDV_THRESH < 1)
#error "RVX_RNDV_THRESH must be a positive number of bytes"
#endif
#ifndef RVX_RNDV_THRESH_FALLBACK
#ifdef RVX_FAB_RNDV_THRESH_FALLBACK
#define RVX_RNDV_THRESH_FALLBACK RVX_FAB_RNDV_THRESH_FALLBACK
#else
#define RVX_RNDV_THRESH_FALLBACK SIZE_MAX /* checked in proto/thresh.h, after <stdint.h> */
#endif
#endif

/* ---- registration cache (proto/rcache.h) ------------------------------------------------------ */
#ifndef RVX_RCACHE_MAX_ENTRIES
#define RVX_RCACHE_MAX_ENTRIES 1024
#endif
#ifndef RVX_RCACHE_MAX_BYTES
#define RVX_RCACHE_MAX_BYTES (1ull << 30)
#endif
#if RVX_RCACHE_MAX_ENTRIES < 1 || RVX_RCACHE_MAX_BYTES < 1
#error "RVX_RCACHE_MAX_ENTRIES and RVX_RCACHE_MAX_BYTES must be at least 1"
#endif

/* ---- features ------------------------------------------------------------------------------- */
#ifndef RVX_AM
#ifdef RVX_AM_HANDLERS
#define RVX_AM 1
#else
#define RVX_AM 0
#endif
#endif
#if RVX_AM && !defined(RVX_AM_HANDLERS)
#error "RVX_AM=1 needs a handler table: #define RVX_AM_HANDLERS(X) X(NAME, function) ... before including rvx.h"
#endif
#if !RVX_AM && defined(RVX_AM_HANDLERS)
#error "RVX_AM_HANDLERS is defined but RVX_AM=0: remove the table or drop RVX_AM=0"
#endif

#ifndef RVX_TAG
#define RVX_TAG 0
#endif
#if RVX_TAG != 0 && RVX_TAG != 1
#error "RVX_TAG must be 0 or 1"
#endif

/* A build that can receive polls receive queues in progress; an RMA-only build never does. */
#define RVX_CAN_RECEIVE (RVX_AM || RVX_TAG)

#ifndef RVX_AM_MAX_ARGS
#define RVX_AM_MAX_ARGS 8
#endif
#if RVX_AM_MAX_ARGS < 0 || RVX_AM_MAX_ARGS > 15
#error "RVX_AM_MAX_ARGS must be between 0 and 15 (the header has a 4-bit argument count)"
#endif
#ifndef RVX_AM_MAX_MEDIUM
#define RVX_AM_MAX_MEDIUM 3992
#endif
#if RVX_AM_MAX_MEDIUM < 512
#error "RVX_AM_MAX_MEDIUM must be at least 512 bytes (as GASNet requires of its medium size)"
#endif

/* Tag matching (proto/tag.h). A tag frame is a message-channel frame whose body is at most
 * RVX_AM_MAX_MEDIUM bytes, headers included; longer eager messages are sent as several frames.
 *   RVX_TAG_SHORT_MAX     eager messages up to this size are copied inline, without a memcpy
 *                         call (default 48: tag and data fill one 64-byte slot)
 *   RVX_PIPE_EAGER        PIPELINE phase 1: bytes sent with the match information (default: as
 *                         many as fit in one frame)
 *   RVX_PIPE_FRAG         PIPELINE phase 2: size of one pre-registered bounce buffer (16 KiB)
 *   RVX_PIPE_BOUNCE       PIPELINE phase 2: bytes copied through bounce buffers while phase 3
 *                         registers (64 KiB)
 *   RVX_PIPE_BOUNCE_BUFS  bounce buffers per worker (8)
 *   RVX_PIPE_CHUNK        PIPELINE phase 3: bytes registered and written at a time (256 KiB)
 *   RVX_EAGER_ZCOPY_MIN   eager messages of one frame from this size on leave from the user's
 *                         buffer (registered through the cache), no copy, where the transport can
 *                         (default: the fabric header's RVX_FAB_EAGER_ZCOPY_MIN; without it, never) */
#ifndef RVX_TAG_SHORT_MAX
#define RVX_TAG_SHORT_MAX 48
#endif
#ifndef RVX_PIPE_EAGER
#define RVX_PIPE_EAGER (RVX_AM_MAX_MEDIUM - 24)
#endif
#ifndef RVX_PIPE_FRAG
#define RVX_PIPE_FRAG 16384
#endif
#ifndef RVX_PIPE_BOUNCE
#define RVX_PIPE_BOUNCE 65536
#endif
#ifndef RVX_PIPE_BOUNCE_BUFS
#define RVX_PIPE_BOUNCE_BUFS 8
#endif
#ifndef RVX_PIPE_CHUNK
#define RVX_PIPE_CHUNK 262144
#endif
#ifndef RVX_EAGER_ZCOPY_MIN
#ifdef RVX_FAB_EAGER_ZCOPY_MIN
#define RVX_EAGER_ZCOPY_MIN RVX_FAB_EAGER_ZCOPY_MIN
#else
#define RVX_EAGER_ZCOPY_MIN (RVX_AM_MAX_MEDIUM + 1) /* no eager message qualifies */
#endif
#endif
#if RVX_EAGER_ZCOPY_MIN <= RVX_TAG_SHORT_MAX
#error "RVX_EAGER_ZCOPY_MIN must exceed RVX_TAG_SHORT_MAX (short messages are copied inline)"
#endif
#if RVX_TAG_SHORT_MAX < 0 || RVX_TAG_SHORT_MAX > 64
#error "RVX_TAG_SHORT_MAX must be between 0 and 64 bytes (larger messages take the memcpy path)"
#endif
#if RVX_PIPE_EAGER < 0 || RVX_PIPE_EAGER > RVX_AM_MAX_MEDIUM - 24
#error "RVX_PIPE_EAGER must be between 0 and RVX_AM_MAX_MEDIUM - 24 (one frame with the match header)"
#endif
#if RVX_PIPE_FRAG < 1024 || RVX_PIPE_CHUNK < 4096 || RVX_PIPE_BOUNCE < 0
#error "RVX_PIPE_FRAG must be at least 1024 bytes, RVX_PIPE_CHUNK at least 4096, RVX_PIPE_BOUNCE not negative"
#endif
#if RVX_PIPE_BOUNCE_BUFS < 1 || RVX_PIPE_BOUNCE_BUFS > 64
#error "RVX_PIPE_BOUNCE_BUFS must be between 1 and 64"
#endif

#ifndef RVX_DEBUG
#define RVX_DEBUG 0
#endif

/* ---- waiting --------------------------------------------------------------------------------- */
/* Blocking calls (rvx_wait, flushes, blocking gets and atomics, the bootstrap's collectives)
 * spin this long before they sleep (sys/clock.h). */
#ifndef RVX_WAIT_SPIN_NS
#define RVX_WAIT_SPIN_NS 20000
#endif
#if RVX_WAIT_SPIN_NS < 0 || RVX_WAIT_SPIN_NS > 1000000000
#error "RVX_WAIT_SPIN_NS must be between 0 and 1000000000 (one second)"
#endif

/* ---- transport-specific limits -------------------------------------------------------------- */
#if RVX__HAS_SHM
#ifndef RVX_SHM_RING_SLOTS
#define RVX_SHM_RING_SLOTS 256
#endif
#if RVX_SHM_RING_SLOTS < 64 || RVX_SHM_RING_SLOTS > 1024 || (RVX_SHM_RING_SLOTS & (RVX_SHM_RING_SLOTS - 1))
#error "RVX_SHM_RING_SLOTS must be a power of two between 64 and 1024"
#endif
/* The largest frame (header, arguments, long-AM address, medium payload) must fit in half a ring,
 * so that a frame that would straddle the ring's end can always be placed after a skip. */
#if 8 + 8 * RVX_AM_MAX_ARGS + 16 + RVX_AM_MAX_MEDIUM > RVX_SHM_RING_SLOTS * 32
#error "RVX_AM_MAX_MEDIUM does not fit the shared-memory ring: raise RVX_SHM_RING_SLOTS or lower RVX_AM_MAX_MEDIUM"
#endif
#define RVX__SHM_SHORT_MAX 64
#if !RVX__HAS_MLX5
#define RVX__TL_SHORT_MAX RVX__SHM_SHORT_MAX
#endif
#endif

#if RVX_TL == RVX_TL_DC_MLX5
/* dc_mlx5 (see tl/dc_mlx5.h) takes the RVX_MLX5_* options below (TX_DEPTH is per DCI), and:
 *   RVX_DC_NUM_DCI      initiators per worker (default 8): endpoints with work outstanding at once
 *   RVX_DC_BOUNCE_BYTES registered copy ring per DCI (default 256 KiB)
 *   RVX_DC_RX_DEPTH     receive buffers of the worker's shared receive queue, RVX_MLX5_FRAME bytes
 *                       each (default 2048; AM/tag builds): the credits all peers share
 *   RVX_DC_AM_CREDITS   credits a sender takes from a peer's pool at a time (default 32) */
#ifndef RVX_DC_NUM_DCI
#define RVX_DC_NUM_DCI 8
#endif
#if RVX_DC_NUM_DCI < 1 || RVX_DC_NUM_DCI > 64
#error "RVX_DC_NUM_DCI must be between 1 and 64"
#endif
#ifndef RVX_DC_BOUNCE_BYTES
#define RVX_DC_BOUNCE_BYTES (256 * 1024)
#endif
#ifndef RVX_DC_RX_DEPTH
#define RVX_DC_RX_DEPTH 2048
#endif
#ifndef RVX_DC_AM_CREDITS
#define RVX_DC_AM_CREDITS 32
#endif
#if RVX_DC_AM_CREDITS < 2 || RVX_DC_RX_DEPTH < RVX_DC_AM_CREDITS || RVX_DC_RX_DEPTH > 16384
#error "RVX_DC_AM_CREDITS must be at least 2 and RVX_DC_RX_DEPTH between it and 16384"
#endif
#endif

#if RVX__HAS_MLX5
/* rc_mlx5 (see tl/rc_mlx5.h):
 *   RVX_MLX5_DOORBELL   RVX_MLX5_DB_BF (default): BlueFlame 64-byte copies of one-WQEBB WQEs;
 *                       RVX_MLX5_DB_8B: the 8-byte doorbell only
 *   RVX_MLX5_SIG_EVERY  a WQE this many WQEBBs after the last one that did so asks for a
 *                       completion (default 64: one 8-byte put in 64)
 *   RVX_MLX5_TX_DEPTH   send work requests per QP (default 256)
 *   RVX_MLX5_RX_DEPTH   message credits per peer (default 64; AM/tag builds), halved while the
 *                       job's share of the shared receive queue would pass RVX_MLX5_SRQ_DEPTH
 *   RVX_MLX5_SRQ_DEPTH  receive buffers per worker and lane the credits are cut to fit (1024;
 *                       never fewer than 4 credits per peer)
 *   RVX_MLX5_INLINE     bytes a put or a message carries inside the WQE (default 60: the
 *                       inline size libmlx5 gives a one-SGE RC QP)
 *   RVX_MLX5_FRAME      receive buffer size (default 4096, more if the AM limits need it)
 *   RVX_MLX5_BOUNCE_BYTES registered copy memory per worker and lane (default 2 MiB), registered
 *                       at the first copy and lent to peers in segments
 *   RVX_MLX5_BOUNCE_SEG   the segment a peer holds while copies to it are in flight (128 KiB)
 *   RVX_MLX5_TIMEOUT, RVX_MLX5_RETRY  the QP's ACK timeout exponent (default 18: 4.096 us * 2^18
 *                       = 1.07 s, the usual RC timeout of HPC libraries) and retry count (default
 *                       7): a dead peer is reported after about (RETRY+1) timeouts, 8.6 s. rvxsim
 *                       caps all retries together at RVXSIM_RETRY_TIMEOUT_MS (2 s). A short timeout
 *                       declares a live but descheduled peer dead on a loaded machine. */
#define RVX_MLX5_DB_BF 1
#define RVX_MLX5_DB_8B 2
#ifndef RVX_MLX5_DOORBELL
#define RVX_MLX5_DOORBELL RVX_MLX5_DB_BF
#endif
#if RVX_MLX5_DOORBELL != RVX_MLX5_DB_BF && RVX_MLX5_DOORBELL != RVX_MLX5_DB_8B
#error "RVX_MLX5_DOORBELL must be RVX_MLX5_DB_BF or RVX_MLX5_DB_8B"
#endif
#ifndef RVX_MLX5_SIG_EVERY
#define RVX_MLX5_SIG_EVERY 64
#endif
#ifndef RVX_MLX5_TX_DEPTH
#define RVX_MLX5_TX_DEPTH 256
#endif
#if RVX_MLX5_SIG_EVERY < 1 || RVX_MLX5_SIG_EVERY > RVX_MLX5_TX_DEPTH / 2
#error "RVX_MLX5_SIG_EVERY must be between 1 and RVX_MLX5_TX_DEPTH/2 (the queue must see a completion before it fills)"
#endif
#ifndef RVX_MLX5_RX_DEPTH
#define RVX_MLX5_RX_DEPTH 64
#endif
#if RVX_MLX5_RX_DEPTH < 8
#error "RVX_MLX5_RX_DEPTH must be at least 8"
#endif
#ifndef RVX_MLX5_SRQ_DEPTH
#define RVX_MLX5_SRQ_DEPTH 1024
#endif
#if RVX_MLX5_SRQ_DEPTH < 64 || RVX_MLX5_SRQ_DEPTH > 32767
#error "RVX_MLX5_SRQ_DEPTH must be between 64 and 32767"
#endif
#ifndef RVX_MLX5_INLINE
#define RVX_MLX5_INLINE 60
#endif
#if RVX_MLX5_INLINE < 12 || RVX_MLX5_INLINE > 188
#error "RVX_MLX5_INLINE must be between 12 and 188 bytes"
#endif
#ifndef RVX_MLX5_FRAME
#if 8 * RVX_AM_MAX_ARGS + 16 + RVX_AM_MAX_MEDIUM <= 4096
#define RVX_MLX5_FRAME 4096
#else
#define RVX_MLX5_FRAME 8192
#endif
#endif
#if 8 * RVX_AM_MAX_ARGS + 16 + RVX_AM_MAX_MEDIUM > RVX_MLX5_FRAME
#error "RVX_MLX5_FRAME is smaller than the largest active message: raise it or lower RVX_AM_MAX_MEDIUM"
#endif
#ifndef RVX_MLX5_BOUNCE_BYTES
#define RVX_MLX5_BOUNCE_BYTES (1 << 21)
#endif
#ifndef RVX_MLX5_TIMEOUT
#define RVX_MLX5_TIMEOUT 18
#endif
#ifndef RVX_MLX5_RETRY
#define RVX_MLX5_RETRY 7
#endif
#define RVX__TL_SHORT_MAX RVX_MLX5_INLINE
#endif

/* RVX__TL_SHORT_MAX is the mlx5 inline size where the build has mlx5 (its QPs are made with it);
 * a pair's put short path holds on both paths, so it takes the smaller of the two. */
#ifndef RVX_PUT_SHORT_MAX
#if RVX_PAIR && RVX__SHM_SHORT_MAX < RVX__TL_SHORT_MAX
#define RVX_PUT_SHORT_MAX RVX__SHM_SHORT_MAX
#else
#define RVX_PUT_SHORT_MAX RVX__TL_SHORT_MAX
#endif
#endif
#if RVX_PAIR && RVX_PUT_SHORT_MAX > RVX__SHM_SHORT_MAX
#error "RVX_PUT_SHORT_MAX exceeds the shared-memory short path of a pair build (64 bytes)"
#endif
#ifndef RVX_PUT_BCOPY_MAX
#define RVX_PUT_BCOPY_MAX RVX_FAB_PUT_BCOPY_MAX
#endif
#if RVX_PUT_SHORT_MAX > RVX_PUT_BCOPY_MAX
#error "RVX_PUT_SHORT_MAX must not exceed RVX_PUT_BCOPY_MAX"
#endif
#if RVX_PUT_SHORT_MAX > RVX__TL_SHORT_MAX
#error "RVX_PUT_SHORT_MAX exceeds what the transport can send inline (RVX__TL_SHORT_MAX)"
#endif
#ifndef RVX_MLX5_BOUNCE_SEG
#define RVX_MLX5_BOUNCE_SEG (1 << 17)
#endif
#if RVX_TL == RVX_TL_RC_MLX5 && (4 * RVX_PUT_BCOPY_MAX > RVX_MLX5_BOUNCE_SEG || \
    2 * RVX_MLX5_FRAME > RVX_MLX5_BOUNCE_SEG || RVX_MLX5_BOUNCE_SEG > RVX_MLX5_BOUNCE_BYTES || \
    RVX_MLX5_BOUNCE_SEG % 64)
#error "RVX_MLX5_BOUNCE_SEG must hold 4 x RVX_PUT_BCOPY_MAX and 2 x RVX_MLX5_FRAME, be a multiple of 64 and at most RVX_MLX5_BOUNCE_BYTES"
#endif
#if RVX_TL == RVX_TL_DC_MLX5 && 4 * RVX_PUT_BCOPY_MAX > RVX_DC_BOUNCE_BYTES
#error "RVX_PUT_BCOPY_MAX must be at most a quarter of RVX_DC_BOUNCE_BYTES"
#endif

/* ---- the name of this build ----------------------------------------------------------------- */
#define RVX__STR2(x) #x
#define RVX__STR(x) RVX__STR2(x)
#define RVX_CONFIG_STRING                                                                       \
    "rvx " RVX_VERSION_STRING " tl=" RVX_TL_NAME " rndv=" RVX_RNDV_NAME " fabric=" RVX_FAB_NAME \
    " boot=" RVX_BOOT_NAME                                                                      \
    " am=" RVX__STR(RVX_AM) " tag=" RVX__STR(RVX_TAG) " am_args=" RVX__STR(RVX_AM_MAX_ARGS)     \
    " am_medium=" RVX__STR(RVX_AM_MAX_MEDIUM) " put_short=" RVX__STR(RVX_PUT_SHORT_MAX)         \
    " put_bcopy=" RVX__STR(RVX_PUT_BCOPY_MAX) " lanes=" RVX__STR(RVX_LANES)                  \
    " debug=" RVX__STR(RVX_DEBUG)

#endif /* RVX_CONFIG_H */
