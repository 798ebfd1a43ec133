/* rvx/tl/contract.h: what every transport (tl) header provides.
 *
 * The protocols (the proto headers) and the core (core.h) are written once against the names below;
 * exactly one tl header is compiled into a build, so every call is direct and inlinable. Each
 * transport defines them under its own prefix (rvx__shm_, rvx__rc_, rvx__dc_, rvx__pair_; what
 * rc and dc share, rvx__mlx5_); tl/bind.h binds the build's names to rvx__tl_* once.
 * tests/t_tl_contract.c checks at compile time that the selected tl defines all of them.
 *
 * Types
 *   rvx__tl_ctx_t     per-process device state (shm: none; mlx5: device context, PD)
 *   rvx__tl_iface_t   per-worker interface (shm: the mailbox of rings; mlx5: CQs)
 *                     fields every tl has: unsigned nlive (live endpoints),
 *                     unsigned outstanding (operations whose completion is not yet known)
 *   rvx__tl_ep_t      per-peer endpoint state (shm: ring cursors; mlx5: the QP)
 *   rvx__tl_mem_t     a local memory region
 *   rvx__tl_addr_t    address of an iface, exchanged through the bootstrap: RVX__TL_ADDR_SIZE(n)
 *                     bytes in a job of n ranks
 *   rvx_rkey_t        an unpacked remote key: everything a put needs, resolved once
 *   RVX__TL_RKEY_PACKED_SIZE  bytes of a packed rkey
 *   RVX__TL_AM_CHANNELS       message channels per endpoint (request, reply)
 *
 * Set-up (cold)
 *   rvx__tl_ctx_init(ctx, lane) / rvx__tl_ctx_fini(ctx)
 *                                                lane 0 is the build's only lane, or the first of
 *                                                RVX_LANES: each lane is one more ctx, opened on
 *                                                its own device (rc_mlx5: the lane-th device)
 *   rvx__tl_ctx_bw_mbs(ctx) -> uint32_t          the lane's bandwidth in MB/s (10^6 B/s), used to
 *                                                stripe rendezvous data across lanes (rc_mlx5: the
 *                                                port's active speed x width; shm: RVX_FAB_BW_MBS)
 *   rvx__tl_iface_init(ifc, ctx, rank, nranks, node) / rvx__tl_iface_fini(ifc)
 *                                                node: this rank's node (the bootstrap's number);
 *                                                a pair (tl/pair.h) compares it with each peer's
 *   Optional: RVX__TL_IFACE_INIT_NODE, rvx__tl_iface_init_node(ifc, ctx, rank, nranks, node, local,
 *                                                nlocal), which the core then calls instead: a tl
 *                                                sharing memory with the node's ranks sizes it by
 *                                                them (nlocal; local: this rank's index among them)
 *   rvx__tl_iface_address(ifc, addr)
 *   rvx__tl_iface_wireup(ifc, addrs, size)     after the address exchange of worker creation:
 *                                                every rank's address (size bytes each); rc_mlx5
 *                                                connects all its QPs here
 *   RVX__TL_ADDR_KEPT(n), rvx__tl_iface_addrs(ifc, addrs, stride)   optional: the worker keeps
 *                                                only that prefix of each address after wire-up
 *                                                (ep_connect gets it) and tells the iface where
 *                                                the packed copy is
 *   rvx__tl_ep_connect(ifc, ep, rank, addr) / rvx__tl_ep_disconnect(ep)
 *   Optional: RVX__TL_IFACE_FLUSHED, rvx__tl_iface_flushed(ifc): nonzero when nothing is left
 *                                                to flush, tested inline by rvx_worker_flush
 *                                                before it takes the general way
 *   Optional: RVX__TL_IFACE_LEAVE, rvx__tl_iface_leave(ifc): the worker is going; called before
 *                                                its endpoints are destroyed (dc_mlx5: peers are
 *                                                told, so they give no credits back to it)
 *   rvx__tl_ep_alive(ep)                         -> RVX_OK, RVX_ERR_PEER_FAILED, or
 *                                                   RVX_ERR_REMOTE_ACCESS (failed by an access error)
 *   rvx__tl_mem_alloc(ctx, len, mem) / rvx__tl_mem_reg(ctx, addr, len, mem) / rvx__tl_mem_dereg
 *   rvx__tl_rkey_pack(mem, buf) / rvx__tl_rkey_stamp(buf, rank) (the packing rank, checked by unpack)
 *   / rvx__tl_rkey_unpack(ep, buf, rkey) / rvx__tl_rkey_release
 *   rvx__tl_rkey_ptr(rkey, raddr, len)           where [raddr, raddr + len) of the key's region
 *                                                is mapped in this process, else NULL
 *
 * Fast path (always inline; no call, no indirect branch on the success path)
 *   rvx__tl_put_short(ep, src, len, raddr, rkey)          len <= RVX_PUT_SHORT_MAX
 *   rvx__tl_put_bcopy(ep, src, len, raddr, rkey)          local completion on return
 *   rvx__tl_put_zcopy(ep, src, len, lmem, raddr, rkey, req)
 *   rvx__tl_get_bcopy(ep, dst, len, raddr, rkey, req)
 *   rvx__tl_get_zcopy(ep, dst, len, lmem, raddr, rkey, req)
 *   rvx__tl_atomic64(ep, op, operand, compare, raddr, rkey, fetch, req)   (and rvx__tl_atomic32)
 *   rvx__tl_am_claim(ep, chan, len) -> body pointer or NULL (no room: RVX_ERR_NO_RESOURCE)
 *   rvx__tl_am_publish(ep, chan, body, len, info) -> RVX_OK   sends what was written at body
 *       (callers return its status, so a tl's cold publish is a jump, not a call)
 *   Optional: RVX__TL_AM_CLAIM_HOT(ep, chan, len), a claim that may fail where rvx__tl_am_claim
 *       would first do cold work (a call); the protocols' hot paths use it and claim again from
 *       their cold paths. RVX__TL_IN_HANDLER(ep): nonzero while handlers run, read from a word
 *       the send path loads anyway.
 *   The send handle (tl/tx.h): the protocols' hot sends are called as RVX__TL_SEND(ep, fn,
 *       args...) -> fn(tx, args...) and use rvx__tl_am_claim_tx(tx, chan, len),
 *       rvx__tl_am_publish_tx(tx, chan, body, len, info) and RVX__TL_IN_HANDLER_TX(tx);
 *       rvx__tl_tx(ep) is ep's handle elsewhere. A tl of one transport's handle is the endpoint
 *       and the hooks above; a pair (tl/pair.h) defines its own, one copy of fn per transport,
 *       so that a send branches once. RVX__TL_AM_ZCOPY_ON(ep): RVX__TL_AM_ZCOPY for ep's
 *       transport (a pair's shared memory copies, so its callers register nothing).
 *   rvx__tl_am_wait_room(ep, chan, len) -> body or NULL   (cold: used by replies, which may not fail)
 *   rvx__tl_am_zcopy(ep, chan, hdr, hdrlen, buf, len, lmem, info, req)
 *       a message of hdr (hdrlen <= RVX__TL_AM_ZCOPY_HDR_MAX, copied) followed by len bytes at
 *       buf, sent from buf without a copy where the tl can (lmem: buf's registration), as one
 *       frame (hdrlen + len within a frame). RVX_OK: sent, buf reusable; RVX_INPROGRESS: req
 *       completes when buf may be reused; RVX_ERR_NO_RESOURCE: no room or credit, nothing sent;
 *       another error: the endpoint failed. RVX__TL_AM_ZCOPY is 1 where the body really goes
 *       without a copy (rc_mlx5: header inline, data segment on buf), 0 where it is copied
 *       (shm: no zero-copy between processes; lmem may then be NULL).
 *   More coming (a batch, one doorbell): rvx__tl_am_publish_more (rvx__tl_am_publish_more_tx on
 *       a handle) is am_publish that leaves the NIC untold; rvx__tl_ep_ring(ep) tells it of
 *       everything so left. Any post that commits, a flush and every wait for room tell it too.
 *       Where there is no doorbell (shm) the publish is the ordinary one and the ring does
 *       nothing.
 *   The batch scope (proto/batch.h): rvx__tl_batch_t, a copy of the endpoint's send-queue state
 *       the compiler can keep in registers; rvx__tl_batch_begin(ep, b), _put_short(b, src, len,
 *       raddr, rkey), _end(b) (sync and ring); around any other post in the scope,
 *       rvx__tl_batch_sync(b) (the copy back) and rvx__tl_batch_reload(b).
 *   rvx__tl_ep_flush(ep, req) / rvx__tl_iface_flush(ifc, req)
 *   rvx__tl_progress(ifc) -> events handled; polls RX only in builds that can receive, TX only
 *                            while operations are outstanding, nothing without live endpoints
 *
 * Upcall (defined by the protocols, declared here): a received message is handed to
 *   rvx__rx_deliver(ep, chan, info, body, len)
 * `info` is 16 bits the protocols gave rvx__tl_am_publish; 0xffff is reserved for the tl. */
#ifndef RVX_TL_CONTRACT_H
#define RVX_TL_CONTRACT_H

/* Atomic operations of rvx_atomic32/64. Fetching forms return the value before the operation. */
typedef enum rvx_amo_op {
    RVX_AMO_SET,  /* *p = v */
    RVX_AMO_GET,  /* fetch only */
    RVX_AMO_SWAP, /* *p = v, fetch old */
    RVX_AMO_CAS,  /* if (*p == compare) *p = v; fetch old */
    RVX_AMO_ADD,
    RVX_AMO_SUB,
    RVX_AMO_INC,  /* v ignored */
    RVX_AMO_DEC,  /* v ignored */
    RVX_AMO_AND,
    RVX_AMO_OR,
    RVX_AMO_XOR,
    RVX_AMO_MULT, /* wrapping multiply */
    RVX_AMO_MIN,  /* signed */
    RVX_AMO_MAX,  /* signed */
    RVX_AMO_UMIN, /* unsigned */
    RVX_AMO_UMAX  /* unsigned */
} rvx_amo_op_t;

#define RVX__TL_AM_CHANNELS 2
#define RVX__CHAN_REQUEST   0
#define RVX__CHAN_REPLY     1

#endif /* RVX_TL_CONTRACT_H */
