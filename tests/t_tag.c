/* t_tag: tag matching between three processes, every protocol path, data checked byte for byte.
 * Built once per rendezvous protocol (t_tag_get, t_tag_put, t_tag_am, t_tag_pipeline); the plain
 * t_tag pins the eager/rendezvous switch at 32 KiB so that long chains of eager fragments run too.
 * Sections (separated by barriers; each rank sends to the next rank and to itself):
 *  A  every size across every threshold +-1 (inline, one frame, fragment counts, the switch,
 *     pipeline phases and chunks), receives posted first (expected), then sent first (unexpected)
 *  B  many outstanding messages of mixed sizes, half the receives posted late
 *  C  MPI ordering: one tag, eager and rendezvous interleaved, must match in the order sent
 *  D  any source and wildcards: two senders, one receiver matching on a masked tag
 *  E  truncation: short buffers with guard bytes behind them, expected and unexpected
 *  F  probe and cancel
 *  G  the same buffer sent again (PIPELINE: the second time skips the pipeline, left pinned)
 *  H  the lone receive (the only one posted, completed in line): every short size, wildcards,
 *     short buffers, a second receive posted behind it (order), cancel, rendezvous into it
 * Each wait has a deadline: a lost message fails the test instead of hanging it.
 * On more ranks (RVX_TEST_RANKS, an even count) the ranks are two blocks of N/2 (the nodes rvxrun
 * makes with --nodes 2) and "the next rank" is, section by section, the next in our block's ring
 * or the next in the other block's ring (ring()); D's senders are ranks 0 and N-1. */
#ifndef RVX_TAG
#define RVX_TAG 1
#endif
#if !defined(RVX_RNDV) && !defined(RVX_RNDV_THRESH)
#define RVX_RNDV_THRESH 32768
#endif
#include <rvx/rvx.h>
#include "testlib.h"

#define NR    3
#define MAXR  64
#define GUARD 64

static rvx_worker_t *w;
static rvx_context_t *ctx;
static rvx_ep_t *eps[MAXR];
static int me, nr, prv, nxt;

/* Who we send to (nxt) and receive from (prv) in the sections that follow: on NR ranks the ring
 * of all ranks; on more, the ring of our block (across = 0) or a ring through the other block. */
static void ring(int across)
{
    int b = nr / 2, blk = me / b, pos = me % b;
    if (nr <= NR) {
        nxt = (me + 1) % nr;
        prv = (me + nr - 1) % nr;
        return;
    }
    if (across) blk = 1 - blk;
    nxt = blk * b + (pos + 1) % b;
    prv = blk * b + (pos + b - 1) % b;
}

#define TAG(sec, rank, seq) ((uint64_t)(sec) << 56 | (uint64_t)(rank) << 48 | (uint64_t)(seq))

/* Wait for a request with a deadline; a timeout ends the test (it would hang otherwise). */
static rvx_status_t t_wait(rvx_request_t *req, const char *what, long a)
{
    return t_wait_req(w, req, what, a);
}

/* Progress for a while, so that what peers sent before a barrier has been polled (and, with no
 * receive posted, queued as unexpected). */
static void drain(void)
{
    double t0 = rvx__now_s();
    while (rvx__now_s() - t0 < 0.02) rvx_progress(w);
}

/* ---- one message: a send buffer, or a receive buffer with guard bytes behind it ------------- */
typedef struct msg {
    unsigned char *buf;
    size_t         len;     /* bytes sent / receive buffer size */
    size_t         sent;    /* receive: the length the sender uses */
    uint64_t       seed, tag, mask;
    int            peer;
    rvx_request_t  req;
    rvx_status_t   st;
    rvx_tag_info_t info;
} msg_t;

static uint64_t seed_of(int sec, int from, int to, long idx)
{
    return (uint64_t)sec * 1000003u + (uint64_t)from * 7919u + (uint64_t)to * 104729u + (uint64_t)idx * 31u;
}

static void post_send(msg_t *m, int to, size_t len, uint64_t tag, uint64_t seed)
{
    m->buf = (unsigned char *)malloc(len ? len : 1);
    m->len = len;
    m->seed = seed;
    m->tag = tag;
    m->peer = to;
    t_fill(m->buf, len, seed);
    rvx_request_init(&m->req);
    m->st = rvx_tag_send(eps[to], m->buf, len, tag, &m->req);
    T_CHECK(m->st == RVX_OK || m->st == RVX_INPROGRESS, "send of %zu bytes to %d: %s", len, to,
            rvx_status_str(m->st));
}

static void post_recv(msg_t *m, size_t len, size_t sent, uint64_t tag, uint64_t mask, uint64_t seed)
{
    m->buf = (unsigned char *)malloc(len + GUARD);
    m->len = len;
    m->sent = sent;
    m->seed = seed;
    m->tag = tag;
    m->mask = mask;
    memset(m->buf, 0xa5, len + GUARD);
    memset(&m->info, 0xee, sizeof(m->info));
    rvx_request_init(&m->req);
    m->st = rvx_tag_recv(w, m->buf, len, tag, mask, &m->req, &m->info);
    T_CHECK(m->st == RVX_OK || m->st == RVX_INPROGRESS || m->st == RVX_ERR_MSG_TRUNCATED,
            "receive of %zu bytes: %s", len, rvx_status_str(m->st));
}

static void finish_send(msg_t *m)
{
    rvx_status_t st = m->st == RVX_INPROGRESS ? t_wait(&m->req, "send of bytes", (long)m->len) : m->st;
    T_CHECK(st == RVX_OK, "send of %zu bytes to %d completed with %s", m->len, m->peer, rvx_status_str(st));
    free(m->buf);
    m->buf = NULL;
}

/* Complete a receive and check everything: status, info, every byte, the guard. */
static void finish_recv(msg_t *m, int from)
{
    rvx_status_t st = m->st == RVX_INPROGRESS ? t_wait(&m->req, "receive of bytes", (long)m->len) : m->st;
    rvx_status_t want = m->sent > m->len ? RVX_ERR_MSG_TRUNCATED : RVX_OK;
    size_t n = m->sent < m->len ? m->sent : m->len, i;
    long bad;
    T_CHECK(st == want, "receive of %zu (sent %zu) from %d: %s, expected %s", m->len, m->sent, from,
            rvx_status_str(st), rvx_status_str(want));
    T_CHECK(m->info.length == m->sent && m->info.sender == from && (m->info.tag & m->mask) == (m->tag & m->mask),
            "info of %zu-byte message: length %zu sender %d tag %llx", m->sent, m->info.length,
            m->info.sender, (unsigned long long)m->info.tag);
    bad = t_verify(m->buf, n, m->seed);
    T_CHECK(bad < 0, "%zu-byte message from %d (buffer %zu): byte %ld wrong", m->sent, from, m->len, bad);
    for (i = m->len; i < m->len + GUARD; i++)
        if (m->buf[i] != 0xa5) {
            T_CHECK(0, "%zu-byte message into %zu bytes: byte %zu after the buffer written", m->sent, m->len, i - m->len);
            break;
        }
    free(m->buf);
    m->buf = NULL;
}

/* ---- sizes ------------------------------------------------------------------------------------ */
static size_t sizes[1024];
static int nsizes;

static void add3(size_t s)
{
    int k;
    for (k = -1; k <= 1; k++) {
        size_t v = s + (size_t)(long)k;
        int i;
        if ((long)s + k < 0 || v > (8u << 20)) continue;
        for (i = 0; i < nsizes; i++)
            if (sizes[i] == v) break;
        if (i == nsizes && nsizes < 1024) sizes[nsizes++] = v;
    }
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static void make_sizes(void)
{
    const size_t frame = RVX_AM_MAX_MEDIUM, thr = RVX_RNDV_THRESH_BYTES;
    size_t s, e1 = RVX_PIPE_EAGER, k;
    for (s = 0; s <= 80; s++) add3(s);
    for (s = 81; s < frame + 64; s += 97) add3(s);
    add3(RVX_TAG_SHORT_MAX);
    add3(frame - 8);                                /* one eager frame */
    for (k = 0; k < 3; k++) add3(frame - 16 + k * frame); /* first fragment + k more */
    add3(RVX_EAGER_ZCOPY_MIN);                      /* eager zero-copy from here */
    add3(thr);                                      /* the switch */
    add3(thr + 1);
    add3(e1);                                       /* pipeline phase 1 */
    for (k = 1; k <= RVX_PIPE_BOUNCE / RVX_PIPE_FRAG + 1; k++) add3(e1 + k * RVX_PIPE_FRAG);
    add3(e1 + RVX_PIPE_BOUNCE);                     /* phase 2 -> 3 */
    for (k = 1; k <= 2; k++) add3(e1 + RVX_PIPE_BOUNCE + k * RVX_PIPE_CHUNK);
    add3((size_t)1 << 20);
    add3(((size_t)4 << 20) + 2);
    qsort(sizes, (size_t)nsizes, sizeof(sizes[0]), cmp_size);
}

/* ---- sections ---------------------------------------------------------------------------------- */
static int targets[2];

/* A: every size, to the next rank and to ourselves; expected (posted first) or unexpected. */
static void section_sizes(int sec, int expected)
{
    int prev = prv, i, k;
    int from[2];
    msg_t *snd = (msg_t *)calloc((size_t)nsizes * 2, sizeof(msg_t));
    msg_t *rcv = (msg_t *)calloc((size_t)nsizes * 2, sizeof(msg_t));
    from[0] = prev;
    from[1] = me;
    targets[0] = nxt;
    if (expected) {
        for (k = 0; k < 2; k++)
            for (i = 0; i < nsizes; i++)
                post_recv(&rcv[k * nsizes + i], sizes[i], sizes[i], TAG(sec, from[k], i), ~0ull,
                          seed_of(sec, from[k], me, i));
        T_OK(rvx_barrier(ctx));
    }
    for (i = 0; i < nsizes; i++)
        for (k = 0; k < 2; k++)
            post_send(&snd[k * nsizes + i], targets[k], sizes[i], TAG(sec, me, i), seed_of(sec, me, targets[k], i));
    if (!expected) {
        T_OK(rvx_barrier(ctx)); /* everything has arrived (or announced itself) before we post */
        drain();
        for (k = 0; k < 2; k++)
            for (i = nsizes - 1; i >= 0; i--) /* posted in reverse: the queue is searched, not popped */
                post_recv(&rcv[k * nsizes + i], sizes[i], sizes[i], TAG(sec, from[k], i), ~0ull,
                          seed_of(sec, from[k], me, i));
    }
    for (i = 0; i < 2 * nsizes; i++) finish_send(&snd[i]);
    for (k = 0; k < 2; k++)
        for (i = 0; i < nsizes; i++) finish_recv(&rcv[k * nsizes + i], from[k]);
    free(snd);
    free(rcv);
    T_OK(rvx_barrier(ctx));
}

/* B: many outstanding messages, mixed protocols; half the receives are posted before, half after
 * the messages were sent. */
#define NB 600
static size_t size_b(int i)
{
    static const size_t s[] = {0, 8, 100, RVX_AM_MAX_MEDIUM - 8, RVX_AM_MAX_MEDIUM * 2, RVX_RNDV_THRESH_BYTES + 100,
                               RVX_RNDV_THRESH_BYTES + 70000, 1};
    return s[i % 8];
}

static void section_many(void)
{
    int prev = prv, next = nxt, i;
    msg_t *snd = (msg_t *)calloc(NB, sizeof(msg_t)), *rcv = (msg_t *)calloc(NB, sizeof(msg_t));
    unsigned opslabs = rvx__tag_of(w)->slabs.n;
    for (i = 0; i < NB; i += 2)
        post_recv(&rcv[i], size_b(i), size_b(i), TAG(2, prev, i), ~0ull, seed_of(2, prev, me, i));
    /* nothing has arrived: each receive waits in a small record (the first in the lone slot),
     * the pool of full ops did not grow for them */
    T_CHECK(rvx__tag_of(w)->slabs.n == opslabs && rvx__tag_of(w)->rslabs.n * RVX__TAG_SLAB >= NB / 2 - 1,
            "%d posted receives: op pool %u -> %u blocks, receive records %u blocks", NB / 2, opslabs,
            rvx__tag_of(w)->slabs.n, rvx__tag_of(w)->rslabs.n);
    T_OK(rvx_barrier(ctx));
    for (i = 0; i < NB; i++) {
        post_send(&snd[i], next, size_b(i), TAG(2, me, i), seed_of(2, me, next, i));
        if (i % 50 == 0) rvx_progress(w);
    }
    for (i = 1; i < NB; i += 2)
        post_recv(&rcv[i], size_b(i), size_b(i), TAG(2, prev, i), ~0ull, seed_of(2, prev, me, i));
    for (i = 0; i < NB; i++) finish_send(&snd[i]);
    for (i = 0; i < NB; i++) finish_recv(&rcv[i], prev);
    free(snd);
    free(rcv);
    T_OK(rvx_barrier(ctx));
}

/* C: ordering. One tag for every message; sizes alternate across the switch; the k-th receive
 * must get the k-th message sent (its length and contents say which it is). */
#define NC 120
static size_t size_c(int i)
{
    return i % 3 == 0 ? RVX_RNDV_THRESH_BYTES + (size_t)i * 13 : i % 3 == 1 ? (size_t)i : RVX_AM_MAX_MEDIUM + (size_t)i;
}

static void section_order(int unexpected_first)
{
    int prev = prv, next = nxt, i;
    msg_t *snd = (msg_t *)calloc(NC, sizeof(msg_t)), *rcv = (msg_t *)calloc(NC, sizeof(msg_t));
    size_t maxlen = RVX_RNDV_THRESH_BYTES + NC * 13 + RVX_AM_MAX_MEDIUM;
    int npre = unexpected_first ? 0 : NC / 2;
    for (i = 0; i < npre; i++)
        post_recv(&rcv[i], maxlen, size_c(i), TAG(3, prev, 0), ~0ull, seed_of(3, prev, me, i));
    T_OK(rvx_barrier(ctx));
    for (i = 0; i < NC; i++) post_send(&snd[i], next, size_c(i), TAG(3, me, 0), seed_of(3, me, next, i));
    if (unexpected_first) {
        T_OK(rvx_barrier(ctx));
        drain();
    }
    for (i = npre; i < NC; i++)
        post_recv(&rcv[i], maxlen, size_c(i), TAG(3, prev, 0), ~0ull, seed_of(3, prev, me, i));
    for (i = 0; i < NC; i++) finish_send(&snd[i]);
    for (i = 0; i < NC; i++) finish_recv(&rcv[i], prev); /* length, seed: the i-th sent */
    free(snd);
    free(rcv);
    T_OK(rvx_barrier(ctx));
}

/* D: ranks 0 and N-1 (2 on NR ranks) send to rank 1 on tags (4, sender, seq); rank 1 receives
 * with a mask that ignores sender and sequence: each sender's messages must come in its order. */
#define ND 200
static void section_any_source(void)
{
    int i, last = nr - 1;
    if (me != 0 && me != 1 && me != last) {
        T_OK(rvx_barrier(ctx)); /* not in this section */
    } else if (me != 1) {
        msg_t *snd = (msg_t *)calloc(ND, sizeof(msg_t));
        T_OK(rvx_barrier(ctx));
        for (i = 0; i < ND; i++) post_send(&snd[i], 1, (size_t)(i * 37) % (RVX_RNDV_THRESH_BYTES + 5000), TAG(4, me, i),
                                           seed_of(4, me, 1, i));
        for (i = 0; i < ND; i++) finish_send(&snd[i]);
        free(snd);
    } else {
        msg_t *rcv = (msg_t *)calloc(2 * ND, sizeof(msg_t));
        int next_seq[MAXR] = {0};
        size_t cap = RVX_RNDV_THRESH_BYTES + 5000;
        for (i = 0; i < ND; i++) post_recv(&rcv[i], cap, 0, TAG(4, 0, 0), 0xffull << 56, 0);
        T_OK(rvx_barrier(ctx));
        for (i = ND; i < 2 * ND; i++) post_recv(&rcv[i], cap, 0, TAG(4, 0, 0), 0xffull << 56, 0);
        for (i = 0; i < 2 * ND; i++) {
            msg_t *m = &rcv[i];
            rvx_status_t st = m->st == RVX_INPROGRESS ? t_wait(&m->req, "any-source receive", i) : m->st;
            int from = m->info.sender, seq = (int)(m->info.tag & 0xffffffffffffull);
            T_CHECK(st == RVX_OK, "any-source receive %d: %s", i, rvx_status_str(st));
            T_CHECK((from == 0 || from == last) && (m->info.tag >> 48) == ((uint64_t)4 << 8 | (uint64_t)from),
                    "receive %d: sender %d tag %llx", i, from, (unsigned long long)m->info.tag);
            if (from != 0 && from != last) continue;
            T_CHECK(seq == next_seq[from], "from rank %d: message %d matched where %d was due", from, seq, next_seq[from]);
            T_CHECK(m->info.length == (size_t)(seq * 37) % cap &&
                        t_verify(m->buf, m->info.length, seed_of(4, from, 1, seq)) < 0,
                    "from rank %d: message %d has wrong length or data", from, seq);
            next_seq[from] = seq + 1;
            free(m->buf);
        }
        T_CHECK(next_seq[0] == ND && next_seq[last] == ND, "got %d and %d messages", next_seq[0], next_seq[last]);
        free(rcv);
    }
    T_OK(rvx_barrier(ctx));
}

/* E: truncation into short buffers (and empty ones), guard bytes behind each. */
static void section_truncate(int unexpected)
{
    static const size_t sent[] = {10, 100, RVX_AM_MAX_MEDIUM - 3, RVX_AM_MAX_MEDIUM * 3,
                                  RVX_RNDV_THRESH_BYTES + 10, 300000};
    enum { NE = (int)(sizeof(sent) / sizeof(sent[0])) };
    int prev = prv, next = nxt, i;
    msg_t snd[2 * NE], rcv[2 * NE];
    memset(snd, 0, sizeof(snd));
    memset(rcv, 0, sizeof(rcv));
    if (!unexpected) {
        for (i = 0; i < 2 * NE; i++)
            post_recv(&rcv[i], i < NE ? sent[i % NE] / 2 : 0, sent[i % NE], TAG(5, prev, i), ~0ull, seed_of(5, prev, me, i));
        T_OK(rvx_barrier(ctx));
    }
    for (i = 0; i < 2 * NE; i++) post_send(&snd[i], next, sent[i % NE], TAG(5, me, i), seed_of(5, me, next, i));
    if (unexpected) {
        T_OK(rvx_barrier(ctx));
        drain();
        for (i = 0; i < 2 * NE; i++)
            post_recv(&rcv[i], i < NE ? sent[i % NE] / 2 : 0, sent[i % NE], TAG(5, prev, i), ~0ull, seed_of(5, prev, me, i));
    }
    for (i = 0; i < 2 * NE; i++) finish_send(&snd[i]);
    for (i = 0; i < 2 * NE; i++) finish_recv(&rcv[i], prev);
    T_OK(rvx_barrier(ctx));
}

/* F: probe sees what arrived (and only that); cancel withdraws a receive nothing matched. */
static void section_probe_cancel(void)
{
    int prev = prv, next = nxt;
    msg_t s1, s2, r1, r2;
    rvx_tag_info_t info;
    rvx_request_t req;
    char buf[8];
    post_send(&s1, next, 100, TAG(6, me, 1), seed_of(6, me, next, 1));
    post_send(&s2, next, RVX_RNDV_THRESH_BYTES + 1, TAG(6, me, 2), seed_of(6, me, next, 2));
    T_OK(rvx_barrier(ctx));
    T_STATUS(rvx_tag_probe(w, TAG(6, prev, 3), ~0ull, &info), RVX_INPROGRESS);
    {
        /* probe does not progress: progress until both messages have been polled (bounded; a
         * loaded machine may take a while) */
        double t0 = rvx__now_s();
        while ((rvx_tag_probe(w, TAG(6, prev, 1), ~0ull, &info) != RVX_OK ||
                rvx_tag_probe(w, TAG(6, prev, 2), ~0ull, &info) != RVX_OK) && rvx__now_s() - t0 < 30)
            drain();
    }
    memset(&info, 0, sizeof(info));
    T_STATUS(rvx_tag_probe(w, TAG(6, prev, 1), ~0ull, &info), RVX_OK);
    T_CHECK(info.length == 100 && info.sender == prev && info.tag == TAG(6, prev, 1), "probe info of the eager message");
    T_STATUS(rvx_tag_probe(w, TAG(6, prev, 2), ~0ull, &info), RVX_OK);
    T_CHECK(info.length == RVX_RNDV_THRESH_BYTES + 1 && info.sender == prev, "probe info of the rendezvous message");
    T_STATUS(rvx_tag_probe(w, TAG(6, prev, 3), ~0ull, &info), RVX_INPROGRESS);
    T_STATUS(rvx_tag_probe(w, TAG(6, prev, 0), 0xffffull << 48, &info), RVX_OK); /* wildcard: the first */
    T_CHECK(info.tag == TAG(6, prev, 1), "wildcard probe found %llx", (unsigned long long)info.tag);
    post_recv(&r2, RVX_RNDV_THRESH_BYTES + 1, RVX_RNDV_THRESH_BYTES + 1, TAG(6, prev, 2), ~0ull, seed_of(6, prev, me, 2));
    post_recv(&r1, 100, 100, TAG(6, prev, 1), ~0ull, seed_of(6, prev, me, 1));
    T_CHECK(r1.st == RVX_OK, "an arrived eager message is received at once: %s", rvx_status_str(r1.st));
    finish_recv(&r1, prev);
    finish_recv(&r2, prev);
    finish_send(&s1);
    finish_send(&s2);
    T_STATUS(rvx_tag_probe(w, TAG(6, prev, 1), ~0ull, &info), RVX_INPROGRESS);
    T_STATUS(rvx_tag_recv(w, buf, sizeof(buf), TAG(6, prev, 9), ~0ull, &req, NULL), RVX_INPROGRESS);
    T_STATUS(rvx_tag_cancel(w, &req), RVX_OK);
    T_CHECK(req.status == RVX_ERR_CANCELED, "cancelled receive: %s", rvx_status_str((rvx_status_t)req.status));
    T_STATUS(rvx_tag_cancel(w, &req), RVX_ERR_INVALID_PARAM);
    T_OK(rvx_barrier(ctx));
}

/* G: the same buffers sent again. With PIPELINE and the registration cache, the second send of a
 * buffer skips the pipeline (no bounce buffers); the data must be right either way. */
static void section_reuse(void)
{
    int prev = prv, next = nxt, round;
    size_t len = RVX_RNDV_THRESH_BYTES + RVX_PIPE_BOUNCE + 2 * RVX_PIPE_CHUNK + 3;
    unsigned char *sbuf = (unsigned char *)malloc(len), *rbuf = (unsigned char *)malloc(len);
    struct rvx__tag_state *t = rvx__tag_of(w);
    /* heap memory earlier sections received into may still be cached: make these first-time */
    rvx_tag_mem_invalidate(w, sbuf, len);
    rvx_tag_mem_invalidate(w, rbuf, len);
    for (round = 0; round < 3; round++) {
        rvx_request_t sr, rr;
        rvx_tag_info_t info;
        uint64_t bounce = t->n_pipe_bounce, pinned = t->n_pipe_pinned, chunks = t->n_pipe_chunks;
        uint64_t rchunks = t->n_pipe_rchunks, keys = t->n_pipe_keys, rpinned = t->n_pipe_rpinned;
        uint64_t misses = t->rcache.misses;
        rvx_status_t st;
        t_fill(sbuf, len, seed_of(8, me, next, round));
        memset(rbuf, 0, len);
        st = rvx_tag_recv(w, rbuf, len, TAG(8, prev, round), ~0ull, &rr, &info);
        T_OK(rvx_barrier(ctx));
        T_STATUS(rvx_complete(w, rvx_tag_send(eps[next], sbuf, len, TAG(8, me, round), &sr), &sr), RVX_OK);
        T_STATUS(st == RVX_INPROGRESS ? t_wait(&rr, "reused-buffer receive", round) : st, RVX_OK);
        T_CHECK(t_verify(rbuf, len, seed_of(8, prev, me, round)) < 0 && info.length == len,
                "round %d: reused buffer arrived wrong", round);
#if RVX_RNDV != RVX_RNDV_AM
        /* left pinned: from the second round on, both buffers are registration-cache hits */
        if (round > 0)
            T_CHECK(t->rcache.misses == misses, "round %d: %llu registrations missed the cache", round,
                    (unsigned long long)(t->rcache.misses - misses));
#else
        (void)misses;
#endif
#if RVX_RNDV == RVX_RNDV_PIPELINE
        if (round == 0) {
            T_CHECK(t->n_pipe_bounce > bounce && t->n_pipe_chunks > chunks && t->n_pipe_pinned == pinned,
                    "first send of a buffer: bounce %llu chunks %llu pinned %llu", (unsigned long long)(t->n_pipe_bounce - bounce),
                    (unsigned long long)(t->n_pipe_chunks - chunks), (unsigned long long)(t->n_pipe_pinned - pinned));
        } else {
            T_CHECK(t->n_pipe_bounce == bounce && t->n_pipe_pinned == pinned + 1,
                    "send %d of the same buffer went through the pipeline again", round);
        }
        /* the receiver: a first-time buffer is registered a piece at a time after the CTS, each
         * piece's key in a KEY frame (phase 2's range, then at least two chunks: >= 2 of each);
         * a reused one is all cache hits, every key in the CTS, no KEY frame */
        if (round == 0) {
            T_CHECK(t->n_pipe_rchunks >= rchunks + 2 && t->n_pipe_keys >= keys + 2 && t->n_pipe_rpinned == rpinned,
                    "first receive into a buffer: %llu pieces registered after the CTS, %llu KEY frames, pinned %llu",
                    (unsigned long long)(t->n_pipe_rchunks - rchunks), (unsigned long long)(t->n_pipe_keys - keys),
                    (unsigned long long)(t->n_pipe_rpinned - rpinned));
        } else {
            T_CHECK(t->n_pipe_rchunks == rchunks && t->n_pipe_keys == keys && t->n_pipe_rpinned == rpinned + 1,
                    "receive %d into the same buffer: %llu pieces registered after the CTS, %llu KEY frames, pinned %llu",
                    round, (unsigned long long)(t->n_pipe_rchunks - rchunks),
                    (unsigned long long)(t->n_pipe_keys - keys), (unsigned long long)(t->n_pipe_rpinned - rpinned));
        }
#else
        (void)bounce; (void)pinned; (void)chunks; (void)rchunks; (void)keys; (void)rpinned;
#endif
        T_OK(rvx_barrier(ctx));
    }
    free(sbuf);
    free(rbuf);
}

/* H: the lone receive, over the loopback endpoint: a receive posted with both queues empty is
 * completed in the tl's poll loop for 8..16-byte messages of its exact tag; everything else must
 * still come out right through the general path. */
static void lone_one(size_t len, size_t sent, uint64_t tag, uint64_t mask, uint64_t stag, int idx)
{
    msg_t s, r;
    post_recv(&r, len, sent, tag, mask, seed_of(9, me, me, idx));
    T_CHECK(r.st == RVX_INPROGRESS && rvx__tag_of(w)->lone == &r.req, "receive %d did not become the lone receive", idx);
    r.tag = stag;
    r.mask = ~0ull;
    post_send(&s, me, sent, stag, seed_of(9, me, me, idx));
    finish_send(&s);
    finish_recv(&r, me);
    T_CHECK(rvx__tag_of(w)->lone == NULL && rvx__tag_of(w)->exp_head == NULL, "lone receive %d not released", idx);
}

static void section_lone(void)
{
    size_t n;
    int idx = 0;
    msg_t s1, s2, r1, r2;
    rvx_request_t req;
    char buf[16];
    for (n = 0; n <= RVX_TAG_SHORT_MAX + 2; n++) lone_one(n, n, TAG(9, me, n), ~0ull, TAG(9, me, n), idx++);
    for (n = 0; n <= 20; n++) lone_one(n, n + 3, TAG(9, me, n), ~0ull, TAG(9, me, n), idx++); /* truncated */
    for (n = 6; n <= 18; n++) lone_one(32, n, TAG(9, me, 0), 0xffull << 56, TAG(9, me, n), idx++); /* wildcard */
    lone_one(RVX_RNDV_THRESH_BYTES + 7, RVX_RNDV_THRESH_BYTES + 7, TAG(9, me, 1), ~0ull, TAG(9, me, 1), idx++);
    lone_one(RVX_AM_MAX_MEDIUM * 2, RVX_AM_MAX_MEDIUM * 2, TAG(9, me, 1), ~0ull, TAG(9, me, 1), idx++);
    /* a second receive for the same tag behind the lone one: the first message goes to the lone */
    post_recv(&r1, 16, 8, TAG(9, me, 77), ~0ull, seed_of(9, me, me, 1000));
    post_recv(&r2, 16, 12, TAG(9, me, 77), ~0ull, seed_of(9, me, me, 1001));
    T_CHECK(rvx__tag_of(w)->lone == RVX__LONE_QUEUED, "a second receive did not queue the lone one");
    post_send(&s1, me, 8, TAG(9, me, 77), seed_of(9, me, me, 1000));
    post_send(&s2, me, 12, TAG(9, me, 77), seed_of(9, me, me, 1001));
    finish_send(&s1);
    finish_send(&s2);
    finish_recv(&r1, me);
    finish_recv(&r2, me);
    T_CHECK(rvx__tag_of(w)->lone == NULL, "the queued lone receive was not released");
    /* cancel a lone receive, then a new one works */
    T_STATUS(rvx_tag_recv(w, buf, sizeof(buf), TAG(9, me, 88), ~0ull, &req, NULL), RVX_INPROGRESS);
    T_CHECK(rvx__tag_of(w)->lone == &req, "not the lone receive");
    T_STATUS(rvx_tag_cancel(w, &req), RVX_OK);
    T_CHECK(req.status == RVX_ERR_CANCELED && rvx__tag_of(w)->lone == NULL, "cancelled lone receive: %s",
            rvx_status_str((rvx_status_t)req.status));
    lone_one(8, 8, TAG(9, me, 89), ~0ull, TAG(9, me, 89), idx++);
    T_OK(rvx_barrier(ctx));
}

int main(int argc, char **argv)
{
    rvx_worker_stats_t s;
    int r;
    double t0;
    t_spawn_upto(argc, argv, NR, MAXR, 600);
    me = t_start(&ctx, &w);
    nr = rvx_size(ctx);
    if (nr > NR && nr % 2) {
        fprintf(stderr, "FAIL: t_tag runs on %d ranks or an even number above, not %d\n", NR, nr);
        return 1;
    }
    for (r = 0; r < nr; r++) T_OK(rvx_ep_create(w, r, &eps[r]));
    targets[1] = me;
    make_sizes();
    if (me == 0)
        printf("%s\n%d sizes from 0 to %zu; switch at %zu\n", rvx_config_string(), nsizes,
               sizes[nsizes - 1], (size_t)RVX_RNDV_THRESH_BYTES);
    T_OK(rvx_barrier(ctx));
    t0 = rvx__now_s();
    ring(0);
    section_sizes(1, 1);
    ring(1);
    section_sizes(7, 0);
    ring(0);
    section_many();
    section_order(0);
    ring(1);
    section_order(1);
    section_any_source();
    ring(0);
    section_truncate(0);
    ring(1);
    section_truncate(1);
    ring(0);
    section_probe_cancel();
    ring(1);
    section_reuse();
    section_lone();
#if RVX_RNDV == RVX_RNDV_PIPELINE
    T_CHECK(rvx__tag_of(w)->n_pipe_bounce && rvx__tag_of(w)->n_pipe_chunks, "the pipeline's phases 2 and 3 never ran");
#endif
    if (RVX_RNDV_THRESH_BYTES < ((size_t)4 << 20)) T_CHECK(rvx__tag_of(w)->n_rndv > 0, "no rendezvous ran");
    if (RVX_EAGER_ZCOPY_MIN <= RVX_AM_MAX_MEDIUM - 8 && RVX_EAGER_ZCOPY_MIN < RVX_RNDV_THRESH_BYTES)
        T_CHECK(rvx__tag_of(w)->n_zcopy > 0, "no eager message went zero-copy");
    rvx_worker_stats(w, &s);
    T_CHECK(s.tag_bad_frame == 0, "%llu bad tag frames counted", (unsigned long long)s.tag_bad_frame);
    T_CHECK(w->proto_pending == 0 && w->proto_queued == 0, "operations left in flight: %u, queued %u",
            w->proto_pending, w->proto_queued);
    T_OK(rvx_barrier(ctx));
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    printf("rank %d: all sections done in %.1f s\n", me, rvx__now_s() - t0);
    return t_exit();
}
