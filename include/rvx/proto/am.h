/* rvx/proto/am.h: GASNet-style active messages with a compile-time handler table.
 *
 * Define the table before including rvx.h, one X(NAME, function) per handler:
 *
 *     #define RVX_AM_HANDLERS(X) X(PING, on_ping) X(PONG, on_pong)
 *     #include <rvx/rvx.h>
 *     static void on_ping(rvx_am_token_t *t, const uint64_t *args, unsigned nargs,
 *                         void *payload, size_t len) { rvx_am_reply_short(t, RVX_AM_PONG, args, 1); }
 *
 * Each NAME becomes the id RVX_AM_NAME. rvx.h declares the functions static, so they are defined
 * in the same file; received messages are dispatched by a switch, so a handler call is a direct
 * call. Kinds:
 *   short   arguments only (up to RVX_AM_MAX_ARGS 64-bit words)
 *   medium  arguments and a payload of up to RVX_AM_MAX_MEDIUM bytes, copied; the handler's
 *           `payload` is valid only during the handler. Larger is RVX_ERR_EXCEEDS_LIMIT, never
 *           a truncation.
 *   long    arguments and a payload placed at raddr in the target's registered memory (through
 *           rkey) before the handler runs; the handler's `payload` points there.
 * Requests return RVX_ERR_NO_RESOURCE when the ring to the peer is full (progress and retry;
 * rvx_am_retry does that). A request handler may reply once, with rvx_am_reply_*; replies never
 * fail for lack of room (they wait). A request (rvx_am_short, _medium, _long) from inside a
 * handler is refused with RVX_ERR_INVALID_PARAM; rvx_progress called from a handler does nothing.
 * From a peer, an unknown handler id or a malformed message is counted in rvx_worker_stats,
 * reported once on stderr, and dropped. Delivery between one pair is in order. */
#ifndef RVX_PROTO_AM_H
#define RVX_PROTO_AM_H

typedef struct rvx_am_token {
    rvx_ep_t *ep;         /* the sender */
    int       is_request; /* replies are allowed only to requests */
    int       replied;
} rvx_am_token_t;

#define RVX__AM_ENUM(NAME, fn) RVX_AM_##NAME,
enum rvx_am_id { RVX_AM_HANDLERS(RVX__AM_ENUM) RVX_AM_NHANDLERS };
#define RVX__AM_PROTO(NAME, fn) \
    static void fn(rvx_am_token_t *, const uint64_t *, unsigned, void *, size_t);
RVX_AM_HANDLERS(RVX__AM_PROTO)
RVX_STATIC_ASSERT(RVX_AM_NHANDLERS <= 256, "at most 256 AM handlers (8-bit id)");

/* The 16-bit info word of a frame: id | kind << 8 | nargs << 10; bits 14-15 (class) are 0 for
 * active messages, leaving room for other protocols. */
#define RVX__AM_SHORT  1u
#define RVX__AM_MEDIUM 2u
#define RVX__AM_LONG   3u
#define RVX__AM_INFO(id, kind, nargs) ((unsigned)(id) | (kind) << 8 | (unsigned)(nargs) << 10)

/* A request from a handler could wait for room that only this handler's return frees. The test:
 * a word the send loads anyway, when the tl names one that is set while handlers run
 * (RVX__TL_IN_HANDLER_TX, tl/tx.h), else the worker's count of running handlers. */
#ifdef RVX__TL_IN_HANDLER_TX
#define RVX__AM_IN_HANDLER(tx) RVX__TL_IN_HANDLER_TX(tx)
#else /* the endpoint around its lane 0, whose handle a send has */
#define RVX__AM_IN_HANDLER(tx) \
    (RVX_CONTAINER_OF(rvx__tl_tx_ep(tx), rvx_ep_t, tl[0])->worker->in_handler)
#endif
RVX_COLD rvx_status_t rvx__am_in_handler(void)
{
    rvx__log("am request from an AM handler: refused (handlers may only reply)");
    return RVX_ERR_INVALID_PARAM;
}

/* A request found no room: RVX_ERR_NO_RESOURCE while the endpoint works, else why it failed.
 * The NIC is told of any batch before it first: the room the caller will wait for comes back
 * only when the peer has seen those frames. */
RVX_COLD rvx_status_t rvx__am_no_room(rvx__tl_ep_t *tl)
{
    rvx_status_t st;
    rvx__tl_ep_ring(tl);
    st = rvx__tl_ep_alive(tl);
    return st == RVX_OK ? RVX_ERR_NO_RESOURCE : st;
}

/* The frame's length, and its body written and sent (the status is the tl's publish's, RVX_OK:
 * returned, its cold path is a jump); with `more` (a constant), the tl may leave the doorbell
 * to the batch's end (proto/batch.h). */
#define RVX__AM_LEN(kind, nargs, plen) \
    (8 * (size_t)(nargs) + ((kind) == RVX__AM_LONG ? 16 : (kind) == RVX__AM_MEDIUM ? (plen) : 0))
RVX_INLINE rvx_status_t rvx__am_fill(rvx__tl_tx_t tx, unsigned chan, unsigned id, unsigned kind,
                                     const uint64_t *args, unsigned nargs, const void *payload,
                                     size_t plen, uint64_t raddr, uint8_t *body, int more)
{
    size_t hlen = 8 * (size_t)nargs, i;
    /* word by word: a count known only at run time (a handler's reply passing on the count it
     * received) then costs a few moves, where memcpy became a string copy (rep movsb) whose
     * start-up is tens of cycles before the reply is out; a constant count unrolls */
    for (i = 0; i < nargs; i++) memcpy(body + 8 * i, args + i, 8);
    if (kind == RVX__AM_MEDIUM) {
        if (plen) memcpy(body + hlen, payload, plen);
    } else if (kind == RVX__AM_LONG) {
        uint64_t l = plen;
        memcpy(body + hlen, &raddr, 8);
        memcpy(body + hlen + 8, &l, 8);
    }
    if (more)
        return rvx__tl_am_publish_more_tx(tx, chan, body, RVX__AM_LEN(kind, nargs, plen),
                                          RVX__AM_INFO(id, kind, nargs));
    return rvx__tl_am_publish_tx(tx, chan, body, RVX__AM_LEN(kind, nargs, plen),
                                 RVX__AM_INFO(id, kind, nargs));
}

/* The hot path's claim failed: claim again with whatever cold work the tl does for it (a credit
 * refresh), else no room (requests) or wait for it (replies). It sends at once even for a "more"
 * call: telling the NIC early is always allowed. */
RVX_COLD rvx_status_t rvx__am_send_cold(rvx__tl_ep_t *tl, unsigned chan, unsigned id, unsigned kind,
                                        const uint64_t *args, unsigned nargs, const void *payload,
                                        size_t plen, uint64_t raddr)
{
    size_t len = RVX__AM_LEN(kind, nargs, plen);
    uint8_t *body = (uint8_t *)rvx__tl_am_claim(tl, chan, len);
    if (!body) {
        if (chan == RVX__CHAN_REQUEST) return rvx__am_no_room(tl);
        body = (uint8_t *)rvx__tl_am_wait_room(tl, chan, len);
        if (!body) { /* a reply waits for room until the endpoint fails */
            rvx_status_t st = rvx__tl_ep_alive(tl);
            return st == RVX_OK ? RVX_ERR_PEER_FAILED : st;
        }
    }
    return rvx__am_fill(rvx__tl_tx(tl), chan, id, kind, args, nargs, payload, plen, raddr, body, 0);
}

/* A short message's cold path takes its (at most two) arguments by value: a pointer to the
 * caller's words would keep them in memory, in a stack frame, on the hot path too. They come
 * right after ep, where a caller's first words arrive, so the hot path need not move them. */
RVX_COLD rvx_status_t rvx__am_short_cold(rvx__tl_ep_t *tl, uint64_t a0, uint64_t a1, unsigned chan,
                                         unsigned id, unsigned nargs)
{
    uint64_t a[2];
    a[0] = a0;
    a[1] = a1;
    return rvx__am_send_cold(tl, chan, id, RVX__AM_SHORT, a, nargs, NULL, 0, 0);
}

/* The send over the endpoint's handle (tl/tx.h): the claim of hot paths, which fails rather than
 * call out, then the body and the publish. The hot path makes no call that returns into it (the
 * cold ones are jumps), so it needs no stack frame. */
RVX_INLINE rvx_status_t rvx__am_send_tx(rvx__tl_tx_t tx, unsigned chan, unsigned id,
                                        unsigned kind, const uint64_t *args, unsigned nargs,
                                        const void *payload, size_t plen, uint64_t raddr, int more)
{
    uint8_t *body;

    if (chan == RVX__CHAN_REQUEST && RVX_UNLIKELY(RVX__AM_IN_HANDLER(tx)))
        return rvx__am_in_handler();
    body = (uint8_t *)rvx__tl_am_claim_tx(tx, chan, RVX__AM_LEN(kind, nargs, plen));
    if (RVX_UNLIKELY(!body)) {
        if (kind == RVX__AM_SHORT && nargs <= 2)
            return rvx__am_short_cold(rvx__tl_tx_ep(tx), nargs > 0 ? args[0] : 0,
                                      nargs > 1 ? args[1] : 0, chan, id, nargs);
        return rvx__am_send_cold(rvx__tl_tx_ep(tx), chan, id, kind, args, nargs, payload, plen, raddr);
    }
    return rvx__am_fill(tx, chan, id, kind, args, nargs, payload, plen, raddr, body, more);
}

/* All kinds, both channels: with constant arguments the checks and copies fold away. */
RVX_INLINE rvx_status_t rvx__am_send(rvx_ep_t *ep, unsigned chan, unsigned id, unsigned kind,
                                     const uint64_t *args, unsigned nargs, const void *payload,
                                     size_t plen, uint64_t raddr, int more)
{
    if (RVX_UNLIKELY(id >= RVX_AM_NHANDLERS || nargs > RVX_AM_MAX_ARGS || (nargs && !args) ||
                     (plen && !payload)))
        return RVX_ERR_INVALID_PARAM;
    if (kind == RVX__AM_MEDIUM && RVX_UNLIKELY(plen > RVX_AM_MAX_MEDIUM)) return RVX_ERR_EXCEEDS_LIMIT;
#if RVX_DEBUG
    if (!ep) return RVX_ERR_INVALID_PARAM;
#endif
    return RVX__TL_SEND(&ep->tl[0], rvx__am_send_tx, chan, id, kind, args, nargs, payload, plen,
                        raddr, more);
}

/* Long: the payload goes first, as a put through rkey (bounds-checked); the header follows on
 * the same ordered endpoint, so the handler sees the payload in place. */
RVX_INLINE rvx_status_t rvx__am_send_long(rvx_ep_t *ep, unsigned chan, unsigned id,
                                          const uint64_t *args, unsigned nargs,
                                          const void *payload, size_t plen, uint64_t raddr,
                                          const rvx_rkey_t *rkey)
{
    rvx_status_t st;
    if (RVX_UNLIKELY(!rkey || id >= RVX_AM_NHANDLERS || nargs > RVX_AM_MAX_ARGS))
        return RVX_ERR_INVALID_PARAM;
#if RVX_DEBUG
    if (rvx__rkey_foreign(ep, rkey)) return RVX_ERR_INVALID_PARAM;
#endif
    if (chan == RVX__CHAN_REQUEST && RVX_UNLIKELY(RVX__AM_IN_HANDLER(rvx__tl_tx(&ep->tl[0]))))
        return rvx__am_in_handler(); /* before the payload moves */
    if (chan == RVX__CHAN_REQUEST &&
        RVX_UNLIKELY(!rvx__tl_am_claim(&ep->tl[0], chan, 8 * (size_t)nargs + 16)))
        return rvx__am_no_room(&ep->tl[0]); /* check room first: a failed send moves no payload */
    st = rvx_put(ep, payload, plen, raddr, rkey);
    if (st < 0) return st;
    return rvx__am_send(ep, chan, id, RVX__AM_LONG, args, nargs, payload, plen, raddr, 0);
}

RVX_INLINE rvx_status_t rvx_am_short(rvx_ep_t *ep, unsigned id, const uint64_t *args, unsigned nargs)
{
    return rvx__am_send(ep, RVX__CHAN_REQUEST, id, RVX__AM_SHORT, args, nargs, NULL, 0, 0, 0);
}

RVX_INLINE rvx_status_t rvx_am_medium(rvx_ep_t *ep, unsigned id, const uint64_t *args,
                                      unsigned nargs, const void *payload, size_t len)
{
    return rvx__am_send(ep, RVX__CHAN_REQUEST, id, RVX__AM_MEDIUM, args, nargs, payload, len, 0, 0);
}

RVX_INLINE rvx_status_t rvx_am_long(rvx_ep_t *ep, unsigned id, const uint64_t *args,
                                    unsigned nargs, const void *payload, size_t len,
                                    uint64_t raddr, const rvx_rkey_t *rkey)
{
    return rvx__am_send_long(ep, RVX__CHAN_REQUEST, id, args, nargs, payload, len, raddr, rkey);
}

RVX_COLD rvx_status_t rvx__am_bad_reply(const rvx_am_token_t *t)
{
    rvx__log("am reply: %s", t && t->replied ? "a request handler may reply only once"
                                             : "replies are allowed only in request handlers");
    return RVX_ERR_INVALID_PARAM;
}

#define RVX__AM_REPLY_CHECK(t) \
    if (RVX_UNLIKELY(!(t) || !(t)->is_request || (t)->replied)) return rvx__am_bad_reply(t)

RVX_INLINE rvx_status_t rvx_am_reply_short(rvx_am_token_t *t, unsigned id, const uint64_t *args,
                                           unsigned nargs)
{
    RVX__AM_REPLY_CHECK(t);
    t->replied = 1;
    return rvx__am_send(t->ep, RVX__CHAN_REPLY, id, RVX__AM_SHORT, args, nargs, NULL, 0, 0, 0);
}

RVX_INLINE rvx_status_t rvx_am_reply_medium(rvx_am_token_t *t, unsigned id, const uint64_t *args,
                                            unsigned nargs, const void *payload, size_t len)
{
    RVX__AM_REPLY_CHECK(t);
    t->replied = 1;
    return rvx__am_send(t->ep, RVX__CHAN_REPLY, id, RVX__AM_MEDIUM, args, nargs, payload, len, 0, 0);
}

RVX_INLINE rvx_status_t rvx_am_reply_long(rvx_am_token_t *t, unsigned id, const uint64_t *args,
                                          unsigned nargs, const void *payload, size_t len,
                                          uint64_t raddr, const rvx_rkey_t *rkey)
{
    RVX__AM_REPLY_CHECK(t);
    t->replied = 1;
    return rvx__am_send_long(t->ep, RVX__CHAN_REPLY, id, args, nargs, payload, len, raddr, rkey);
}

/* Retry a request while the ring is full, progressing the worker in between; the final status
 * goes to `st`:   rvx_status_t st; rvx_am_retry(w, st, rvx_am_short(ep, RVX_AM_PING, a, 1)); */
#define rvx_am_retry(worker, st, call)                                                        \
    do {                                                                                      \
        unsigned rvx__spins_ = 0;                                                             \
        while (((st) = (call)) == RVX_ERR_NO_RESOURCE)                                        \
            if (!rvx_progress(worker)) rvx__backoff(&rvx__spins_);                            \
    } while (0)

/* ---- receive side --------------------------------------------------------------------------- */

enum { RVX__BAD_UNKNOWN_ID, RVX__BAD_FRAME, RVX__BAD_LONG_TARGET };

#define RVX__AM_CASE(NAME, fn) \
    case RVX_AM_##NAME: fn(&tok, args, nargs, payload, plen); break;

/* An AM frame (class 0) handed over by proto/rx.h; frames of other classes that reach it are
 * counted as malformed. */
RVX_INLINE void rvx__am_rx(rvx_ep_t *ep, unsigned chan, unsigned info, void *body, size_t len)
{
    rvx_worker_t *w = ep->worker;
    unsigned id = info & 0xff, kind = (info >> 8) & 3, nargs = (info >> 10) & 15;
    size_t hlen = 8 * (size_t)nargs, plen = 0;
    const uint64_t *args = (const uint64_t *)body;
    void *payload = NULL;
    rvx_am_token_t tok;

    if ((info >> 14) || !kind || nargs > RVX_AM_MAX_ARGS || len < hlen ||
        (kind == RVX__AM_SHORT && len != hlen) || (kind == RVX__AM_LONG && len != hlen + 16) ||
        (kind == RVX__AM_MEDIUM && len - hlen > RVX_AM_MAX_MEDIUM)) {
        w->stats.am_bad_frame++;
        rvx__report_bad(w, RVX__BAD_FRAME, "dropped a malformed AM frame from rank %d (info %#x)",
                        ep->rank, (int)info);
        return;
    }
    if (kind == RVX__AM_MEDIUM) {
        plen = len - hlen;
        payload = plen ? (uint8_t *)body + hlen : NULL;
    } else if (kind == RVX__AM_LONG) {
        uint64_t raddr;
        memcpy(&raddr, (uint8_t *)body + hlen, 8);
        memcpy(&plen, (uint8_t *)body + hlen + 8, 8);
        if (!rvx__ctx_owns(w->ctx, raddr, plen)) {
            w->stats.am_bad_long_target++;
            rvx__report_bad(w, RVX__BAD_LONG_TARGET, "dropped a long AM from rank %d whose "
                            "payload is not in a registered region (handler %d)", ep->rank, (int)id);
            return;
        }
        payload = (void *)(uintptr_t)raddr;
    }
    tok.ep = ep;
    tok.is_request = chan == RVX__CHAN_REQUEST;
    tok.replied = 0;
    w->in_handler++;
    switch (id) {
        RVX_AM_HANDLERS(RVX__AM_CASE)
    default:
        w->stats.am_unknown_id++;
        rvx__report_bad(w, RVX__BAD_UNKNOWN_ID, "dropped an AM from rank %d for unknown handler "
                        "id %d", ep->rank, (int)id);
    }
    w->in_handler--;
}

#endif /* RVX_PROTO_AM_H */
