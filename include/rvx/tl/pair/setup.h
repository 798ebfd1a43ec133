/* rvx/tl/pair/setup.h: the pair's cold code (tl/pair.h): both transports' contexts, interfaces,
 * endpoints, regions and keys, set up and torn down side by side. */
#ifndef RVX_TL_PAIR_SETUP_H
#define RVX_TL_PAIR_SETUP_H

/* ---- context -------------------------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__pair_ctx_init(rvx__pair_ctx_t *ctx, unsigned lane)
{
    rvx_status_t st = rvx__shm_ctx_init(&ctx->shm, lane);
    if (st != RVX_OK) return st;
    st = rvx__mlx5_ctx_init(&ctx->net, lane);
    if (st != RVX_OK) rvx__shm_ctx_fini(&ctx->shm);
    return st;
}

RVX_COLD void rvx__pair_ctx_fini(rvx__pair_ctx_t *ctx)
{
    rvx__mlx5_ctx_fini(&ctx->net);
    rvx__shm_ctx_fini(&ctx->shm);
}

/* Rendezvous striping weighs lanes by this: the network's port (a pair has one lane). */
RVX_COLD uint32_t rvx__pair_ctx_bw_mbs(const rvx__pair_ctx_t *ctx)
{
    return rvx__mlx5_ctx_bw_mbs(&ctx->net);
}

/* ---- interface ------------------------------------------------------------------------------ */

/* shm's mailbox has rings for the ranks of this node only (nlocal), this rank's at its index
 * among them (local): its size follows the node, not the job. Nothing here is sized by the job
 * (an endpoint reads its peer's node from the peer's address). */
#define RVX__PAIR_IFACE_INIT_NODE 1
RVX_COLD rvx_status_t rvx__pair_iface_init_node(rvx__pair_iface_t *ifc, rvx__pair_ctx_t *ctx, int rank,
                                              int nranks, int node, int local, int nlocal)
{
    rvx_status_t st;
    memset(ifc, 0, sizeof(*ifc));
    ifc->node = node;
    ifc->nranks = nranks;
    ifc->rank = rank;
    st = rvx__shm_iface_open(&ifc->shm, &ctx->shm, rank, nranks, local, nlocal, 1);
    if (st != RVX_OK) return st;
    st = RVX__PAIR_NET(iface_init)(&ifc->net, &ctx->net, rank, nranks, node);
    if (st != RVX_OK) rvx__shm_iface_fini(&ifc->shm);
    return st;
}

/* Without the node's count, a mailbox with a ring for every rank of the job. */
RVX_COLD rvx_status_t rvx__pair_iface_init(rvx__pair_iface_t *ifc, rvx__pair_ctx_t *ctx, int rank,
                                         int nranks, int node)
{
    return rvx__pair_iface_init_node(ifc, ctx, rank, nranks, node, rank, nranks);
}

#if RVX_TL == RVX_TL_DC_MLX5 /* the network's peers are told the worker is going */
#define RVX__PAIR_IFACE_LEAVE 1
RVX_COLD void rvx__pair_iface_leave(rvx__pair_iface_t *ifc) { rvx__dc_iface_leave(&ifc->net); }
#endif

RVX_COLD void rvx__pair_iface_fini(rvx__pair_iface_t *ifc)
{
    RVX__PAIR_NET(iface_fini)(&ifc->net);
    rvx__shm_iface_fini(&ifc->shm);
}

RVX_COLD void rvx__pair_iface_address(rvx__pair_iface_t *ifc, rvx__pair_addr_t *addr)
{
    memset(addr, 0, sizeof(*addr));
    addr->node = ifc->node;
    rvx__shm_iface_address(&ifc->shm, RVX__PAIR_SHM_ADDR(addr));
    RVX__PAIR_NET(iface_address)(&ifc->net, RVX__PAIR_NET_ADDR(addr));
}

/* An on-node sender's rings are at its index on the node: every rank that says it is on this node
 * must name its own index, in a mailbox of this rank's size. Local ranks that disagree with the
 * node numbers (the launcher's, or RVX_LOCAL_RANK and RVX_NODE set by hand) stop the wire-up
 * here, rather than put two senders in one ring or a ring outside a mailbox. */
RVX_COLD rvx_status_t rvx__pair_check_node(rvx__pair_iface_t *ifc, const uint8_t *addrs, size_t size)
{
    int n, self, r, slot, nslots;
    rvx_status_t st = RVX_OK;
    int *owner;
    rvx__shm_iface_slot(&ifc->shm, &self, &n);
    owner = (int *)malloc((size_t)n * sizeof(*owner));
    if (!owner) return RVX_ERR_NO_MEMORY;
    for (r = 0; r < n; r++) owner[r] = -1;
    for (r = 0; r < ifc->nranks && st == RVX_OK; r++) {
        const uint8_t *a = addrs + (size_t)r * size;
        if (((const rvx__pair_addr_t *)(const void *)a)->node != ifc->node) continue;
        rvx__shm_addr_slot(RVX__PAIR_SHM_ADDR(a), &slot, &nslots);
        if (nslots != n || slot < 0 || slot >= n) {
            rvx__log("rank %d is on node %d as local rank %d of %d, this rank (%d) as %d of "
                     "%d: the ranks' local ranks and sizes (RVX_LOCAL_RANK, RVX_LOCAL_SIZE or "
                     "PMIx's) do not match their node numbers", r, ifc->node, slot, nslots,
                     ifc->rank, self, n);
            st = RVX_ERR_INVALID_PARAM;
        } else if (owner[slot] >= 0) {
            rvx__log("ranks %d and %d are both local rank %d on node %d: the ranks' local ranks "
                     "(RVX_LOCAL_RANK or PMIx's) do not match their node numbers (RVX_NODE or "
                     "PMIx's)", owner[slot], r, slot, ifc->node);
            st = RVX_ERR_INVALID_PARAM;
        } else {
            owner[slot] = r;
        }
    }
    free(owner);
    return st;
}

/* Every rank's address: each transport reads its own part (with the pair's stride), after the
 * check of the node's local ranks. */
RVX_COLD rvx_status_t rvx__pair_iface_wireup(rvx__pair_iface_t *ifc, const uint8_t *addrs, size_t size)
{
    rvx_status_t st = rvx__pair_check_node(ifc, addrs, size);
    if (st != RVX_OK) return st;
    st = rvx__shm_iface_wireup(&ifc->shm, addrs + RVX__PAIR_SHM_OFF, size);
    if (st != RVX_OK) return st;
    return RVX__PAIR_NET(iface_wireup)(&ifc->net, addrs + RVX__PAIR_NET_OFF, size);
}

#ifdef RVX__PAIR_NET_ADDR_KEPT
/* The worker keeps each address's prefix: node, shm's address and net's kept part. */
RVX_COLD void rvx__pair_iface_addrs(rvx__pair_iface_t *ifc, const uint8_t *addrs, size_t stride)
{
    RVX__PAIR_NET(iface_addrs)(&ifc->net, addrs + RVX__PAIR_NET_OFF, stride);
}
#endif

/* ---- endpoints ------------------------------------------------------------------------------ */

/* On the node: shm's endpoint for everything but atomics, and net's for those; off the node:
 * net's alone. */
RVX_COLD rvx_status_t rvx__pair_ep_connect(rvx__pair_iface_t *ifc, rvx__pair_ep_t *ep, int rank,
                                         const rvx__pair_addr_t *addr)
{
    rvx_status_t st;
    memset(ep, 0, sizeof(*ep));
    ep->ifc = ifc;
    ep->rank = rank;
    ep->intra = addr->node == ifc->node;
    if (ep->intra) {
        st = rvx__shm_ep_connect(&ifc->shm, &ep->shm, rank, RVX__PAIR_SHM_ADDR(addr));
        if (st != RVX_OK) return st;
    }
    st = RVX__PAIR_NET(ep_connect)(&ifc->net, &ep->net, rank, RVX__PAIR_NET_ADDR(addr));
    if (st != RVX_OK) {
        if (ep->intra) rvx__shm_ep_disconnect(&ep->shm);
        return st;
    }
#if RVX_TL == RVX_TL_DC_MLX5 && RVX_CAN_RECEIVE
    if (ep->intra) rvx__dc_ep_no_msgs(&ep->net); /* messages on the node go through shm */
#endif
    ifc->nlive++;
    if (!ep->intra) ifc->noff++;
    return RVX_OK;
}

RVX_COLD void rvx__pair_ep_disconnect(rvx__pair_ep_t *ep)
{
    rvx__pair_iface_t *ifc = ep->ifc;
    RVX__PAIR_NET(ep_disconnect)(&ep->net);
    if (ep->intra) rvx__shm_ep_disconnect(&ep->shm);
    else ifc->noff--;
    ifc->nlive--;
}

/* The path's liveness: on the node shm's (the peer's process and mailbox), else net's. */
RVX_COLD rvx_status_t rvx__pair_ep_alive(rvx__pair_ep_t *ep)
{
    if (ep->intra) return rvx__shm_ep_alive(&ep->shm);
    return RVX__PAIR_NET(ep_alive)(&ep->net);
}

/* ---- memory and keys ------------------------------------------------------------------------ */

/* shm's memory (a memfd on-node peers map), registered with the NIC too. */
RVX_COLD rvx_status_t rvx__pair_mem_alloc(rvx__pair_ctx_t *ctx, size_t len, rvx__pair_mem_t *mem)
{
    rvx_status_t st = rvx__shm_mem_alloc(&ctx->shm, len, &mem->shm);
    if (st != RVX_OK) return st;
    st = rvx__mlx5_mem_reg(&ctx->net, mem->shm.addr, len, &mem->net);
    if (st != RVX_OK) {
        rvx__shm_mem_dereg(&ctx->shm, &mem->shm);
        return st;
    }
    mem->addr = mem->shm.addr;
    mem->len = len;
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__pair_mem_reg(rvx__pair_ctx_t *ctx, void *addr, size_t len, rvx__pair_mem_t *mem)
{
    rvx_status_t st = rvx__shm_mem_reg(&ctx->shm, addr, len, &mem->shm);
    if (st != RVX_OK) return st;
    st = rvx__mlx5_mem_reg(&ctx->net, addr, len, &mem->net);
    if (st != RVX_OK) {
        rvx__shm_mem_dereg(&ctx->shm, &mem->shm);
        return st;
    }
    mem->addr = addr;
    mem->len = len;
    return RVX_OK;
}

RVX_COLD void rvx__pair_mem_dereg(rvx__pair_ctx_t *ctx, rvx__pair_mem_t *mem)
{
    rvx__mlx5_mem_dereg(&ctx->net, &mem->net); /* before shm unmaps the bytes */
    rvx__shm_mem_dereg(&ctx->shm, &mem->shm);
}

/* shm's key, then net's */
RVX_COLD void rvx__pair_rkey_pack(const rvx__pair_mem_t *mem, void *buf)
{
    rvx__shm_rkey_pack(&mem->shm, buf);
    rvx__mlx5_rkey_pack(&mem->net, (uint8_t *)buf + RVX__SHM_RKEY_PACKED_SIZE);
}

RVX_COLD void rvx__pair_rkey_stamp(void *buf, int rank)
{
    rvx__shm_rkey_stamp(buf, rank);
    rvx__mlx5_rkey_stamp((uint8_t *)buf + RVX__SHM_RKEY_PACKED_SIZE, rank);
}

/* On the node both keys (shm maps the region once, here); off it net's alone. */
RVX_COLD rvx_status_t rvx__pair_rkey_unpack(rvx__pair_ep_t *ep, const void *buf, rvx__pair_rkey_t *rkey)
{
    rvx_status_t st;
    memset(rkey, 0, sizeof(*rkey));
    if (ep->intra) {
        st = rvx__shm_rkey_unpack(&ep->shm, buf, &rkey->shm);
        if (st != RVX_OK) return st;
    }
    st = RVX__PAIR_NET(rkey_unpack)(&ep->net, (const uint8_t *)buf + RVX__SHM_RKEY_PACKED_SIZE, &rkey->net);
    if (st != RVX_OK && ep->intra) rvx__shm_rkey_release(&rkey->shm);
    return st;
}

/* shm's mapping, which only a key unpacked on the node has */
RVX_COLD void *rvx__pair_rkey_ptr(const rvx__pair_rkey_t *rkey, uint64_t raddr, size_t len)
{
    return rvx__shm_rkey_ptr(&rkey->shm, raddr, len);
}

/* shm's release unmaps only what it mapped (a key unpacked off the node holds nothing of shm) */
RVX_COLD void rvx__pair_rkey_release(rvx__pair_rkey_t *rkey)
{
    rvx__shm_rkey_release(&rkey->shm);
    rvx__mlx5_rkey_release(&rkey->net);
}

#endif /* RVX_TL_PAIR_SETUP_H */
