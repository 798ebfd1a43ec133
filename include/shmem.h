/* shmem.h: OpenSHMEM 1.5 for rvx, header-only, compiled for one transport.
 *
 * An OpenSHMEM program includes <shmem.h> and is built by the wrapper (build/bin/rvxshcc, which
 * adds -I, -D_GNU_SOURCE, the transport's macros and -libverbs -lmlx5 where it needs them):
 *
 *     rvxshcc prog.c -o prog                  # shm (RVXSH_TL=shm), or --tl=rc|dc|pair|pair-dc
 *     rvxrun -n 4 ./prog                      # or mpirun/srun with a PMIx build (docs/launching.md)
 *
 * Or by hand: the same macros as any rvx program (RVX_TL, RVX_TL_INTRA), defined before this
 * include. Every OpenSHMEM call becomes calls of rvx's public API (rvx/rvx.h), inlined: a
 * shmem_long_p is an address check, an endpoint and key lookup, and rvx_put.
 *
 * What is supported, what is not and why: docs/openshmem.md. What is left out is a compile
 * error (an "unavailable" attribute naming the reason), never a silent wrong answer. */
#ifndef RVX_SHMEM_H
#define RVX_SHMEM_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include <rvx/rvx.h>

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define SHMEM_MAX_NAME_LEN 64
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define SHMEM_VENDOR_STRING "rvx OpenSHMEM (header-only, one transport per build)"
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING

#define SHMEM_THREAD_SINGLE     0
#define SHMEM_THREAD_FUNNELED   1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE   3

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE

#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

#define SHMEM_CTX_PRIVATE    (1L << 0)
#define SHMEM_CTX_SERIALIZED (1L << 1)
#define SHMEM_CTX_NOSTORE    (1L << 2)

#define SHMEM_TEAM_NUM_CONTEXTS (1L << 0)

#define SHMEM_MALLOC_ATOMICS_REMOTE (1L << 0)
#define SHMEM_MALLOC_SIGNAL_REMOTE  (1L << 1)

/* The deprecated active-set routines' work arrays: they serve as this implementation's counters
 * (barrier) and need no more than these sizes. */
#define SHMEM_SYNC_VALUE          0L
#define SHMEM_BARRIER_SYNC_SIZE   64
#define SHMEM_BCAST_SYNC_SIZE     64
#define SHMEM_COLLECT_SYNC_SIZE   64
#define SHMEM_REDUCE_SYNC_SIZE    64
#define SHMEM_ALLTOALL_SYNC_SIZE  64
#define SHMEM_ALLTOALLS_SYNC_SIZE 64
#define SHMEM_SYNC_SIZE           64
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 1
#define _SHMEM_SYNC_VALUE          SHMEM_SYNC_VALUE
#define _SHMEM_BARRIER_SYNC_SIZE   SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_BCAST_SYNC_SIZE     SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE   SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE    SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

#include "rvx/shmem/types.h"   /* the specification's type tables as X-macros */
#include "rvx/shmem/core.h"    /* state, init, the symmetric heap, address resolution */
#include "rvx/shmem/rma.h"     /* puts, gets, strided, nbi, signals */
#include "rvx/shmem/amo.h"     /* atomics */
#include "rvx/shmem/sync.h"    /* fence, quiet, wait/test, barrier, locks */
#include "rvx/shmem/team.h"    /* teams, contexts, collectives, the active-set forms */
#include "rvx/shmem/generic.h" /* C11 _Generic interfaces */

#endif /* RVX_SHMEM_H */
