/* rvx/proto/rx.h: where a received frame goes. The tl hands every frame to rvx__rx_deliver; bits
 * 14-15 of its info word name the protocol class:
 *   0  active messages (proto/am.h)          1  tag matching (proto/tag.h)     2, 3  unused
 * Only the classes compiled into the build are dispatched; a frame of any other class is counted
 * as malformed (in am_bad_frame when active messages are built, else in tag_bad_frame) and
 * dropped. With one class the dispatch is a compare the compiler keeps off the hot path. The
 * function is always inline: the tl's poll loop reaches a protocol's fast path with no call. */
#ifndef RVX_PROTO_RX_H
#define RVX_PROTO_RX_H

#define RVX__CLASS_TAG 1u /* tag frames: bits 14-15 of the info word */

RVX_INLINE void rvx__rx_deliver(rvx__tl_ep_t *tlep, unsigned chan, unsigned info, void *body,
                                size_t len)
{
    rvx_ep_t *ep = RVX_CONTAINER_OF(tlep, rvx_ep_t, tl); /* lane 0: where frames arrive */
#if RVX_TAG
    if (RVX_LIKELY(info == (RVX__TAG_CLASS | RVX__TF_EAGER))) { /* the common frame, first */
        rvx__tag_rx_eager_fast(ep, chan, body, len);
        return;
    }
    if (RVX_LIKELY((info >> 14) == RVX__CLASS_TAG)) {
        rvx__tag_rx(ep, chan, info, body, len);
        return;
    }
#endif
#if RVX_AM
    rvx__am_rx(ep, chan, info, body, len); /* checks the class bits itself */
#else
    rvx__tag_bad(ep, "dropped a frame of protocol class %d from rank %d (not in this build)",
                 (int)(info >> 14));
    (void)chan; (void)body; (void)len;
#endif
}

#endif /* RVX_PROTO_RX_H */
