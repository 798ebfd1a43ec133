/* rvx/tl/bind.h: the build's transport, bound once to the contract's names (tl/contract.h).
 *
 * Every transport defines the contract under its own prefix, in its own folder:
 * rvx__shm_put_short (tl/shm/), rvx__rc_put_short (tl/rc/), rvx__dc_put_short (tl/dc/),
 * rvx__pair_put_short (tl/pair.h); tl/shm.h, tl/rc_mlx5.h and tl/dc_mlx5.h are their indexes.
 * What rc_mlx5 and dc_mlx5 share (the device context, memory regions, remote keys, the batch
 * scope) is defined once under the shared layer's prefix, rvx__mlx5_ (tl/mlx5/setup.h, rkey.h,
 * batch.h). The core and the
 * protocols are written against rvx__tl_*; this file, read after the transport's header, says
 * which of those names each rvx__tl_* is. So `rvx__tl_put_short` here, `rvx__rc_put_short` in a
 * debugger and in the transport's source are one function. */
#ifndef RVX_TL_BIND_H
#define RVX_TL_BIND_H

#if RVX_PAIR
#define RVX__TL_OWN(x) rvx__pair_##x /* the transport's own names */
#define RVX__TL_DEV(x) rvx__pair_##x /* device, memory, keys and the batch scope */
#elif RVX_TL == RVX_TL_SHM
#define RVX__TL_OWN(x) rvx__shm_##x
#define RVX__TL_DEV(x) rvx__shm_##x
#elif RVX_TL == RVX_TL_RC_MLX5
#define RVX__TL_OWN(x) rvx__rc_##x
#define RVX__TL_DEV(x) rvx__mlx5_##x
#elif RVX_TL == RVX_TL_DC_MLX5
#define RVX__TL_OWN(x) rvx__dc_##x
#define RVX__TL_DEV(x) rvx__mlx5_##x
#endif

/* ---- types ---- */
typedef RVX__TL_DEV(ctx_t)   rvx__tl_ctx_t;
typedef RVX__TL_DEV(mem_t)   rvx__tl_mem_t;
typedef RVX__TL_DEV(rkey_t)  rvx_rkey_t;
typedef RVX__TL_OWN(iface_t) rvx__tl_iface_t;
typedef RVX__TL_OWN(ep_t)    rvx__tl_ep_t;
typedef RVX__TL_OWN(addr_t)  rvx__tl_addr_t;
typedef RVX__TL_DEV(batch_t) rvx__tl_batch_t;

/* ---- set-up ---- */
#define rvx__tl_ctx_init      RVX__TL_DEV(ctx_init)
#define rvx__tl_ctx_fini      RVX__TL_DEV(ctx_fini)
#define rvx__tl_ctx_bw_mbs    RVX__TL_DEV(ctx_bw_mbs)
#define rvx__tl_mem_alloc     RVX__TL_DEV(mem_alloc)
#define rvx__tl_mem_reg       RVX__TL_DEV(mem_reg)
#define rvx__tl_mem_dereg     RVX__TL_DEV(mem_dereg)
#define rvx__tl_rkey_pack     RVX__TL_DEV(rkey_pack)
#define rvx__tl_rkey_stamp    RVX__TL_DEV(rkey_stamp)
#define rvx__tl_rkey_release  RVX__TL_DEV(rkey_release)
#define rvx__tl_rkey_ptr      RVX__TL_DEV(rkey_ptr)
#define rvx__tl_rkey_unpack   RVX__TL_OWN(rkey_unpack)
#define rvx__tl_iface_init    RVX__TL_OWN(iface_init)
#define rvx__tl_iface_fini    RVX__TL_OWN(iface_fini)
#define rvx__tl_iface_address RVX__TL_OWN(iface_address)
#define rvx__tl_iface_wireup  RVX__TL_OWN(iface_wireup)
#define rvx__tl_ep_connect    RVX__TL_OWN(ep_connect)
#define rvx__tl_ep_disconnect RVX__TL_OWN(ep_disconnect)
#define rvx__tl_ep_alive      RVX__TL_OWN(ep_alive)

/* ---- fast path ---- */
#define rvx__tl_put_short     RVX__TL_OWN(put_short)
#define rvx__tl_put_bcopy     RVX__TL_OWN(put_bcopy)
#define rvx__tl_put_zcopy     RVX__TL_OWN(put_zcopy)
#define rvx__tl_get_bcopy     RVX__TL_OWN(get_bcopy)
#define rvx__tl_get_zcopy     RVX__TL_OWN(get_zcopy)
#define rvx__tl_atomic32      RVX__TL_OWN(atomic32)
#define rvx__tl_atomic64      RVX__TL_OWN(atomic64)
#define rvx__tl_am_claim      RVX__TL_OWN(am_claim)
#define rvx__tl_am_publish    RVX__TL_OWN(am_publish)
#define rvx__tl_am_publish_more RVX__TL_OWN(am_publish_more)
#define rvx__tl_ep_ring       RVX__TL_OWN(ep_ring)
#define rvx__tl_batch_begin   RVX__TL_DEV(batch_begin)
#define rvx__tl_batch_put_short RVX__TL_DEV(batch_put_short)
#define rvx__tl_batch_sync    RVX__TL_DEV(batch_sync)
#define rvx__tl_batch_reload  RVX__TL_DEV(batch_reload)
#define rvx__tl_batch_end     RVX__TL_DEV(batch_end)
#define rvx__tl_am_wait_room  RVX__TL_OWN(am_wait_room)
#define rvx__tl_am_zcopy      RVX__TL_OWN(am_zcopy)
#define rvx__tl_ep_flush      RVX__TL_OWN(ep_flush)
#define rvx__tl_iface_flush   RVX__TL_OWN(iface_flush)
#define rvx__tl_progress      RVX__TL_OWN(progress)

/* ---- constants and the optional hooks, where the transport has them ---- */
#if RVX_PAIR
#define RVX__TL_RKEY_PACKED_SIZE RVX__PAIR_RKEY_PACKED_SIZE
#define RVX__TL_ADDR_SIZE        RVX__PAIR_ADDR_SIZE
#define RVX__TL_AM_ZCOPY         RVX__PAIR_AM_ZCOPY
#define RVX__TL_AM_ZCOPY_HDR_MAX RVX__PAIR_AM_ZCOPY_HDR_MAX
#ifdef RVX__PAIR_ADDR_KEPT
#define RVX__TL_ADDR_KEPT        RVX__PAIR_ADDR_KEPT
#define rvx__tl_iface_addrs      rvx__pair_iface_addrs
#endif
#define RVX__TL_IFACE_INIT_NODE  1
#define rvx__tl_iface_init_node  rvx__pair_iface_init_node
#ifdef RVX__PAIR_IFACE_LEAVE
#define RVX__TL_IFACE_LEAVE      1
#define rvx__tl_iface_leave      rvx__pair_iface_leave
#endif
#ifdef RVX__PAIR_IFACE_FLUSHED
#define RVX__TL_IFACE_FLUSHED    1
#define rvx__tl_iface_flushed    rvx__pair_iface_flushed
#endif
#elif RVX_TL == RVX_TL_SHM
#define RVX__TL_IFACE_FLUSHED    1
#define rvx__tl_iface_flushed    rvx__shm_iface_flushed
#define RVX__TL_RKEY_PACKED_SIZE RVX__SHM_RKEY_PACKED_SIZE
#define RVX__TL_ADDR_SIZE        RVX__SHM_ADDR_SIZE
#define RVX__TL_AM_ZCOPY         RVX__SHM_AM_ZCOPY
#define RVX__TL_AM_ZCOPY_HDR_MAX RVX__SHM_AM_ZCOPY_HDR_MAX
#elif RVX_TL == RVX_TL_RC_MLX5
#define RVX__TL_RKEY_PACKED_SIZE RVX__MLX5_RKEY_PACKED_SIZE
#define RVX__TL_ADDR_SIZE        RVX__RC_ADDR_SIZE
#define RVX__TL_ADDR_KEPT        RVX__RC_ADDR_KEPT
#define rvx__tl_iface_addrs      rvx__rc_iface_addrs
#define RVX__TL_AM_ZCOPY         RVX__RC_AM_ZCOPY
#define RVX__TL_AM_ZCOPY_HDR_MAX RVX__RC_AM_ZCOPY_HDR_MAX
#define RVX__TL_IN_HANDLER       RVX__RC_IN_HANDLER
#define RVX__TL_IFACE_FLUSHED    1
#define rvx__tl_iface_flushed    rvx__rc_iface_flushed
#elif RVX_TL == RVX_TL_DC_MLX5
#define RVX__TL_RKEY_PACKED_SIZE RVX__MLX5_RKEY_PACKED_SIZE
#define RVX__TL_ADDR_SIZE        RVX__DC_ADDR_SIZE
#define RVX__TL_ADDR_KEPT        RVX__DC_ADDR_KEPT
#define rvx__tl_iface_addrs      rvx__dc_iface_addrs
#define RVX__TL_AM_ZCOPY         RVX__DC_AM_ZCOPY
#define RVX__TL_AM_ZCOPY_HDR_MAX RVX__DC_AM_ZCOPY_HDR_MAX
#define RVX__TL_IN_HANDLER       RVX__DC_IN_HANDLER
#define RVX__TL_AM_CLAIM_HOT     RVX__DC_AM_CLAIM_HOT
#define RVX__TL_IFACE_LEAVE      1
#define rvx__tl_iface_leave      rvx__dc_iface_leave
#define RVX__TL_IFACE_FLUSHED    1
#define rvx__tl_iface_flushed    rvx__dc_iface_flushed
#endif

/* ---- the upcall: the transport's received frames go to the protocols (proto/rx.h) ---- */
#if RVX_CAN_RECEIVE
RVX_INLINE void rvx__rx_deliver(rvx__tl_ep_t *ep, unsigned chan, unsigned info, void *body,
                                size_t len);
#if !RVX_PAIR /* a pair defines its transports' upcalls itself */
RVX_INLINE void RVX__TL_OWN(rx_deliver)(rvx__tl_ep_t *ep, unsigned chan, unsigned info, void *body,
                                        size_t len)
{
    rvx__rx_deliver(ep, chan, info, body, len);
}
#endif
#endif

#endif /* RVX_TL_BIND_H */
