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
 * Node: RVX_NODE when set (0 .. size-1, set per rank, e.g. by a wrapper script: emulated nodes
 * under mpirun on one machine), else the launcher's node id of this process (PMIX_NODEID), else the lowest rank
 * among PMIX_LOCAL_PEERS (unique per node, not dense), else this rank's own number: a rank whose
 * node is unknown shares memory with nobody, which is slower but never wrong.
 * Place on the node (local, nlocal: a pair build sizes its mailbox by them): with RVX_NODE,
 * RVX_LOCAL_RANK and RVX_LOCAL_SIZE (boot/node.h); with the launcher's node, PMIX_LOCAL_RANK and
 * PMIX_LOCAL_SIZE; where either is missing, the rank in the job (a mailbox for every rank).
 *
 * The same interface as boot/local.h: rvx__boot_init, rvx__boot_gather_start,
 * rvx__boot_gather_test, rvx__boot_fini. Collective round k puts this rank's
 * bytes under the key "rvx.k" (PMIx_Put, PMIX_GLOBAL), commits them and starts a non-blocking fence
 * over the job that collects everyone's data; gather_test polls for the fence's callback and then
 * reads the others' values, from this process's store when the fence brought them here, else with
 * non-blocking gets from the server. Nothing blocks, so core's rvx__ctx_gather keeps progressing
 * the workers while it waits: a rank already in a collective still answers the active messages a
 * slower rank is waiting on; and a rank that never answers costs RVX_BOOT_TIMEOUT, not a hang. */
#ifndef RVX_BOOT_PMIX_H
#define RVX_BOOT_PMIX_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pmix.h>

#include "node.h"

/* One PMIx request in flight (a fence, or a get of one rank's value). Its callback runs on PMIx's
 * progress thread, so the owner and the callback agree through `state` on who frees it: a caller
 * that gives up leaves it to a late callback. A get's value is copied into `buf` by the callback. */
typedef struct rvx__pmix_op {
    int           state;           /* RVX__PMIX_PENDING, _DONE or _ABANDONED */
    pmix_status_t status;          /* the outcome, valid once DONE */
    size_t        len, got;        /* a get: bytes expected, bytes the peer published */
    unsigned char *buf;            /* a get: len bytes, allocated with the op, just after it */
} rvx__pmix_op_t;

enum { RVX__PMIX_PENDING = 0, RVX__PMIX_DONE = 1, RVX__PMIX_ABANDONED = 2 };

typedef struct rvx__boot {
    int              rank;
    int              size;
    int              node;         /* ranks with the same node share memory */
    int              local, nlocal; /* this rank's index among its node's ranks, and their number */
    unsigned         round;        /* collectives started so far */
    int              timeout_s;
    int              inited;       /* PMIx_Init succeeded: PMIx_Finalize at the end */
    unsigned         cur_round;    /* the collective under way: round, deadline, requests */
    double           cur_start, cur_deadline;
    rvx__pmix_op_t  *cur_fence;
    rvx__pmix_op_t **cur_gets;     /* by rank: values still being fetched from the server */
    int              cur_pending;
    pmix_proc_t      me;
} rvx__boot_t;

RVX_COLD void rvx__pmix_done(rvx__pmix_op_t *op, pmix_status_t status)
{
    op->status = status;
    if (__atomic_exchange_n(&op->state, (int)RVX__PMIX_DONE, __ATOMIC_ACQ_REL) == RVX__PMIX_ABANDONED)
        free(op);
}

RVX_COLD void rvx__pmix_fence_cb(pmix_status_t status, void *cbdata)
{
    rvx__pmix_done((rvx__pmix_op_t *)cbdata, status);
}

RVX_COLD void rvx__pmix_get_cb(pmix_status_t status, pmix_value_t *kv, void *cbdata)
{
    rvx__pmix_op_t *op = (rvx__pmix_op_t *)cbdata;
    if (status == PMIX_SUCCESS && kv && kv->type == PMIX_BYTE_OBJECT) {
        op->got = kv->data.bo.size;
        if (op->got == op->len) memcpy(op->buf, kv->data.bo.bytes, op->len);
    } else if (status == PMIX_SUCCESS) {
        status = PMIX_ERR_TYPE_MISMATCH;
    }
    rvx__pmix_done(op, status);
}

RVX_COLD void rvx__pmix_abandon_op(rvx__pmix_op_t *op)
{
    if (op && __atomic_exchange_n(&op->state, (int)RVX__PMIX_ABANDONED, __ATOMIC_ACQ_REL) ==
                  RVX__PMIX_DONE)
        free(op);
}

/* Give up on the collective under way; its requests may still complete later. */
RVX_COLD void rvx__pmix_abandon(rvx__boot_t *b)
{
    int r;
    rvx__pmix_abandon_op(b->cur_fence);
    b->cur_fence = NULL;
    if (b->cur_gets) {
        for (r = 0; r < b->size; r++) rvx__pmix_abandon_op(b->cur_gets[r]);
        free(b->cur_gets);
        b->cur_gets = NULL;
    }
    b->cur_pending = 0;
}

/* PMIX_LOCAL_PEERS is a comma-separated list of the ranks on this process's node. */
RVX_COLD int rvx__pmix_lowest_local(const char *peers)
{
    long low = -1;
    while (peers && *peers) {
        char *end;
        long r = strtol(peers, &end, 10);
        if (end == peers || r < 0) return -1;
        if (low < 0 || r < low) low = r;
        peers = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') return -1;
    }
    return low >= 0 && low < (1L << 20) ? (int)low : -1;
}

/* This rank's index among its node's ranks and their number, from the launcher; the rank in the
 * job where it does not say. */
RVX_COLD void rvx__pmix_local(rvx__boot_t *b, const pmix_info_t *info)
{
    pmix_value_t *v = NULL;
    pmix_proc_t job;
    int local = -1;
    PMIX_LOAD_PROCID(&job, b->me.nspace, PMIX_RANK_WILDCARD);
    b->local = b->rank;
    b->nlocal = b->size;
    if (PMIx_Get(&b->me, PMIX_LOCAL_RANK, info, 1, &v) == PMIX_SUCCESS && v &&
        v->type == PMIX_UINT16)
        local = v->data.uint16;
    if (v) PMIX_VALUE_RELEASE(v);
    v = NULL;
    if (local >= 0 && PMIx_Get(&job, PMIX_LOCAL_SIZE, info, 1, &v) == PMIX_SUCCESS && v &&
        v->type == PMIX_UINT32 && local < (int64_t)v->data.uint32 &&
        v->data.uint32 <= (uint32_t)b->size) {
        b->local = local;
        b->nlocal = (int)v->data.uint32;
    }
    if (v) PMIX_VALUE_RELEASE(v);
}

/* This rank's node (see the head comment); only RVX_NODE is an error when wrong. */
RVX_COLD rvx_status_t rvx__pmix_node(rvx__boot_t *b)
{
    pmix_proc_t job;
    pmix_value_t *v = NULL;
    pmix_info_t info;
    bool optional = true;
    if (getenv("RVX_NODE") && *getenv("RVX_NODE")) {
        if (rvx__boot_env_node(b->size, &b->node)) return RVX_ERR_INVALID_PARAM;
        return rvx__boot_env_local(b->rank, b->size, &b->local, &b->nlocal);
    }
    b->node = -1;
    PMIx_Info_load(&info, PMIX_OPTIONAL, &optional, PMIX_BOOL);
    if (PMIx_Get(&b->me, PMIX_NODEID, &info, 1, &v) == PMIX_SUCCESS && v &&
        v->type == PMIX_UINT32 && v->data.uint32 <= (uint32_t)INT32_MAX)
        b->node = (int)v->data.uint32;
    if (v) PMIX_VALUE_RELEASE(v);
    v = NULL;
    PMIX_LOAD_PROCID(&job, b->me.nspace, PMIX_RANK_WILDCARD);
    if (b->node < 0 && PMIx_Get(&job, PMIX_LOCAL_PEERS, &info, 1, &v) == PMIX_SUCCESS && v &&
        v->type == PMIX_STRING)
        b->node = rvx__pmix_lowest_local(v->data.string);
    if (v) PMIX_VALUE_RELEASE(v);
    if (b->node < 0) {
        b->node = b->rank; /* alone on its node */
        b->local = 0;
        b->nlocal = 1;
        return RVX_OK;
    }
    rvx__pmix_local(b, &info);
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__boot_init(rvx__boot_t *b)
{
    pmix_proc_t job;
    pmix_value_t *v = NULL;
    pmix_status_t rc;
    rvx_status_t st;
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
    st = rc == PMIX_SUCCESS ? rvx__pmix_node(b) : RVX_ERR_IO;
    if (st != RVX_OK) {
        PMIx_Finalize(NULL, 0);
        b->inited = 0;
    }
    return st;
}

RVX_COLD rvx_status_t rvx__boot_gather_start(rvx__boot_t *b, const void *mine, size_t len, void *all)
{
    char key[PMIX_MAX_KEYLEN + 1];
    pmix_value_t val;
    pmix_info_t info;
    bool collect = true;
    pmix_status_t rc;

    b->cur_round = b->round++;
    b->cur_start = rvx__now_s();
    b->cur_deadline = b->cur_start + b->timeout_s;
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
    b->cur_fence = (rvx__pmix_op_t *)calloc(1, sizeof(*b->cur_fence));
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

/* Check one rank's published value and copy it into its place. */
RVX_COLD rvx_status_t rvx__pmix_take(rvx__boot_t *b, int r, const void *bytes, size_t got,
                                     size_t len, void *all)
{
    if (got != len) {
        rvx__log("bootstrap: rank %d published %zu bytes in round %u, expected %zu "
                 "(ranks of one job must run the same build)", r, got, b->cur_round, len);
        return RVX_ERR_BAD_MESSAGE;
    }
    memcpy((char *)all + (size_t)r * len, bytes, len);
    return RVX_OK;
}

/* After the fence: every rank's value, from this process's store when the fence brought it here
 * (the usual case), otherwise from the server with a non-blocking get, so that a rank that left
 * the job after the fence (mpirun --enable-recovery lets one) costs a timeout, not a hang. */
RVX_COLD rvx_status_t rvx__pmix_fetch(rvx__boot_t *b, size_t len, void *all)
{
    char key[PMIX_MAX_KEYLEN + 1];
    pmix_info_t info;
    bool optional = true;
    int r;
    snprintf(key, sizeof(key), "rvx.%u", b->cur_round);
    PMIx_Info_load(&info, PMIX_OPTIONAL, &optional, PMIX_BOOL);
    for (r = 0; r < b->size; r++) {
        pmix_proc_t peer;
        pmix_value_t *v = NULL;
        pmix_status_t rc;
        rvx__pmix_op_t *op;
        if (r == b->rank) continue;
        PMIX_LOAD_PROCID(&peer, b->me.nspace, (pmix_rank_t)r);
        if (PMIx_Get(&peer, key, &info, 1, &v) == PMIX_SUCCESS && v &&
            v->type == PMIX_BYTE_OBJECT) {
            rvx_status_t st = rvx__pmix_take(b, r, v->data.bo.bytes, v->data.bo.size, len, all);
            PMIX_VALUE_RELEASE(v);
            if (st != RVX_OK) return st;
            continue;
        }
        if (v) PMIX_VALUE_RELEASE(v);
        if (!b->cur_gets &&
            !(b->cur_gets = (rvx__pmix_op_t **)calloc((size_t)b->size, sizeof(*b->cur_gets))))
            return RVX_ERR_NO_MEMORY;
        op = (rvx__pmix_op_t *)calloc(1, sizeof(*op) + len);
        if (!op) return RVX_ERR_NO_MEMORY;
        op->buf = (unsigned char *)(op + 1);
        op->len = len;
        rc = PMIx_Get_nb(&peer, key, NULL, 0, rvx__pmix_get_cb, op);
        if (rc != PMIX_SUCCESS) {
            free(op);
            rvx__log("bootstrap: PMIx_Get_nb of rank %d's %s: %s", r, key, PMIx_Error_string(rc));
            return RVX_ERR_IO;
        }
        b->cur_gets[r] = op;
        b->cur_pending++;
    }
    return RVX_OK;
}

/* RVX_OK once every rank's bytes are in `all`, RVX_INPROGRESS before, RVX_ERR_TIMED_OUT after
 * RVX_BOOT_TIMEOUT seconds, RVX_ERR_PEER_FAILED if the launcher failed the fence (a rank died). */
RVX_COLD rvx_status_t rvx__boot_gather_test(rvx__boot_t *b, size_t len, void *all)
{
    rvx_status_t st = RVX_OK;
    int r;

    if (b->cur_fence) {
        rvx__pmix_op_t *f = b->cur_fence;
        pmix_status_t rc;
        if (__atomic_load_n(&f->state, __ATOMIC_ACQUIRE) != RVX__PMIX_DONE) goto pending;
        rc = f->status;
        free(f);
        b->cur_fence = NULL;
        if (rc != PMIX_SUCCESS) {
            rvx__log("bootstrap: the PMIx fence of round %u failed: %s", b->cur_round,
                     PMIx_Error_string(rc));
            return rc == PMIX_ERR_TIMEOUT ? RVX_ERR_TIMED_OUT : RVX_ERR_PEER_FAILED;
        }
        if (len && (st = rvx__pmix_fetch(b, len, all)) != RVX_OK) goto fail;
    }
    for (r = 0; b->cur_pending && r < b->size; r++) {
        rvx__pmix_op_t *op = b->cur_gets[r];
        if (!op || __atomic_load_n(&op->state, __ATOMIC_ACQUIRE) != RVX__PMIX_DONE) continue;
        if (op->status != PMIX_SUCCESS) {
            rvx__log("bootstrap: rank %d's value of round %u: %s", r, b->cur_round,
                     PMIx_Error_string(op->status));
            st = RVX_ERR_PEER_FAILED;
        } else {
            st = rvx__pmix_take(b, r, op->buf, op->got, len, all);
        }
        free(op);
        b->cur_gets[r] = NULL;
        b->cur_pending--;
        if (st != RVX_OK) goto fail;
    }
    if (b->cur_pending) goto pending;
    free(b->cur_gets);
    b->cur_gets = NULL;
    return RVX_OK;
pending:
    if (rvx__now_s() <= b->cur_deadline) return RVX_INPROGRESS;
    if (b->cur_fence)
        rvx__log("bootstrap: rank %d waited %.1f s in the PMIx fence of round %u and gives up; "
                 "is every rank running? (RVX_BOOT_TIMEOUT=%d s sets the wait)", b->rank,
                 rvx__now_s() - b->cur_start, b->cur_round, b->timeout_s);
    else
        for (r = 0; r < b->size; r++)
            if (b->cur_gets[r])
                rvx__log("bootstrap: rank %d's value of round %u did not arrive in %.1f s: has it "
                         "left the job?", r, b->cur_round, rvx__now_s() - b->cur_start);
    st = RVX_ERR_TIMED_OUT;
fail:
    rvx__pmix_abandon(b);
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
