/* rvx/tl/tx.h: the endpoint as a protocol's hot send sees it, a handle of type rvx__tl_tx_t.
 * The protocols' hot sends (an active message, a short tagged message) are written once over a
 * handle and its hooks (claim, publish, the handler test); RVX__TL_SEND(ep, fn, args...) calls
 * fn(tx, args...) with the handle of endpoint ep; rvx__tl_tx(ep) is ep's handle, and
 * rvx__tl_tx_ep(tx) the endpoint of a handle (for the cold paths). In a build of one transport
 * the handle is the endpoint. A pair (tl/pair.h) reads once which of its transports carries the
 * endpoint and calls fn in one of two copies, each with a handle that names its transport as a
 * constant, so each copy inlines one transport's claim, publish and test: one branch per send,
 * not one per hook. tl/contract.h lists the hooks. */
#ifndef RVX_TL_TX_H
#define RVX_TL_TX_H

#if RVX_PAIR
typedef rvx__pair_tx_t rvx__tl_tx_t;
#define RVX__TL_SEND                 RVX__PAIR_SEND
#define rvx__tl_tx                   rvx__pair_tx
#define rvx__tl_tx_ep(tx)            ((tx).ep)
#define rvx__tl_am_claim_tx          rvx__pair_am_claim_tx
#define rvx__tl_am_publish_tx        rvx__pair_am_publish_tx
#define rvx__tl_am_publish_more_tx   rvx__pair_am_publish_more_tx
#define RVX__TL_IN_HANDLER_TX(tx)    RVX__PAIR_IN_HANDLER_TX(tx)
#define RVX__TL_AM_ZCOPY_ON(ep)      RVX__PAIR_AM_ZCOPY_ON(ep)
#else
typedef rvx__tl_ep_t *rvx__tl_tx_t;
#define RVX__TL_SEND(ep, fn, ...)    fn((ep), __VA_ARGS__)
#define rvx__tl_tx(ep)               (ep)
#define rvx__tl_tx_ep(tx)            (tx)
#ifdef RVX__TL_AM_CLAIM_HOT /* the claim that fails rather than call out, where the tl names one */
#define rvx__tl_am_claim_tx(tx, chan, len) RVX__TL_AM_CLAIM_HOT(tx, chan, len)
#else
#define rvx__tl_am_claim_tx          rvx__tl_am_claim
#endif
#define rvx__tl_am_publish_tx        rvx__tl_am_publish
#define rvx__tl_am_publish_more_tx   rvx__tl_am_publish_more
#ifdef RVX__TL_IN_HANDLER
#define RVX__TL_IN_HANDLER_TX(tx)    RVX__TL_IN_HANDLER(tx)
#endif
/* whether ep sends a zero-copy message body in place (else it copies: register nothing) */
#define RVX__TL_AM_ZCOPY_ON(ep)      RVX__TL_AM_ZCOPY
#endif

#endif /* RVX_TL_TX_H */
