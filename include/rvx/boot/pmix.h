/* rvx/boot/pmix.h: out-of-band bootstrap from the launcher's PMIx server.
 *
 * Build with -DRVX_BOOT=RVX_BOOT_PMIX and `pkg-config --cflags --libs pmix` (Debian: libpmix-dev),
 * then start the program with any launcher that serves PMIx:
 *   mpirun -np 4 ./app                    Open MPI (its mpirun hosts a PMIx server), PRRTE's prterun
 *   srun --mpi=pmix -n 4 ./app            Slurm
 * Rank is the PMIx rank, size the job's PMIX_JOB_SIZE. RVX_BOOT_TIMEOUT (seconds a collective
 * waits for the others, default 60) applies as with the local bootstrap; RVX_RANK, RVX_SIZE and
 * RVX_BOOT_DIR are not read.
 *
 * The same interface as boot/local.h: rvx__boot_init, rvx__boot_gather_start,
 * rvx__boot_gather_test, rvx__boot_allgather, rvx__boot_fini. Collective round k puts this rank's
 * bytes under the key "rvx.k" (PMIx_Put, PMIX_GLOBAL), commits them and starts a non-blocking fence
 * over the job that collects everyone's data; gather_test polls for the fence's callback and then
 * reads the others' values with PMIx_Get, which the collecting fence made local. The fence is
 * non-blocking so that core's rvx__ctx_gather keeps progressing the workers while it waits: a rank
 * already in a collective still answers the active messages a slower rank is waiting on. */
#ifndef RVX_BOOT_PMIX_H
#define RVX_BOOT_PMIX_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

#include "common.h"

/* One fence in flight. The callback runs on PMIx's progress thread, so the owner and the callback
 * agree through `state` on who frees it: a caller that gives up leaves it to a late callback. */
typedef struct rvx__pmix_fence {
    int           state;           /* RVX__PMIX_PENDING, _DONE or _ABANDONED */
    pmix_status_t status;          /* the fence's outcome, valid once DONE */
} rvx__pmix_fence_t;

enum { RVX__PMIX_PENDING = 0, RVX__PMIX_DONE = 1, RVX__PMIX_ABANDONED = 2 };

typedef struct rvx__boot {
    int                rank;
    int                size;
    unsigned           round;        /* collectives started so far */
    int                timeout_s;
    int                inited;       /* PMIx_Init succeeded: PMIx_Finalize at the end */
    unsigned           cur_round;    /* the collective under way, its fence and deadline */
    rvx__pmix_fence_t *cur_fence;
    double             cur_deadline;
    pmix_proc_t        me;
} rvx__boot_t;

RVX_COLD void rvx__pmix_fence_cb(pmix_status_t status, void *cbdata)
{
    rvx__pmix_fence_t *f = (rvx__pmix_fence_t *)cbdata;
    f->status = status;
    if (__atomic_exchange_n(&f->state, (int)RVX__PMIX_DONE, __ATOMIC_ACQ_REL) == RVX__PMIX_ABANDONED)
        free(f);
}

/* Give up on a fence that may still complete later. */
RVX_COLD void rvx__pmix_abandon(rvx__boot_t *b)
{
    rvx__pmix_fence_t *f = b->cur_fence;
    b->cur_fence = NULL;
    if (f && __atomic_exchange_n(&f->state, (int)RVX__PMIX_ABANDONED, __ATOMIC_ACQ_REL) == RVX__PMIX_DONE)
        free(f);
}

RVX_COLD rvx_status_t rvx__boot_init(rvx__boot_t *b)
{
    pmix_proc_t job;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    memset(b, 0, sizeof(*b));
    if (rvx__env_int("RVX_BOOT_TIMEOUT", 60, 1, 86400, &b->timeout_s)) return RVX_ERR_INVALID_PARAM;
    rc = PMIx_Init(&b->me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        rvx__log("PMIx_Init: %s. This build (boot=pmix) is started by a PMIx launcher: "
                 "mpirun -np N ./prog, srun --mpi=pmix -n N ./prog; for rvxrun build it with "
                 "RVX_BOOT=RVX_BOOT_LOCAL", PMIx_Error_string(rc));
        return RVX_ERR_IO;
    }
    b->inited = 1;
    PMIX_LOAD_PROCID(&job, b->me.nspace, PMIX_RANK_WILDCARD);
    rc = PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &v);
    if (rc == PMIX_SUCCESS && v && v->type == PMIX_UINT32 && v->data.uint32 >= 1 &&
        v->data.uint32 <= (1u << 20) && b->me.rank < v->data.uint32) {
        b->size = (int)v->data.uint32;
        b->rank = (int)b->me.rank;
    } else {
        rvx__log("PMIx: no usable job size (%s)", rc == PMIX_SUCCESS ? "wrong type or out of range"
                                                                    : PMIx_Error_string(rc));
        rc = PMIX_ERROR;
    }
    if (v) PMIX_VALUE_RELEASE(v);
    if (rc != PMIX_SUCCESS) {
        PMIx_Finalize(NULL, 0);
        b->inited = 0;
        return RVX_ERR_IO;
    }
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__boot_gather_start(rvx__boot_t *b, const void *mine, size_t len, void *all)
{
    char key[PMIX_MAX_KEYLEN + 1];
    pmix_value_t val;
    pmix_info_t info;
    bool collect = true;
    pmix_status_t rc;

    b->cur_round = b->round++;
    b->cur_deadline = rvx__now_s() + b->timeout_s;
    if (len) memcpy((char *)all + (size_t)b->rank * len, mine, len);
    if (b->size == 1) return RVX_OK;
    if (len) {
        snprintf(key, sizeof(key), "rvx.%u", b->cur_round);
        memset(&val, 0, sizeof(val));
        val.type = PMIX_BYTE_OBJECT;       /* PMIx_Put copies the bytes */
        val.data.bo.bytes = (char *)(uintptr_t)mine;
        val.data.bo.size = len;
        rc = PMIx_Put(PMIX_GLOBAL, key, &val);
        if (rc == PMIX_SUCCESS) rc = PMIx_Commit();
        if (rc != PMIX_SUCCESS) {
            rvx__log("bootstrap: PMIx_Put/Commit of %zu bytes (round %u): %s", len, b->cur_round,
                     PMIx_Error_string(rc));
            return RVX_ERR_IO;
        }
    }
    b->cur_fence = (rvx__pmix_fence_t *)calloc(1, sizeof(*b->cur_fence));
    if (!b->cur_fence) return RVX_ERR_NO_MEMORY;
    PMIx_Info_load(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    rc = PMIx_Fence_nb(NULL, 0, &info, 1, rvx__pmix_fence_cb, b->cur_fence);
    if (rc != PMIX_SUCCESS) {
        rvx__log("bootstrap: PMIx_Fence_nb (round %u): %s", b->cur_round, PMIx_Error_string(rc));
        free(b->cur_fence);
        b->cur_fence = NULL;
        return RVX_ERR_IO;
    }
    return RVX_OK;
}

/* RVX_OK once every rank's bytes are in `all`, RVX_INPROGRESS before, RVX_ERR_TIMED_OUT after
 * RVX_BOOT_TIMEOUT seconds, RVX_ERR_PEER_FAILED if a rank of the job is gone (the fence failed,
 * or completed without its data). */
RVX_COLD rvx_status_t rvx__boot_gather_test(rvx__boot_t *b, size_t len, void *all)
{
    char key[PMIX_MAX_KEYLEN + 1];
    rvx__pmix_fence_t *f = b->cur_fence;
    pmix_info_t info;
    bool optional = true;
    pmix_status_t rc;
    int r;

    if (!f) return RVX_OK;
    if (__atomic_load_n(&f->state, __ATOMIC_ACQUIRE) != RVX__PMIX_DONE) {
        if (rvx__now_s() <= b->cur_deadline) return RVX_INPROGRESS;
        rvx__log("bootstrap: rank %d waited %d s in the PMIx fence of round %u and gives up; "
                 "is every rank running? (RVX_BOOT_TIMEOUT sets the wait)", b->rank,
                 b->timeout_s, b->cur_round);
        rvx__pmix_abandon(b);
        return RVX_ERR_TIMED_OUT;
    }
    rc = f->status;
    free(f);
    b->cur_fence = NULL;
    if (rc != PMIX_SUCCESS) {
        rvx__log("bootstrap: the PMIx fence of round %u failed: %s", b->cur_round,
                 PMIx_Error_string(rc));
        return rc == PMIX_ERR_TIMEOUT ? RVX_ERR_TIMED_OUT : RVX_ERR_PEER_FAILED;
    }
    if (!len) return RVX_OK;
    snprintf(key, sizeof(key), "rvx.%u", b->cur_round);
    /* The fence collected everyone's data, so look only here: a launcher that lets the job run
     * on after a rank died (mpirun --enable-recovery) completes the fence without that rank, and
     * asking the server for its data would wait for ever. */
    PMIx_Info_load(&info, PMIX_OPTIONAL, &optional, PMIX_BOOL);
    for (r = 0; r < b->size; r++) {
        pmix_proc_t peer;
        pmix_value_t *v = NULL;
        rvx_status_t st = RVX_OK;
        if (r == b->rank) continue;
        PMIX_LOAD_PROCID(&peer, b->me.nspace, (pmix_rank_t)r);
        rc = PMIx_Get(&peer, key, &info, 1, &v);
        if (rc != PMIX_SUCCESS || !v) {
            rvx__log("bootstrap: no data from rank %d in the PMIx fence of round %u (%s): it has "
                     "left the job", r, b->cur_round, PMIx_Error_string(rc));
            st = RVX_ERR_PEER_FAILED;
        } else if (v->type != PMIX_BYTE_OBJECT || v->data.bo.size != len) {
            rvx__log("bootstrap: rank %d published %zu bytes in round %u, expected %zu "
                     "(ranks of one job must run the same build)", r,
                     v->type == PMIX_BYTE_OBJECT ? v->data.bo.size : (size_t)0, b->cur_round, len);
            st = RVX_ERR_BAD_MESSAGE;
        } else {
            memcpy((char *)all + (size_t)r * len, v->data.bo.bytes, len);
        }
        if (v) PMIX_VALUE_RELEASE(v);
        if (st != RVX_OK) return st;
    }
    return RVX_OK;
}

/* Blocking form, for set-up where there is nothing to progress. */
RVX_COLD rvx_status_t rvx__boot_allgather(rvx__boot_t *b, const void *mine, size_t len, void *all)
{
    unsigned spins = 0;
    rvx_status_t st = rvx__boot_gather_start(b, mine, len, all);
    if (st != RVX_OK) return st;
    while ((st = rvx__boot_gather_test(b, len, all)) == RVX_INPROGRESS) rvx__backoff(&spins);
    return st;
}

/* Tell the local PMIx server this rank is done (no barrier: ranks leave independently, and one
 * whose peers are gone does not wait for them). */
RVX_COLD void rvx__boot_fini(rvx__boot_t *b)
{
    rvx__pmix_abandon(b);
    if (b->inited) PMIx_Finalize(NULL, 0);
    b->inited = 0;
}

#endif /* RVX_BOOT_PMIX_H */
