/* t_tag_bad: tag frames a correct peer never sends are counted (tag_bad_frame), reported once and
 * dropped, and what follows them still works. An AM + tag build: active messages and tag messages
 * share the rings, and a frame of an unknown class goes to the AM counter.
 * Rank 0 writes raw frames below the tag layer into rank 1's ring: unknown types, stray bits,
 * short bodies, fragments without a first one or longer than announced, a first fragment while
 * another message is being assembled, rendezvous frames of the wrong length or naming ids that do
 * not exist, eager frames on the reply channel and control frames on the request channel (on
 * shm and on rc_mlx5). Then a good eager message, an AM, and the message whose assembly was attacked. */
#define RVX_TAG 1
#define RVX_AM_HANDLERS(X) X(HELLO, on_hello)
#include <rvx/rvx.h>
#include "testlib.h"

static volatile int hellos;
static void on_hello(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
    hellos++;
}

static int injected;

static void inject(rvx_ep_t *ep, unsigned chan, unsigned info, const void *body, size_t len, int bad)
{
    void *p = rvx__tl_am_claim(&ep->tl[0], chan, len);
    T_CHECK(p != NULL, "no room to inject");
    if (!p) return;
    if (len) memcpy(p, body, len);
    rvx__tl_am_publish(&ep->tl[0], chan, p, len, info);
    injected += bad;
}

#define TF(type) (RVX__TAG_CLASS | (type))

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep;
    int me;
    static unsigned char b[RVX_AM_MAX_MEDIUM], msg[RVX_AM_MAX_MEDIUM];
    const size_t first = RVX_AM_MAX_MEDIUM - 16, mlen = first + 10;

    t_spawn(argc, argv, 2, 60);
    me = t_start(&ctx, &w);
    T_OK(rvx_ep_create(w, 1 - me, &ep));
    T_OK(rvx_barrier(ctx));
    t_fill(msg, sizeof(msg), 5);
    if (me == 0) {
        uint64_t v;
        unsigned type;
        memset(b, 0, sizeof(b));
        inject(ep, RVX__CHAN_REQUEST, TF(0), b, 8, 1);                       /* type 0 */
        inject(ep, RVX__CHAN_REQUEST, TF(15), b, 8, 1);                      /* unknown type */
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_EAGER) | 1u << 8, b, 16, 1); /* stray bits */
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_EAGER), b, 4, 1);           /* shorter than a tag */
        v = 5;
        memcpy(b + 8, &v, 8);
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_FIRST), b, 26, 1);          /* total < this frame */
        v = (uint64_t)1 << 41;
        memcpy(b + 8, &v, 8);
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_FIRST), b, 26, 1);          /* absurd total */
        v = ((uint64_t)1 << 40) - 1;
        memcpy(b + 8, &v, 8);
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_FIRST), b, 26, 1);          /* a total to allocate */
        v = RVX_RNDV_THRESH_BYTES;
        memcpy(b + 8, &v, 8);
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_FIRST), b, 26, 1);          /* not eager any more */
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_MID), b, 10, 1);            /* no first fragment */
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_RTS), b, 10, 1);            /* short RTS */
        v = 100000;
        memcpy(b + 8, &v, 8);
        memset(b + 16, 0, 8);
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_RTS), b, RVX__RNDV_RTS_LEN(100000), 1); /* sender id 0 */
        /* control and data frames naming an id that was never handed out */
        memset(b, 0, 64);
        v = 12345;
        memcpy(b, &v, 4);
        for (type = RVX__TF_DATA; type <= RVX__TF_KEY; type++) /* KEY: PIPELINE's, with no key */
            inject(ep, type == RVX__TF_DATA ? RVX__CHAN_REQUEST : RVX__CHAN_REPLY, TF(type), b,
                   type == RVX__TF_ATS || type == RVX__TF_FIN ? 8 : type == RVX__TF_RTR ? RVX__RNDV_RTR_LEN
                   : type == RVX__TF_KEY ? 16 : 40, 1);
        inject(ep, RVX__CHAN_REQUEST, 2u << 14, b, 8, 0);                    /* class 2: an AM-side count */
        /* frames on the wrong channel: an eager message of the tag the receiver waits for, with
         * other data, on the reply channel (it would match first); control frames on the
         * request channel */
        v = 99;
        memcpy(b, &v, 8);
        memset(b + 8, 0xee, 40);
        inject(ep, RVX__CHAN_REPLY, TF(RVX__TF_EAGER), b, 8 + 20, 1);
        inject(ep, RVX__CHAN_REPLY, TF(RVX__TF_EAGER), b, 8 + 40, 1);
        memset(b, 0, 64);
        v = 12345;
        memcpy(b, &v, 4);
        for (type = RVX__TF_ATS; type <= RVX__TF_KEY; type++)
            inject(ep, RVX__CHAN_REQUEST, TF(type), b,
                   type == RVX__TF_ATS || type == RVX__TF_FIN ? 8 : type == RVX__TF_RTR ? RVX__RNDV_RTR_LEN : 16, 1);
        /* a fragmented message, attacked while it is assembled */
        v = 77;
        memcpy(b, &v, 8);
        v = mlen;
        memcpy(b + 8, &v, 8);
        memcpy(b + 16, msg, first);
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_FIRST), b, RVX_AM_MAX_MEDIUM, 0);
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_FIRST), b, RVX_AM_MAX_MEDIUM, 1); /* a second first */
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_MID), msg + first, 11, 1);        /* one byte too many */
        inject(ep, RVX__CHAN_REQUEST, TF(RVX__TF_MID), msg + first, 10, 0);        /* the real rest */
        T_OK(rvx_am_short(ep, RVX_AM_HELLO, NULL, 0));
        T_STATUS(rvx_tag_send(ep, msg, 20, 99, NULL), RVX_OK);
        T_OK(rvx_allgather(ctx, &injected, sizeof(injected), b));
    } else {
        rvx_request_t req;
        rvx_tag_info_t info;
        rvx_worker_stats_t s;
        int all[2];
        static unsigned char got[RVX_AM_MAX_MEDIUM + 64];
        memset(got, 0, sizeof(got));
        T_STATUS(rvx_complete(w, rvx_tag_recv(w, got, 20, 99, ~0ull, &req, &info), &req), RVX_OK);
        T_CHECK(t_verify(got, 20, 5) < 0 && info.sender == 0, "the good message after the bad ones");
        T_CHECK(hellos == 1, "the AM between them (%d)", hellos);
        T_STATUS(rvx_complete(w, rvx_tag_recv(w, got, sizeof(got), 77, ~0ull, &req, &info), &req), RVX_OK);
        T_CHECK(info.length == mlen && t_verify(got, mlen, 5) < 0, "the attacked fragmented message: length %zu",
                info.length);
        T_OK(rvx_allgather(ctx, &injected, sizeof(injected), all));
        rvx_worker_stats(w, &s);
        T_CHECK(s.tag_bad_frame == (uint64_t)all[0], "tag frames counted as bad: %llu of %d",
                (unsigned long long)s.tag_bad_frame, all[0]);
        T_CHECK(s.am_bad_frame == 1 && !s.am_unknown_id, "class-2 frame counted by the AM side: %llu",
                (unsigned long long)s.am_bad_frame);
        T_CHECK(w->proto_pending == 0, "operations left in flight: %u", w->proto_pending);
    }
    T_OK(rvx_barrier(ctx));
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return t_exit();
}
