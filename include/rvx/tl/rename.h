/* rvx/tl/rename.h: the tl contract's names (tl/contract.h) sent to RVX__TL_SUB(name), so that a
 * pair (tl/pair.h) can compile two transports into one build: included once before each
 * transport's header, with RVX__TL_SUB pasting that transport's prefix, and once more with
 * RVX__TL_RENAME_UNDO defined afterwards. No include guard: it is meant to be read several times. */
#ifndef RVX__TL_RENAME_UNDO
#define rvx__tl_ctx              RVX__TL_SUB(tl_ctx)
#define rvx__tl_ctx_t            RVX__TL_SUB(tl_ctx_t)
#define rvx__tl_iface            RVX__TL_SUB(tl_iface)
#define rvx__tl_iface_t          RVX__TL_SUB(tl_iface_t)
#define rvx__tl_ep               RVX__TL_SUB(tl_ep)
#define rvx__tl_ep_t             RVX__TL_SUB(tl_ep_t)
#define rvx__tl_mem              RVX__TL_SUB(tl_mem)
#define rvx__tl_mem_t            RVX__TL_SUB(tl_mem_t)
#define rvx__tl_addr             RVX__TL_SUB(tl_addr)
#define rvx__tl_addr_t           RVX__TL_SUB(tl_addr_t)
#define rvx_rkey                 RVX__TL_SUB(rkey)
#define rvx_rkey_t               RVX__TL_SUB(rkey_t)
#define rvx__tl_ctx_init         RVX__TL_SUB(tl_ctx_init)
#define rvx__tl_ctx_fini         RVX__TL_SUB(tl_ctx_fini)
#define rvx__tl_ctx_bw_mbs       RVX__TL_SUB(tl_ctx_bw_mbs)
#define rvx__tl_iface_init       RVX__TL_SUB(tl_iface_init)
#define rvx__tl_iface_fini       RVX__TL_SUB(tl_iface_fini)
#define rvx__tl_iface_address    RVX__TL_SUB(tl_iface_address)
#define rvx__tl_iface_wireup     RVX__TL_SUB(tl_iface_wireup)
#define rvx__tl_iface_addrs      RVX__TL_SUB(tl_iface_addrs)
#define rvx__tl_ep_connect       RVX__TL_SUB(tl_ep_connect)
#define rvx__tl_ep_disconnect    RVX__TL_SUB(tl_ep_disconnect)
#define rvx__tl_ep_alive         RVX__TL_SUB(tl_ep_alive)
#define rvx__tl_mem_alloc        RVX__TL_SUB(tl_mem_alloc)
#define rvx__tl_mem_reg          RVX__TL_SUB(tl_mem_reg)
#define rvx__tl_mem_dereg        RVX__TL_SUB(tl_mem_dereg)
#define rvx__tl_rkey_pack        RVX__TL_SUB(tl_rkey_pack)
#define rvx__tl_rkey_stamp       RVX__TL_SUB(tl_rkey_stamp)
#define rvx__tl_rkey_unpack      RVX__TL_SUB(tl_rkey_unpack)
#define rvx__tl_rkey_release     RVX__TL_SUB(tl_rkey_release)
#define rvx__tl_put_short        RVX__TL_SUB(tl_put_short)
#define rvx__tl_put_bcopy        RVX__TL_SUB(tl_put_bcopy)
#define rvx__tl_put_zcopy        RVX__TL_SUB(tl_put_zcopy)
#define rvx__tl_get_bcopy        RVX__TL_SUB(tl_get_bcopy)
#define rvx__tl_get_zcopy        RVX__TL_SUB(tl_get_zcopy)
#define rvx__tl_atomic32         RVX__TL_SUB(tl_atomic32)
#define rvx__tl_atomic64         RVX__TL_SUB(tl_atomic64)
#define rvx__tl_am_claim         RVX__TL_SUB(tl_am_claim)
#define rvx__tl_am_publish       RVX__TL_SUB(tl_am_publish)
#define rvx__tl_am_wait_room     RVX__TL_SUB(tl_am_wait_room)
#define rvx__tl_am_zcopy         RVX__TL_SUB(tl_am_zcopy)
#define rvx__tl_ep_flush         RVX__TL_SUB(tl_ep_flush)
#define rvx__tl_iface_flush      RVX__TL_SUB(tl_iface_flush)
#define rvx__tl_progress         RVX__TL_SUB(tl_progress)
#define rvx__rx_deliver          RVX__TL_SUB(rx_deliver)
#else
#undef rvx__tl_ctx
#undef rvx__tl_ctx_t
#undef rvx__tl_iface
#undef rvx__tl_iface_t
#undef rvx__tl_ep
#undef rvx__tl_ep_t
#undef rvx__tl_mem
#undef rvx__tl_mem_t
#undef rvx__tl_addr
#undef rvx__tl_addr_t
#undef rvx_rkey
#undef rvx_rkey_t
#undef rvx__tl_ctx_init
#undef rvx__tl_ctx_fini
#undef rvx__tl_ctx_bw_mbs
#undef rvx__tl_iface_init
#undef rvx__tl_iface_fini
#undef rvx__tl_iface_address
#undef rvx__tl_iface_wireup
#undef rvx__tl_iface_addrs
#undef rvx__tl_ep_connect
#undef rvx__tl_ep_disconnect
#undef rvx__tl_ep_alive
#undef rvx__tl_mem_alloc
#undef rvx__tl_mem_reg
#undef rvx__tl_mem_dereg
#undef rvx__tl_rkey_pack
#undef rvx__tl_rkey_stamp
#undef rvx__tl_rkey_unpack
#undef rvx__tl_rkey_release
#undef rvx__tl_put_short
#undef rvx__tl_put_bcopy
#undef rvx__tl_put_zcopy
#undef rvx__tl_get_bcopy
#undef rvx__tl_get_zcopy
#undef rvx__tl_atomic32
#undef rvx__tl_atomic64
#undef rvx__tl_am_claim
#undef rvx__tl_am_publish
#undef rvx__tl_am_wait_room
#undef rvx__tl_am_zcopy
#undef rvx__tl_ep_flush
#undef rvx__tl_iface_flush
#undef rvx__tl_progress
#undef rvx__rx_deliver
#undef RVX__TL_RENAME_UNDO
#endif
