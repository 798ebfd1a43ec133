/* rvx/proto/hooks.h: the one place where the protocols of the build meet core's calls (core.h
 * declares these, protocols define their parts above this file): a worker's protocol state set
 * up and torn down, an endpoint's protocol operations ended before it goes, and rvx_progress.
 * Active messages, RMA and atomics keep no per-worker state; tag matching does. */
#ifndef RVX_PROTO_HOOKS_H
#define RVX_PROTO_HOOKS_H

static rvx_status_t rvx__proto_worker_init(rvx_worker_t *w)
{
#if RVX_TAG
    return rvx__tag_worker_init(w);
#else
    (void)w;
    return RVX_OK;
#endif
}

static void rvx__proto_worker_fini(rvx_worker_t *w)
{
#if RVX_TAG
    rvx__tag_worker_fini(w);
#else
    (void)w;
#endif
}

static void rvx__proto_ep_close(rvx_ep_t *ep)
{
#if RVX_TAG
    rvx__tag_ep_destroy(ep); /* its pending tag operations end with RVX_ERR_CANCELED */
#else
    (void)ep;
#endif
}

/* Handle what has arrived and what has completed; returns the number of events. A few
 * instructions when there is nothing to do. Not to be called from an AM handler. In tag builds,
 * pending rendezvous steps run too, only while some are in flight (one compare otherwise), and
 * an idle call with receives posted now and then asks whether their senders still live. */
RVX_INLINE int rvx_progress(rvx_worker_t *w)
{
#if RVX_TAG
    if (RVX_UNLIKELY(w->proto_pending)) return rvx__tag_progress(w); /* polls the tl, then steps */
    {
        int n = rvx__tl_progress(&w->iface[0]);
        if (RVX_UNLIKELY(n == 0) && rvx__tag_posted(w)) return rvx__tag_idle(w);
        return n;
    }
#else
    return rvx__tl_progress(&w->iface[0]);
#endif
}

#endif /* RVX_PROTO_HOOKS_H */
