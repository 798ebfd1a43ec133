/* rvx/boot/node.h: where this rank runs, from the environment: its node (RVX_NODE, checked here
 * for both bootstraps) and its place among the ranks of its node (rvx__boot_t.local, .nlocal),
 * which a pair build sizes its shared-memory mailbox by: one sender per rank of the node.
 *
 *   RVX_LOCAL_RANK  this rank's index among the ranks of its node, 0 .. RVX_LOCAL_SIZE-1
 *   RVX_LOCAL_SIZE  ranks on this rank's node
 * Both or neither (rvxrun --nodes sets both). Without them the place is the rank in the job
 * (local = rank, nlocal = size): a mailbox with a ring for every rank of the job, never wrong,
 * larger than it needs to be when the job spans nodes. */
#ifndef RVX_BOOT_NODE_H
#define RVX_BOOT_NODE_H

/* RVX_NODE (default 0): this rank's node number, 0 .. size-1. */
RVX_COLD rvx_status_t rvx__boot_env_node(int size, int *node)
{
    if (rvx__env_int("RVX_NODE", 0, 0, size - 1, node)) {
        rvx__log("RVX_NODE is this rank's node number: at least 0 and below the job's size (%d)", size);
        return RVX_ERR_INVALID_PARAM;
    }
    return RVX_OK;
}

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
