/* rvx/tl/path.h: the paths of a build. A build of one transport has one; a pair (tl/pair.h) has
 * two, and an endpoint's operations take the one RVX__TL_PATH(ep) names. The protocols' hot sends
 * read the path once and call the _on forms with it as a constant, so each path inlines its own
 * claim, publish and handler test: one branch per send, not one per call into the tl. A build of one
 * transport gets the defaults below (tl/contract.h lists the hooks). */
#ifndef RVX_TL_PATH_H
#define RVX_TL_PATH_H

#if RVX_PAIR /* two paths: the pair's (tl/pair.h) */
#define RVX__TL_PATH(ep)                 RVX__PAIR_PATH(ep)
#define rvx__tl_am_claim_on              rvx__pair_am_claim_on
#define rvx__tl_am_publish_on            rvx__pair_am_publish_on
#define rvx__tl_am_publish_more_on       rvx__pair_am_publish_more_on
#define RVX__TL_IN_HANDLER_ON(ep, path)  RVX__PAIR_IN_HANDLER_ON(ep, path)
#define RVX__TL_AM_ZCOPY_ON(ep)          RVX__PAIR_AM_ZCOPY_ON(ep)
#else
#define RVX__TL_PATH(ep) 0u
#ifdef RVX__TL_AM_CLAIM_HOT /* the claim that fails rather than call out, where the tl names one */
#define rvx__tl_am_claim_on(ep, path, chan, len) RVX__TL_AM_CLAIM_HOT(ep, chan, len)
#else
#define rvx__tl_am_claim_on(ep, path, chan, len) rvx__tl_am_claim(ep, chan, len)
#endif
#define rvx__tl_am_publish_on(ep, path, chan, body, len, info) \
    rvx__tl_am_publish(ep, chan, body, len, info)
#define rvx__tl_am_publish_more_on(ep, path, chan, body, len, info) \
    rvx__tl_am_publish_more(ep, chan, body, len, info)
#ifdef RVX__TL_IN_HANDLER
#define RVX__TL_IN_HANDLER_ON(ep, path) RVX__TL_IN_HANDLER(ep)
#endif
/* whether ep's path sends a zero-copy message body in place (else it copies: register nothing) */
#define RVX__TL_AM_ZCOPY_ON(ep) RVX__TL_AM_ZCOPY
#endif

#endif /* RVX_TL_PATH_H */
