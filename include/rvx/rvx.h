/* rvx/rvx.h: the one include of rvx, a header-only RDMA and shared-memory transport kit.
 *
 * Define the configuration (see rvx/config.h for every macro), then include this file:
 *
 *     #define RVX_TL RVX_TL_SHM                       // or RVX_TL_RC_MLX5
 *     #define RVX_AM_HANDLERS(X) X(PING, on_ping)     // only if you use active messages
 *     #include <rvx/rvx.h>
 *
 * The compiler then sees one transport and one protocol set: every put, flush and send is a
 * straight line of stores, with no function pointer and no run-time key lookup. Include it
 * before any system header (it needs POSIX and GNU declarations), or compile with -D_GNU_SOURCE.
 *
 * The API in brief (details above each function):
 *   rvx_init / rvx_finalize / rvx_rank / rvx_size / rvx_allgather / rvx_barrier   core.h
 *   rvx_worker_create / rvx_worker_destroy / rvx_progress / rvx_worker_flush(_nb)  core.h
 *   rvx_ep_create / rvx_ep_destroy / rvx_ep_flush(_nb) / rvx_ep_status             core.h
 *   rvx_mem_alloc / rvx_mem_reg / rvx_mem_dereg / rvx_rkey_pack / rvx_rkey_unpack  core.h
 *   rvx_put / rvx_put_zcopy / rvx_get / rvx_get_zcopy                              proto/rma.h
 *   rvx_atomic32 / rvx_atomic64                                                    proto/amo.h
 *   rvx_am_short / _medium / _long, rvx_am_reply_*                                 proto/am.h
 *   rvx_tag_send / rvx_tag_recv / rvx_tag_probe / rvx_tag_cancel (RVX_TAG=1)       proto/tag.h
 *   rvx_wait / rvx_wait_flag / rvx_status_str / rvx_config_string                  core.h */
#ifndef RVX_RVX_H
#define RVX_RVX_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <features.h>
#if defined(__GLIBC__) && !defined(__USE_GNU)
#error "rvx.h needs GNU/POSIX declarations: include <rvx/rvx.h> before system headers, or compile with -D_GNU_SOURCE"
#endif

#include "config.h"
#include "sys/compiler.h"
#include "types.h"
#include "sys/env.h"
#include "sys/clock.h"
#if RVX_BOOT == RVX_BOOT_PMIX
#include "boot/pmix.h"
#else
#include "boot/local.h"
#endif

#if RVX_TL == RVX_TL_SHM
#include "tl/shm.h"
#elif RVX_TL == RVX_TL_RC_MLX5
#include "tl/rc_mlx5.h"
#endif

#include "core.h"
#include "sys/rcache.h"
#include "proto/thresh.h"
#include "proto/rma.h"
#include "proto/amo.h"
#if RVX_AM
#include "proto/am.h"
#endif
#if RVX_TAG
#include "proto/tag_match.h" /* operations and matching queues */
#if RVX_RNDV == RVX_RNDV_GET
#include "proto/rndv/get.h"
#elif RVX_RNDV == RVX_RNDV_PUT
#include "proto/rndv/put.h"
#elif RVX_RNDV == RVX_RNDV_AM
#include "proto/rndv/am.h"
#elif RVX_RNDV == RVX_RNDV_PIPELINE
#include "proto/rndv/pipeline.h"
#endif
#include "proto/tag.h"       /* the API and its fast paths */
#include "proto/tag_peer.h"  /* peer liveness, endpoint teardown, progress hook */
#endif
#if RVX_CAN_RECEIVE
#include "proto/rx.h"
#endif
#include "proto/hooks.h"     /* the protocols' worker, endpoint and progress hooks, composed */

#endif /* RVX_RVX_H */
