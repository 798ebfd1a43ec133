/* rvx/boot/node.h: this rank's place among the ranks of its node (rvx__boot_t.local, .nlocal),
 * which a pair build sizes its shared-memory mailbox by: one sender per rank of the node.
 *
 *   RVX_LOCAL_RANK  this rank's index among the ranks of its node, 0 .. RVX_LOCAL_SIZE-1
 *   RVX_LOCAL_SIZE  ranks on this rank's node
 * Both or neither (rvxrun --nodes sets both). Without them the place is the rank in the job
 * (local = rank, nlocal = size): a mailbox with a ring for every rank of the job, never wrong,
 * larger than it needs to be when the job spans nodes. */
#ifndef RVX_BOOT_NODE_H
#define RVX_BOOT_NODE_H

RVX_COLD rvx_status_t rvx__boot_env_local(int rank, int size, int *local, int *nlocal)
{
    const char *lr = getenv("RVX_LOCAL_RANK"), *ls = getenv("RVX_LOCAL_SIZE");
    int set_r = lr && *lr, set_s = ls && *ls;
    *local = rank;
    *nlocal = size;
    if (!set_r && !set_s) return RVX_OK;
    if (set_r != set_s) {
        rvx__log("RVX_LOCAL_RANK and RVX_LOCAL_SIZE go together (this rank's place on its node)");
        return RVX_ERR_INVALID_PARAM;
    }
    if (rvx__env_int("RVX_LOCAL_SIZE", size, 1, size, nlocal) ||
        rvx__env_int("RVX_LOCAL_RANK", rank, 0, *nlocal - 1, local)) {
        rvx__log("RVX_LOCAL_RANK is this rank's index on its node, below RVX_LOCAL_SIZE, the "
                 "node's ranks (1 .. %d)", size);
        return RVX_ERR_INVALID_PARAM;
    }
    return RVX_OK;
}

#endif /* RVX_BOOT_NODE_H */
