/* rvx/proto/tag.h: tag matching, as MPI and UCP's tag API do it, over the tl contract.
 *
 * Build with RVX_TAG=1 (and RVX_RNDV to pick the rendezvous protocol). The calls:
 *
 *   rvx_tag_send(ep, buf, len, tag, req)
 *       RVX_OK: sent, buf may be reused (eager); RVX_INPROGRESS: req completes later (a large
 *       message, or the ring to the peer is full); an error: nothing was sent.
 *   rvx_tag_recv(worker, buf, len, tag, tag_mask, req, info)      (req is required)
 *       Receives the first message, from any endpoint of the worker, whose tag equals `tag` in
 *       the bits set in `tag_mask` (mask 0: any tag). RVX_OK or RVX_ERR_MSG_TRUNCATED when a
 *       message that had already arrived was taken at once; RVX_INPROGRESS: req completes later
 *       with one of those. `info` (may be NULL) is filled before completion: sender rank, tag,
 *       and the length as sent; a longer message than the buffer fills the buffer, never a byte
 *       more, and completes with RVX_ERR_MSG_TRUNCATED.
 *   rvx_tag_recv_from(worker, src, buf, len, tag, tag_mask, req, info)
 *       The same for messages from rank `src` only (RVX_ANY_SOURCE: any sender).
 *   rvx_tag_probe(worker, tag, tag_mask, info)
 *       RVX_OK (info filled) if a matching message has arrived and waits for a receive,
 *       RVX_INPROGRESS if none has yet. Does not progress.
 *   rvx_tag_cancel(worker, req)         withdraw a posted receive that nothing has matched yet
 *   rvx_tag_mem_invalidate(worker, addr, len)   forget registrations of memory being freed
 *
 * Requests are the caller's (rvx_request_t): pending means req->status == RVX_INPROGRESS; an
 * immediate RVX_OK / error leaves req untouched. Wait with rvx_wait or rvx_complete (core.h).
 *
 * Ordering (MPI's rule): messages from one sender are matched in the order they were sent,
 * whatever their size. Every frame that carries match information (eager, first fragment,
 * rendezvous request) travels on the request channel of the sender's endpoint, which is
 * ordered, and sends to one peer leave through one queue; the receiver matches each such frame
 * when it arrives, against the posted receives in posting order, else it joins the unexpected
 * queue in arrival order, which a new receive searches first. Rendezvous data moves after the
 * match, so a large message can complete after a smaller one sent later; it never matches later.
 *
 * Protocols, by size (thresholds are compile-time constants):
 *   len <= RVX_TAG_SHORT_MAX            eager short: tag and data in one frame, copied inline
 *   len <  RVX_EAGER_ZCOPY_MIN          eager bcopy: one frame, memcpy
 *   len <= RVX_AM_MAX_MEDIUM - 8        eager zero-copy: one frame, the tag as header and the data
 *                                       from the user's buffer (rvx__tl_am_zcopy; registered through
 *                                       the cache; RVX_INPROGRESS until the transport lets go).
 *                                       On shm the tl copies (no zero-copy between processes); on
 *                                       no room, credit or registration, the bcopy path instead
 *   len <  RVX_RNDV_THRESH_BYTES        eager, fragmented: a first frame with the tag and total
 *                                       length, then frames of data (rvx_tag_send returns
 *                                       RVX_OK once all are in the ring)
 *   len >= RVX_RNDV_THRESH_BYTES        rendezvous, RVX_RNDV (see proto/rndv.h): GET, PUT, AM or
 *                                       PIPELINE
 * Fragmented eager messages (longer than one frame) are still copied: a zero-copy frame must fit
 * the receiver's frame-sized buffers.
 *
 * The matched-expected fast path: a receive posted while no message waits and no receive is
 * posted becomes the lone receive (six stores, no list); an 8..16-byte eager frame of its exact
 * tag completes it inside the tl's poll loop with no call (rvx__tag_rx_eager_fast). Everything
 * else (wildcards, source-specific receives, other sizes, several receives posted) goes through
 * the general queues, where the lone receive is spilled first as the oldest entry.
 *
 * Progress: the receive side runs inside rvx_progress (frames are matched as they are polled);
 * rendezvous steps (registration, RMA, control frames) run in rvx_progress's tag hook, only
 * while w->tag_pending counts operations in flight. A peer that dies mid-protocol fails the
 * operations that depend on it with RVX_ERR_PEER_FAILED (checked every ~10 ms while they wait).
 * Posted receives that nothing has matched yet (checked as often, from rvx_progress when it finds
 * nothing to do): one naming a source completes with RVX_ERR_PEER_FAILED once that rank has
 * failed; an any-source receive keeps waiting while any other rank with an endpoint on this
 * worker lives, and completes with RVX_ERR_PEER_FAILED when the worker has an endpoint to every
 * other rank and all of them have failed (our own rank is not counted: ULFM's pending-failure
 * idea, reported only when no sender is left). What a dead rank sent before it went is drained
 * and matched first, and messages we sent ourselves are flushed in before that verdict.
 * Frames of unknown type, wrong length or naming no operation of ours are counted in
 * rvx_worker_stats (tag_bad_frame), reported once, and dropped. */
#ifndef RVX_PROTO_TAG_H
#define RVX_PROTO_TAG_H

#include <stdlib.h>
#include <string.h>

/* The eager/rendezvous switch: computed from the fabric header by proto/thresh.h (or pinned by
 * RVX_RNDV_THRESH); the fallback is for a build without it. */
#include "thresh.h"
#ifndef RVX_RNDV_THRESH_BYTES
#ifdef RVX_RNDV_THRESH
#define RVX_RNDV_THRESH_BYTES (RVX_RNDV_THRESH)
#else
#define RVX_RNDV_THRESH_BYTES 8192
#endif
#endif
#define RVX__TAG_THRESH ((size_t)(RVX_RNDV_THRESH_BYTES))

/* What the tag protocol sees of a received message. */
#define RVX_ANY_SOURCE (-1) /* rvx_tag_recv_from: any sender */

typedef struct rvx_tag_info {
    uint64_t tag;     /* the sender's tag */
    size_t   length;  /* the length as sent (more than the buffer: truncated) */
    int      sender;  /* the sender's rank */
} rvx_tag_info_t;

/* ---- wire format ---------------------------------------------------------------------------
 * info word: class 1 in bits 14-15, frame type in bits 0-3, the rest 0. Bodies (little-endian,
 * at most RVX_AM_MAX_MEDIUM bytes):
 *   EAGER  tag:8 data              FIRST  tag:8 mlen:8 data        MID  data
 *   RTS    tag:8 mlen:8 sid:4 0:4 [GET: raddr:8 rkey] [PIPELINE: phase-1 data]
 *   DATA   rid:4 0:4 off:8 data (AM rendezvous)
 *   ATS    sid:4 status:4         RTR  sid:4 rid:4 eff:8 [PUT: raddr:8 rkey]
 *                                      [PIPELINE: raddr:8 nkeys:4 0:4 nkeys x (end:8 rkey)]
 *   KEY    sid:4 status:4 nkeys:4 0:4 nkeys x (end:8 rkey)   (PIPELINE: more of the receive
 *          buffer registered; key i covers the buffer up to its end, from the previous key's end)
 *   FIN    rid:4 status:4
 * Request channel: EAGER, FIRST, MID, RTS, DATA (in order, through one queue per peer).
 * Reply channel: ATS, RTR, KEY, FIN (control; an op's RTR and KEYs go out one after the other
 * on one channel and arrive in that order). */
#define RVX__TAG_CLASS    (1u << 14)
#define RVX__TF_EAGER     1u
#define RVX__TF_FIRST     2u
#define RVX__TF_MID       3u
#define RVX__TF_RTS       4u
#define RVX__TF_DATA      5u
#define RVX__TF_ATS       6u
#define RVX__TF_RTR       7u
#define RVX__TF_FIN       8u
#define RVX__TF_KEY       9u
#define RVX__TAG_FRAME    ((size_t)RVX_AM_MAX_MEDIUM)
#define RVX__TAG_EAGER1   (RVX__TAG_FRAME - 8)   /* eager data that fits one frame */
#define RVX__TAG_SMALL    64                     /* unexpected data kept inside the op */
#define RVX__TAG_RTS_HDR  24
#define RVX__TAG_MLEN_MAX ((uint64_t)1 << 40)    /* larger lengths from a peer are malformed */
#define RVX__BAD_TAG      3                      /* rvx__report_bad kind (0-2 are AM's) */

/* ---- operations ---------------------------------------------------------------------------- */

typedef struct rvx__tag_link {
    struct rvx__tag_link *next, *prev;
} rvx__tag_link_t;

typedef struct rvx__tag_chunk {
    rvx_mem_t    *mem;                 /* NULL: the piece lies in an earlier entry's registration */
    size_t        end;                 /* where the piece ends (offset in the buffer); 0: not yet known */
    rvx_request_t req;
#if RVX_LANES > 1
    rvx_request_t lreq[RVX_LANES - 1]; /* its stripes on lanes 1.. */
    unsigned      lposted;             /* bit l: lane l's stripe is in the transport */
#endif
} rvx__tag_chunk_t;

enum { RVX__OP_RECV = 1, RVX__OP_UNEXP, RVX__OP_SEND };
enum {
    /* receive */
    RVX__RS_EAGER = 1, /* fragments arriving into the user buffer */
    RVX__RS_START,     /* rendezvous matched: first step pending */
    RVX__RS_GET,       /* GET in flight */
    RVX__RS_ATS,       /* ATS to send */
    RVX__RS_RTR,       /* RTR to send */
    RVX__RS_WAIT,      /* waiting for FIN or DATA */
    /* unexpected */
    RVX__US_DONE,      /* complete eager message */
    RVX__US_EAGER,     /* eager fragments still arriving */
    RVX__US_RTS,       /* rendezvous request */
    /* send */
    RVX__SS_EAGER,     /* in the send queue: eager frames */
    RVX__SS_RTS,       /* in the send queue: the rendezvous request */
    RVX__SS_WAIT,      /* waiting for ATS / RTR */
    RVX__SS_DATA,      /* in the send queue: AM rendezvous data */
    RVX__SS_PUT,       /* PUT: write to post / in flight */
    RVX__SS_PIPE,      /* PIPELINE phases 2 and 3 */
    RVX__SS_FLUSH,     /* flush to post / in flight */
    RVX__SS_FIN,       /* FIN to send */
    RVX__SS_ZCOPY      /* eager zero-copy: the frame leaves from the user's buffer */
};
#define RVX__F_READY   1u
#define RVX__F_ACTIVE  2u
#define RVX__F_SQ      4u
#define RVX__F_RKEY    8u
#define RVX__F_STARTED 16u
#define RVX__F_ISSUED  32u
#define RVX__F_LFLUSH  64u /* lanes: a GET part was canceled; a flush learns the lane's error */

typedef struct rvx__tag_op rvx__tag_op_t;
struct rvx__tag_op {
    /* what a posted receive needs: the first cache line */
    rvx__tag_op_t  *next;   /* expected, unexpected or free list, or the peer's send queue */
    uint64_t        tag;
    uint64_t        mask;
    uint8_t        *buf;
    size_t          len;    /* receive: buffer length; send: message length */
    rvx_request_t  *req;
    rvx_tag_info_t *info;
    int32_t         src;    /* posted receive: the sender it takes (RVX_ANY_SOURCE: any) */
    /* protocol state: zeroed when an op enters the protocol (rvx__tag_op_proto) */
    rvx__tag_link_t alink;  /* active list: in flight, counted in w->tag_pending */
    rvx__tag_link_t rlink;  /* ready list: progress has a step to run */
    rvx_ep_t       *ep;     /* the peer */
    uint8_t        *stage;  /* unexpected data (op->small or malloc'd) */
    size_t          mlen;   /* message length as sent */
    size_t          eff;    /* bytes that move: min(mlen, buffer) */
    size_t          done;   /* bytes sent, received or posted so far */
    uint64_t        raddr;
    rvx_mem_t      *mem;    /* registration of buf */
    rvx__tag_chunk_t *chunks; /* PIPELINE: sender, phase 2-3 writes; receiver, registered pieces */
    struct rvx__pipe_rkey *rk; /* PIPELINE sender: the receiver's keys, in buffer order */
    unsigned        nrk, krk;  /* keys received; the one the next write uses */
    size_t          creg_end;  /* PIPELINE: the buffer is registered up to here (sender: cmem's end) */
    rvx_mem_t      *cmem;      /* PIPELINE sender: the registration phase 3 writes from now */
    unsigned        nkeys;     /* PIPELINE receiver: keys sent so far */
    size_t          p1_end; /* PIPELINE: end of phase 1 (bytes sent with the RTS) */
    size_t          p2_end; /* PIPELINE: end of phase 2 */
    unsigned        nchunks, nposted;
    uint32_t        id, peer_id;
    int32_t         status;
    uint8_t         kind, state, flags, pinned;
    rvx_rkey_t      rkey;
    rvx_request_t   tlreq;
#if RVX_LANES > 1
    rvx_rkey_t      lrkey[RVX_LANES - 1]; /* the peer's keys on lanes 1.. */
    rvx_request_t   lreq[RVX_LANES - 1];  /* stripes (or flushes) on lanes 1..; lane 0's is tlreq */
    unsigned        lposted;              /* bit l: lane l's part is in the transport */
    unsigned        lused;                /* bit l: lane l carried data (flushed before FIN) */
#endif
    unsigned char   packed[RVX_RKEY_PACKED_SIZE];
    uint8_t         small[RVX__TAG_SMALL];
};

/* PIPELINE: one of the receiver's keys, as the sender holds it: it covers the receive buffer up to
 * `end` (from the previous key's end), lane l's key in key[l]. */
struct rvx__pipe_rkey {
    size_t     end;
    rvx_rkey_t key[RVX_LANES];
};

static inline void rvx__pipe_rk_release(rvx__tag_op_t *op)
{
    unsigned i, l;
    for (i = 0; i < op->nrk; i++)
        for (l = 0; l < RVX_LANES; l++) rvx_rkey_release(&op->rk[i].key[l]);
    free(op->rk);
    op->rk = NULL;
    op->nrk = op->krk = 0;
}

typedef struct rvx__tag_peer {
    rvx__tag_op_t *sq_head, *sq_tail; /* request-channel frames to this peer, in order */
    rvx__tag_op_t *cur;               /* eager message from this peer whose fragments arrive */
    int            dead;              /* the last liveness verdict (rvx__tag_verdicts) */
} rvx__tag_peer_t;

#ifndef RVX__PIPE_MEMO
#define RVX__PIPE_MEMO 32 /* buffers remembered as left pinned (PIPELINE with the rcache) */
#endif

/* Rendezvous buffers are registered through the registration cache (leave pinned); 0 registers
 * and deregisters them for every message instead. */
#ifndef RVX__TAG_RCACHE
#define RVX__TAG_RCACHE 1
#endif
#if RVX__TAG_RCACHE
#include "../sys/rcache.h"
#endif

struct rvx__tag_state {
    rvx__tag_op_t   *unx_head, **unx_tail; /* arrived, not yet received, in arrival order */
    rvx__tag_op_t   *free;
    rvx__tag_op_t   *exp_head, **exp_tail; /* posted receives, in posting order */
    /* The lone receive: a receive posted while both queues were empty lives in lone_op, out of
     * every list, with its request in lone (its req field unset), where an eager frame completes
     * it in line. Whatever else would look at the expected queue first spills it to the queue's
     * head (rvx__tag_spill: lone == RVX__LONE_QUEUED, an ordinary op from then on); freeing
     * lone_op sets lone to NULL, and only then can a new lone receive be posted. */
    rvx_request_t   *lone;
    rvx_worker_t    *w;
    rvx__tag_peer_t *peers;                /* by rank */
    int              npeers;
    unsigned         tick;
    rvx__tag_link_t  active, ready;
    rvx__tag_op_t  **ids;                  /* rendezvous ids: slot | generation << 20 */
    uint32_t        *idfree;
    uint32_t         idcap, nidfree, idgen;
    void           **slabs;
    unsigned         nslabs, capslabs;
    double           last_check;
    size_t           page;                 /* PIPELINE pieces end on page boundaries */
    rvx_mem_t       *bounce;               /* PIPELINE phase 2 buffers, registered once */
    rvx_request_t    bslot[RVX_PIPE_BOUNCE_BUFS];
    struct { uintptr_t addr; size_t len; } memo[RVX__PIPE_MEMO];
    /* what the protocols did (tests and benchmarks read them) */
    uint64_t         n_rndv;               /* rendezvous sends started */
    uint64_t         n_zcopy;              /* eager sends through rvx__tl_am_zcopy */
    uint64_t         n_pipe_bounce;        /* PIPELINE: phase-2 bounce-buffer writes */
    uint64_t         n_pipe_chunks;        /* PIPELINE: phase-3 chunk writes */
    uint64_t         n_pipe_pinned;        /* PIPELINE: sends that skipped phase 2 (left pinned) */
    uint64_t         n_pipe_rchunks;       /* PIPELINE: receive pieces registered after the CTS */
    uint64_t         n_pipe_keys;          /* PIPELINE: KEY frames sent by receivers */
    uint64_t         n_pipe_rpinned;       /* PIPELINE: receives whose keys all went in the CTS */
#if RVX__TAG_RCACHE
    rvx__rcache_t    rcache;
#endif
    rvx__tag_op_t    lone_op;
    rvx_request_t    self_flush;           /* before any-source receives fail (check_recvs) */
};
#define RVX__LONE_QUEUED ((rvx_request_t *)(uintptr_t)1)
#define RVX__LONE_POSTED(t) ((uintptr_t)(t)->lone > 1)

/* ---- small helpers --------------------------------------------------------------------------- */

RVX_INLINE void rvx__tag_copy16(uint8_t *d, const uint8_t *s)
{
    uint64_t a, b;
    memcpy(&a, s, 8);
    memcpy(&b, s + 8, 8);
    memcpy(d, &a, 8);
    memcpy(d + 8, &b, 8);
}

/* Copy up to 64 bytes with a few overlapping loads and stores instead of a memcpy call. */
RVX_INLINE void rvx__tag_copy_small(uint8_t *d, const uint8_t *s, size_t n)
{
    if (n >= 16) {
        size_t i;
        for (i = 0; i + 16 < n; i += 16) rvx__tag_copy16(d + i, s + i);
        rvx__tag_copy16(d + n - 16, s + n - 16);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, s, 8);
        memcpy(&b, s + n - 8, 8);
        memcpy(d, &a, 8);
        memcpy(d + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, s, 4);
        memcpy(&b, s + n - 4, 4);
        memcpy(d, &a, 4);
        memcpy(d + n - 4, &b, 4);
    } else if (n) {
        d[0] = s[0];
        d[n / 2] = s[n / 2];
        d[n - 1] = s[n - 1];
    }
}

RVX_INLINE void rvx__tag_copy(uint8_t *d, const uint8_t *s, size_t n)
{
    if (n <= RVX_TAG_SHORT_MAX) rvx__tag_copy_small(d, s, n);
    else memcpy(d, s, n);
}

/* Keeps a value in a general register (stops the vectorizer from pairing two 8-byte stores
 * through an SSE register, which costs more instructions than it saves). */
#define RVX__TAG_SCALAR(x, y) __asm__("" : "+r"(x), "+r"(y))

RVX_INLINE uint32_t rvx__tag_ld32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
RVX_INLINE uint64_t rvx__tag_ld64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }
RVX_INLINE void rvx__tag_st32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
RVX_INLINE void rvx__tag_st64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

/* Count and drop a frame a correct peer would not send. */
RVX_COLD void rvx__tag_bad(rvx_ep_t *ep, const char *fmt, int a)
{
    ep->worker->stats.tag_bad_frame++;
    rvx__report_bad(ep->worker, RVX__BAD_TAG, fmt, a, ep->rank);
}

static inline void rvx__tag_link_init(rvx__tag_link_t *l) { l->next = l->prev = l; }

static inline void rvx__tag_link_add(rvx__tag_link_t *head, rvx__tag_link_t *l)
{
    l->prev = head->prev;
    l->next = head;
    head->prev->next = l;
    head->prev = l;
}

static inline void rvx__tag_link_del(rvx__tag_link_t *l)
{
    l->prev->next = l->next;
    l->next->prev = l->prev;
    l->next = l->prev = l;
}

/* ---- registration: the rcache (leave pinned) when there is one, else register per use ----- */

RVX_COLD rvx_status_t rvx__tag_reg(struct rvx__tag_state *t, void *addr, size_t len, rvx_mem_t **mem)
{
#if RVX__TAG_RCACHE
    return rvx__rcache_get(&t->rcache, addr, len, mem);
#else
    return rvx_mem_reg(t->w->ctx, addr, len, mem);
#endif
}

RVX_COLD void rvx__tag_dereg(struct rvx__tag_state *t, rvx_mem_t *mem)
{
#if RVX__TAG_RCACHE
    rvx__rcache_put(&t->rcache, mem);
#else
    (void)t;
    rvx_mem_dereg(mem);
#endif
}

/* ---- op pool, ids, lists (cold) -------------------------------------------------------------- */

/* Under AddressSanitizer the protocol part of a pooled op is poisoned while the op is free, so
 * a transport completing into an op that was already released (its tlreq, its chunks) is
 * reported instead of silently writing into the pool. */
#if defined(__SANITIZE_ADDRESS__)
#define RVX__TAG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RVX__TAG_ASAN 1
#endif
#endif
#ifdef RVX__TAG_ASAN
#include <sanitizer/asan_interface.h>
#define RVX__TAG_POISON(op, on)                                                                   \
    ((on) ? ASAN_POISON_MEMORY_REGION(&(op)->alink, sizeof(*(op)) - offsetof(rvx__tag_op_t, alink)) \
          : ASAN_UNPOISON_MEMORY_REGION(&(op)->alink, sizeof(*(op)) - offsetof(rvx__tag_op_t, alink)))
#else
#define RVX__TAG_POISON(op, on) ((void)0)
#endif

RVX_COLD int rvx__tag_grow(struct rvx__tag_state *t)
{
    const unsigned n = 64;
    rvx__tag_op_t *slab;
    unsigned i;
    if (t->nslabs == t->capslabs) {
        unsigned cap = t->capslabs ? 2 * t->capslabs : 8;
        void **s = (void **)realloc(t->slabs, cap * sizeof(*s));
        if (!s) return 0;
        t->slabs = s;
        t->capslabs = cap;
    }
    slab = (rvx__tag_op_t *)calloc(n, sizeof(*slab));
    if (!slab) return 0;
    t->slabs[t->nslabs++] = slab;
    for (i = 0; i < n; i++) {
        slab[i].next = t->free;
        t->free = &slab[i];
        RVX__TAG_POISON(&slab[i], 1);
    }
    return 1;
}

/* Zero the protocol part of an op (a posted receive that a protocol takes over keeps the rest). */
static inline void rvx__tag_op_proto(rvx__tag_op_t *op)
{
    memset((void *)&op->alink, 0, sizeof(*op) - offsetof(rvx__tag_op_t, alink));
    rvx__tag_link_init(&op->alink);
    rvx__tag_link_init(&op->rlink);
}

RVX_COLD rvx__tag_op_t *rvx__tag_op_new(struct rvx__tag_state *t)
{
    rvx__tag_op_t *op;
    if (!t->free && !rvx__tag_grow(t)) return NULL;
    op = t->free;
    t->free = op->next;
    RVX__TAG_POISON(op, 0);
    memset((void *)op, 0, offsetof(rvx__tag_op_t, alink));
    rvx__tag_op_proto(op);
    return op;
}

/* A send of len bytes from buf to ep, starting in `state` (eager frames or the RTS). */
RVX_COLD rvx__tag_op_t *rvx__tag_send_op(struct rvx__tag_state *t, rvx_ep_t *ep, const void *buf,
                                         size_t len, uint64_t tag, unsigned state)
{
    rvx__tag_op_t *op = rvx__tag_op_new(t);
    if (!op) return NULL;
    op->kind = RVX__OP_SEND;
    op->state = (uint8_t)state;
    op->buf = (uint8_t *)(uintptr_t)buf;
    op->len = op->mlen = len;
    op->tag = tag;
    op->ep = ep;
    return op;
}

static inline void rvx__tag_op_free(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    op->kind = 0;
    if (RVX_UNLIKELY(op == &t->lone_op)) { /* not in the pool: free for the next lone receive */
        op->next = NULL;
        t->lone = NULL;
        return;
    }
    op->next = t->free;
    t->free = op;
    RVX__TAG_POISON(op, 1);
}

RVX_COLD uint32_t rvx__tag_id_new(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    uint32_t slot, id;
    if (!t->nidfree) {
        uint32_t cap = t->idcap ? 2 * t->idcap : 64, i;
        rvx__tag_op_t **ids;
        uint32_t *fr;
        if (cap > (1u << 20)) return 0;
        ids = (rvx__tag_op_t **)realloc(t->ids, cap * sizeof(*ids));
        if (!ids) return 0;
        t->ids = ids;
        fr = (uint32_t *)realloc(t->idfree, cap * sizeof(*fr));
        if (!fr) return 0;
        t->idfree = fr;
        for (i = cap; i-- > (t->idcap ? t->idcap : 1);) { /* slot 0 is never used: id 0 = none */
            t->ids[i] = NULL;
            t->idfree[t->nidfree++] = i;
        }
        if (!t->idcap) t->ids[0] = NULL;
        t->idcap = cap;
    }
    slot = t->idfree[--t->nidfree];
    t->idgen = (t->idgen + 1) & 0xfff;
    id = slot | t->idgen << 20;
    t->ids[slot] = op;
    op->id = id;
    return id;
}

static inline void rvx__tag_id_free(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (!op->id) return;
    t->ids[op->id & 0xfffff] = NULL;
    t->idfree[t->nidfree++] = op->id & 0xfffff;
    op->id = 0;
}

/* The op an id from `ep` names, if it is one of ours in the given kind; NULL otherwise. */
static inline rvx__tag_op_t *rvx__tag_id_find(struct rvx__tag_state *t, uint32_t id, rvx_ep_t *ep,
                                              unsigned kind)
{
    uint32_t slot = id & 0xfffff;
    rvx__tag_op_t *op;
    if (!slot || slot >= t->idcap) return NULL;
    op = t->ids[slot];
    if (!op || op->id != id || op->ep != ep || op->kind != kind) return NULL;
    return op;
}

static inline void rvx__tag_active(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (op->flags & RVX__F_ACTIVE) return;
    op->flags |= RVX__F_ACTIVE;
    rvx__tag_link_add(&t->active, &op->alink);
    t->w->tag_pending++;
}

static inline void rvx__tag_ready(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    rvx__tag_active(t, op);
    if (op->flags & RVX__F_READY) return;
    op->flags |= RVX__F_READY;
    rvx__tag_link_add(&t->ready, &op->rlink);
}

static inline void rvx__tag_unready(rvx__tag_op_t *op)
{
    if (!(op->flags & RVX__F_READY)) return;
    op->flags &= ~RVX__F_READY;
    rvx__tag_link_del(&op->rlink);
}

/* Remove op from a singly linked queue with a tail pointer. */
static inline void rvx__tag_q_del(rvx__tag_op_t **head, rvx__tag_op_t ***tail, rvx__tag_op_t *op)
{
    rvx__tag_op_t **pp = head;
    while (*pp && *pp != op) pp = &(*pp)->next;
    if (!*pp) return;
    *pp = op->next;
    if (*tail == &op->next) *tail = pp;
    op->next = NULL;
}

static inline void rvx__tag_q_add(rvx__tag_op_t ***tail, rvx__tag_op_t *op)
{
    op->next = NULL;
    **tail = op;
    *tail = &op->next;
}

/* Release what an op holds: registration, remote key, staged data, pipeline chunks, id. */
RVX_COLD void rvx__tag_release(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    unsigned i;
    if (op->mem) rvx__tag_dereg(t, op->mem);
    op->mem = NULL;
    if (op->flags & RVX__F_RKEY) {
        rvx_rkey_release(&op->rkey);
#if RVX_LANES > 1
        for (i = 1; i < RVX_LANES; i++) rvx_rkey_release(&op->lrkey[i - 1]);
#endif
    }
    op->flags &= ~RVX__F_RKEY;
    if (op->stage && op->stage != op->small) free(op->stage);
    op->stage = NULL;
    for (i = 0; i < op->nchunks; i++)
        if (op->chunks[i].mem) rvx__tag_dereg(t, op->chunks[i].mem);
    free(op->chunks);
    op->chunks = NULL;
    op->nchunks = 0;
#if RVX_RNDV == RVX_RNDV_PIPELINE
    rvx__pipe_rk_release(op);
#endif
    rvx__tag_id_free(t, op);
}

/* Finish an operation: the user's request gets `st`, the op goes back to the pool. */
RVX_COLD void rvx__tag_done(struct rvx__tag_state *t, rvx__tag_op_t *op, rvx_status_t st)
{
    rvx_request_t *req = op->req;
    rvx__tag_unready(op);
    if (op->flags & RVX__F_ACTIVE) {
        rvx__tag_link_del(&op->alink);
        t->w->tag_pending--;
    }
    if (op->ep && t->peers[op->ep->rank].cur == op) t->peers[op->ep->rank].cur = NULL;
    rvx__tag_release(t, op);
    op->flags = 0;
    rvx__tag_op_free(t, op);
    if (req) req->status = st;
}

/* A receive's status once its data is in: truncated if the buffer was short. */
static inline rvx_status_t rvx__tag_rstatus(const rvx__tag_op_t *op, rvx_status_t st)
{
    if (st != RVX_OK) return st;
    return op->mlen > op->len ? RVX_ERR_MSG_TRUNCATED : RVX_OK;
}

static inline void rvx__tag_fill(rvx__tag_op_t *op, uint64_t tag, size_t mlen, int rank)
{
    if (op->info) {
        op->info->tag = tag;
        op->info->length = mlen;
        op->info->sender = rank;
    }
}

/* A control frame on the reply channel; 0 if there is no room now (the caller retries). */
RVX_COLD int rvx__tag_ctrl(rvx_ep_t *ep, unsigned type, const void *body, size_t len)
{
    void *p = rvx__tl_am_claim(&ep->tl, RVX__CHAN_REPLY, len);
    if (!p) return 0;
    memcpy(p, body, len);
    rvx__tl_am_publish(&ep->tl, RVX__CHAN_REPLY, p, len, RVX__TAG_CLASS | type);
    return 1;
}

/* ---- the send queue of one peer (request channel, in order) -------------------------------- */

static void rvx__tag_sq_push(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    rvx__tag_peer_t *p = &t->peers[op->ep->rank];
    op->next = NULL;
    op->flags |= RVX__F_SQ;
    if (p->sq_head) {
        p->sq_tail->next = op;
    } else {
        p->sq_head = op;
        t->w->tag_queued++;
    }
    p->sq_tail = op;
    rvx__tag_active(t, op);
}

static void rvx__tag_sq_del(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    rvx__tag_peer_t *p = &t->peers[op->ep->rank];
    rvx__tag_op_t **pp = &p->sq_head, *prev = NULL;
    if (!(op->flags & RVX__F_SQ)) return;
    op->flags &= ~RVX__F_SQ;
    while (*pp && *pp != op) { prev = *pp; pp = &(*pp)->next; }
    if (!*pp) return;
    *pp = op->next;
    if (p->sq_tail == op) p->sq_tail = prev;
    if (!p->sq_head) t->w->tag_queued--;
    op->next = NULL;
}

/* Eager frames of a queued send; 1 when all are in the ring. */
RVX_COLD int rvx__tag_emit_eager(rvx__tag_op_t *op)
{
    rvx__tl_ep_t *tl = &op->ep->tl;
    uint8_t *b;
    if (!(op->flags & RVX__F_STARTED)) {
        if (op->len <= RVX__TAG_EAGER1) {
            if (!(b = (uint8_t *)rvx__tl_am_claim(tl, RVX__CHAN_REQUEST, 8 + op->len))) return 0;
            rvx__tag_st64(b, op->tag);
            if (op->len) memcpy(b + 8, op->buf, op->len);
            rvx__tl_am_publish(tl, RVX__CHAN_REQUEST, b, 8 + op->len, RVX__TAG_CLASS | RVX__TF_EAGER);
            op->done = op->len;
            op->flags |= RVX__F_STARTED;
            return 1;
        }
        if (!(b = (uint8_t *)rvx__tl_am_claim(tl, RVX__CHAN_REQUEST, RVX__TAG_FRAME))) return 0;
        rvx__tag_st64(b, op->tag);
        rvx__tag_st64(b + 8, op->len);
        memcpy(b + 16, op->buf, RVX__TAG_FRAME - 16);
        rvx__tl_am_publish(tl, RVX__CHAN_REQUEST, b, RVX__TAG_FRAME, RVX__TAG_CLASS | RVX__TF_FIRST);
        op->done = RVX__TAG_FRAME - 16;
        op->flags |= RVX__F_STARTED;
    }
    while (op->done < op->len) {
        size_t n = op->len - op->done < RVX__TAG_FRAME ? op->len - op->done : RVX__TAG_FRAME;
        if (!(b = (uint8_t *)rvx__tl_am_claim(tl, RVX__CHAN_REQUEST, n))) return 0;
        memcpy(b, op->buf + op->done, n);
        rvx__tl_am_publish(tl, RVX__CHAN_REQUEST, b, n, RVX__TAG_CLASS | RVX__TF_MID);
        op->done += n;
    }
    return 1;
}

/* ---- eager zero-copy -------------------------------------------------------------------------- */

#define RVX__TAG_ZCOPY_MIN ((size_t)(RVX_EAGER_ZCOPY_MIN))

/* A one-frame eager message from RVX_EAGER_ZCOPY_MIN bytes on: the tag as the frame's header and
 * the data straight from buf (rvx__tl_am_zcopy), buf registered through the cache where the
 * transport really reads it in place. RVX_INPROGRESS: req completes when the transport lets go of
 * buf (an op in SS_ZCOPY holds the registration until then); RVX_ERR_NO_RESOURCE: not sent (no
 * room, credit, registration or op), the caller copies instead. */
RVX_COLD rvx_status_t rvx__tag_send_zcopy(struct rvx__tag_state *t, rvx_ep_t *ep, const void *buf,
                                          size_t len, uint64_t tag, rvx_request_t *req)
{
    uint8_t hdr[8];
    rvx__tag_st64(hdr, tag);
#if RVX__TL_AM_ZCOPY
    {
        rvx__tag_op_t *op;
        rvx_mem_t *mem;
        rvx_status_t st;
        if (rvx__tag_reg(t, (void *)(uintptr_t)buf, len, &mem) != RVX_OK) return RVX_ERR_NO_RESOURCE;
        if (!(op = rvx__tag_send_op(t, ep, buf, len, tag, RVX__SS_ZCOPY))) {
            rvx__tag_dereg(t, mem);
            return RVX_ERR_NO_RESOURCE;
        }
        op->mem = mem;
        rvx_request_init(&op->tlreq);
        st = rvx__tl_am_zcopy(&ep->tl, RVX__CHAN_REQUEST, hdr, 8, buf, len, &mem->tl,
                              RVX__TAG_CLASS | RVX__TF_EAGER, &op->tlreq);
        if (st == RVX_OK || st == RVX_INPROGRESS) t->n_zcopy++;
        if (st == RVX_INPROGRESS) {
            op->req = req;
            op->flags |= RVX__F_ISSUED;
            req->status = RVX_INPROGRESS;
            rvx__tag_ready(t, op); /* polled until the transport lets go */
            return RVX_INPROGRESS;
        }
        rvx__tag_done(t, op, RVX_OK); /* no request: nothing to tell */
        return st;
    }
#else
    {
        rvx_status_t st = rvx__tl_am_zcopy(&ep->tl, RVX__CHAN_REQUEST, hdr, 8, buf, len, NULL,
                                           RVX__TAG_CLASS | RVX__TF_EAGER, NULL);
        (void)req;
        if (st == RVX_OK) t->n_zcopy++;
        return st;
    }
#endif
}

/* A zero-copy eager send, polled from the ready list: done when the transport is. */
RVX_COLD int rvx__tag_zcopy_step(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (op->tlreq.status == RVX_INPROGRESS) {
        rvx__tag_ready(t, op);
        return 0;
    }
    op->flags &= ~RVX__F_ISSUED;
    rvx__tag_done(t, op, (rvx_status_t)op->tlreq.status);
    return 1;
}

static int rvx__rndv_emit(struct rvx__tag_state *t, rvx__tag_op_t *op);
static void rvx__rndv_sent(struct rvx__tag_state *t, rvx__tag_op_t *op);

/* Send what the peer's queue holds, in order, until the ring is full. */
RVX_COLD int rvx__tag_sq_run(struct rvx__tag_state *t, rvx__tag_peer_t *p)
{
    rvx__tag_op_t *op;
    int n = 0;
    while ((op = p->sq_head) != NULL) {
        int sent = op->state == RVX__SS_EAGER ? rvx__tag_emit_eager(op) : rvx__rndv_emit(t, op);
        if (!sent) break;
        p->sq_head = op->next;
        if (!p->sq_head) {
            p->sq_tail = NULL;
            t->w->tag_queued--;
        }
        op->next = NULL;
        op->flags &= ~RVX__F_SQ;
        n++;
        if (op->state == RVX__SS_EAGER) rvx__tag_done(t, op, RVX_OK);
        else rvx__rndv_sent(t, op);
    }
    return n;
}

/* ---- arrival helpers ---------------------------------------------------------------------- */

/* The lone receive joins the expected queue as its oldest entry (every receive in the queue was
 * posted after it: posting spills it first). */
static inline void rvx__tag_spill(struct rvx__tag_state *t)
{
    rvx__tag_op_t *op = &t->lone_op;
    if (!RVX__LONE_POSTED(t)) return;
    op->req = t->lone;
    t->lone = RVX__LONE_QUEUED;
    rvx__tag_op_proto(op);
    op->kind = 0;
    op->next = t->exp_head;
    if (!t->exp_head) t->exp_tail = &op->next;
    t->exp_head = op;
}

/* Match a message (tag, sender) against the posted receives, in posting order; the match is
 * unlinked. */
static inline rvx__tag_op_t *rvx__tag_match(struct rvx__tag_state *t, uint64_t tag, int rank)
{
    rvx__tag_op_t **pp, *op;
    rvx__tag_spill(t);
    for (pp = &t->exp_head; (op = *pp) != NULL; pp = &op->next) {
        if (((op->tag ^ tag) & op->mask) == 0 && (op->src < 0 || op->src == rank)) {
            *pp = op->next;
            if (t->exp_tail == &op->next) t->exp_tail = pp;
            op->next = NULL;
            return op;
        }
    }
    return NULL;
}

/* A new unexpected entry at the end of the queue. */
RVX_COLD rvx__tag_op_t *rvx__tag_unexp(struct rvx__tag_state *t, rvx_ep_t *ep, uint64_t tag,
                                       size_t mlen, unsigned state)
{
    rvx__tag_op_t *u = rvx__tag_op_new(t);
    if (!u) {
        rvx__log("tag: out of memory for an unexpected message from rank %d; dropped", ep->rank);
        return NULL;
    }
    u->kind = RVX__OP_UNEXP;
    u->state = (uint8_t)state;
    u->tag = tag;
    u->mlen = mlen;
    u->ep = ep;
    rvx__tag_q_add(&t->unx_tail, u);
    return u;
}

/* Room for `n` bytes of unexpected data (n <= mlen); NULL records RVX_ERR_NO_MEMORY. */
RVX_COLD void rvx__tag_stage(rvx__tag_op_t *u, size_t n)
{
    u->stage = n <= RVX__TAG_SMALL ? u->small : (uint8_t *)malloc(n);
    if (!u->stage) u->status = RVX_ERR_NO_MEMORY;
}

#include "rndv.h"

/* ---- set-up and tear-down (cold; called by core.h) ------------------------------------------ */

static rvx_status_t rvx__tag_worker_init(rvx_worker_t *w)
{
    struct rvx__tag_state *t = (struct rvx__tag_state *)calloc(1, sizeof(*t));
    unsigned i;
    if (!t) return RVX_ERR_NO_MEMORY;
    t->w = w;
    t->npeers = w->ctx->boot.size;
    t->peers = (rvx__tag_peer_t *)calloc((size_t)t->npeers, sizeof(*t->peers));
    if (!t->peers || !rvx__tag_grow(t)) {
        free(t->peers);
        free(t->slabs);
        free(t);
        return RVX_ERR_NO_MEMORY;
    }
    t->exp_tail = &t->exp_head;
    t->unx_tail = &t->unx_head;
    t->lone_op.src = RVX_ANY_SOURCE; /* only rvx_tag_recv posts lone receives */
    t->page = (size_t)sysconf(_SC_PAGESIZE);
    rvx__tag_link_init(&t->active);
    rvx__tag_link_init(&t->ready);
    for (i = 0; i < RVX_PIPE_BOUNCE_BUFS; i++) t->bslot[i].status = RVX_OK;
#if RVX__TAG_RCACHE
    {
        rvx_status_t st = rvx__rcache_init(&t->rcache, w->ctx);
        if (st != RVX_OK) {
            free(t->slabs[0]);
            free(t->slabs);
            free(t->peers);
            free(t);
            return st;
        }
    }
#endif
    w->tag = t;
    w->tag_pending = 0;
    w->tag_queued = 0;
    return RVX_OK;
}

/* Is op, tied to a departing endpoint, still being written by either side? Its own transport
 * operations (a GET, PUT, flush or chunk in flight), or, for PUT and PIPELINE, a receive whose
 * RTR went out: the peer may be writing into its buffer until the FIN. */
RVX_COLD int rvx__tag_closing_busy(const rvx__tag_op_t *op, int peer_alive)
{
    if (!rvx__rndv_quiet(op)) return 1;
#if RVX_RNDV == RVX_RNDV_PUT || RVX_RNDV == RVX_RNDV_PIPELINE
    if (op->kind == RVX__OP_RECV && op->state == RVX__RS_WAIT && op->ep && peer_alive) return 1;
#else
    (void)peer_alive;
#endif
    return 0;
}

/* The endpoint goes away. Operations on it end with RVX_ERR_CANCELED, unless they finish first:
 * an op whose transfer is still in the transport (or, PUT/PIPELINE, whose peer may still write
 * into its buffer) becomes a zombie that keeps its request, and progress runs until it is quiet;
 * only then does its request get the status and its memory (op, registration, staging) go. So
 * the transport never completes into freed state and no byte lands in a buffer whose request
 * has completed. Bounded: a peer that stops answering fails its operations in the transport;
 * after RVX__TAG_CLOSE_S seconds the rest complete anyway (reported) and their registrations
 * are dropped from the cache, so a late remote write fails at the writer. What the peer sent
 * and nobody received yet is dropped. */
#ifndef RVX__TAG_CLOSE_S
#define RVX__TAG_CLOSE_S 10.0
#endif
static void rvx__tag_ep_destroy(rvx_ep_t *ep)
{
    struct rvx__tag_state *t = ep->worker->tag;
    rvx__tag_link_t *l, *nx;
    rvx__tag_op_t *u, *un;
    double t0;
    if (!t) return;
    t0 = rvx__now_s();
    for (;;) {
        int busy = 0, late = rvx__now_s() - t0 > RVX__TAG_CLOSE_S;
        /* asked before the walk: asking drains the transport, which may complete any op */
        int alive = rvx__tl_ep_alive(&ep->tl) == RVX_OK;
        for (l = t->active.next; l != &t->active; l = nx) {
            rvx__tag_op_t *op = RVX_CONTAINER_OF(l, rvx__tag_op_t, alink);
            nx = l->next;
            if (op->ep != ep || op->kind == RVX__OP_UNEXP) continue;
            if (op->flags & RVX__F_SQ) rvx__tag_sq_del(t, op); /* not sent: nothing to wait for */
            if (t->peers[ep->rank].cur == op) t->peers[ep->rank].cur = NULL;
            if (!late && rvx__tag_closing_busy(op, alive)) {
                /* a receive waiting for the peer's writes stays as it is: its FIN completes it */
                if (op->state != RVX__RS_ZOMBIE && !rvx__rndv_quiet(op)) {
                    op->state = RVX__RS_ZOMBIE; /* no more steps: wait for quiet, then done */
                    op->status = RVX_ERR_CANCELED;
                    rvx__tag_ready(t, op);
                }
                busy = 1;
                continue;
            }
            if (late) {
                rvx__log("tag: an operation to rank %d still in flight after %.0f s; released",
                         ep->rank, (double)RVX__TAG_CLOSE_S);
                op->nposted = 0;
                op->flags &= ~RVX__F_ISSUED;
#if RVX__TAG_RCACHE
                if (op->buf && op->eff) {
                    uint8_t *b = op->buf;
                    size_t n = op->eff;
                    rvx__tag_done(t, op, RVX_ERR_CANCELED);
                    rvx__rcache_invalidate(&t->rcache, b, n);
                    continue;
                }
#endif
            }
            rvx__tag_done(t, op, op->state == RVX__RS_ZOMBIE && !op->req ? RVX_OK
                                 : op->state == RVX__SS_ZCOPY ? (rvx_status_t)op->tlreq.status /* sent */
                                 : RVX_ERR_CANCELED);
        }
        for (u = t->unx_head; u; u = un) {
            un = u->next;
            if (u->ep == ep) {
                rvx__tag_q_del(&t->unx_head, &t->unx_tail, u);
                rvx__tag_done(t, u, RVX_ERR_CANCELED);
            }
        }
        if (!busy) break;
        rvx_progress(ep->worker); /* completes the transfers; zombies that went quiet end there */
    }
}

static void rvx__tag_worker_fini(rvx_worker_t *w)
{
    struct rvx__tag_state *t = w->tag;
    unsigned i;
    if (!t) return;
    while (t->active.next != &t->active)
        rvx__rndv_fail(t, RVX_CONTAINER_OF(t->active.next, rvx__tag_op_t, alink), RVX_ERR_CANCELED);
    while (t->unx_head) {
        rvx__tag_op_t *u = t->unx_head;
        t->unx_head = u->next;
        rvx__tag_done(t, u, RVX_ERR_CANCELED);
    }
    if (t->bounce) rvx_mem_dereg(t->bounce);
#if RVX__TAG_RCACHE
    rvx__rcache_fini(&t->rcache);
#endif
    for (i = 0; i < t->nslabs; i++) {
#ifdef RVX__TAG_ASAN
        ASAN_UNPOISON_MEMORY_REGION(t->slabs[i], 64 * sizeof(rvx__tag_op_t));
#endif
        free(t->slabs[i]);
    }
    free(t->slabs);
    free(t->peers);
    free(t->ids);
    free(t->idfree);
    free(t);
    w->tag = NULL;
}

/* ---- send ------------------------------------------------------------------------------------ */

RVX_COLD rvx_status_t rvx__tag_send_slow(rvx_ep_t *ep, const void *buf, size_t len, uint64_t tag,
                                         rvx_request_t *req)
{
    struct rvx__tag_state *t;
    rvx__tag_peer_t *p;
    rvx__tag_op_t *op;
    if (!ep || (len && !buf)) return RVX_ERR_INVALID_PARAM;
    t = ep->worker->tag;
    p = &t->peers[ep->rank];
    if (len < RVX__TAG_THRESH) {
        if (!p->sq_head) {
            uint8_t *b;
            if (len >= RVX__TAG_ZCOPY_MIN && len <= RVX__TAG_EAGER1 && req) {
                rvx_status_t st = rvx__tag_send_zcopy(t, ep, buf, len, tag, req);
                if (st != RVX_ERR_NO_RESOURCE) return st; /* else: copied, or queued, below */
            }
            if (len <= RVX__TAG_EAGER1 &&
                (b = (uint8_t *)rvx__tl_am_claim(&ep->tl, RVX__CHAN_REQUEST, 8 + len)) != NULL) {
                rvx__tag_st64(b, tag);
                rvx__tag_copy(b + 8, (const uint8_t *)buf, len);
                rvx__tl_am_publish(&ep->tl, RVX__CHAN_REQUEST, b, 8 + len, RVX__TAG_CLASS | RVX__TF_EAGER);
                return RVX_OK;
            }
            if (len <= RVX__TAG_EAGER1 && rvx__tl_ep_alive(&ep->tl) != RVX_OK) return RVX_ERR_PEER_FAILED;
        }
        if (!req) return RVX_ERR_INVALID_PARAM;
        if (!(op = rvx__tag_send_op(t, ep, buf, len, tag, RVX__SS_EAGER))) return RVX_ERR_NO_MEMORY;
        op->req = req;
        req->status = RVX_INPROGRESS;
        rvx__tag_sq_push(t, op);
        rvx__tag_sq_run(t, p);
        /* everything fitted in the ring: complete now, like a one-frame send */
        return (rvx_status_t)req->status;
    }
    if (!req) return RVX_ERR_INVALID_PARAM;
    return rvx__rndv_send(t, ep, buf, len, tag, req);
}

/* Send a tagged message to ep's peer. Short messages are a claim, a few stores and a publish. */
RVX_INLINE rvx_status_t rvx_tag_send(rvx_ep_t *ep, const void *buf, size_t len, uint64_t tag,
                                     rvx_request_t *req)
{
    if (len <= RVX_TAG_SHORT_MAX && len < RVX__TAG_THRESH && RVX_LIKELY(!ep->worker->tag_queued)) {
        uint8_t *b = (uint8_t *)rvx__tl_am_claim(&ep->tl, RVX__CHAN_REQUEST, 8 + len);
        if (RVX_LIKELY(b != NULL)) {
            rvx__tag_st64(b, tag);
            rvx__tag_copy_small(b + 8, (const uint8_t *)buf, len);
            rvx__tl_am_publish(&ep->tl, RVX__CHAN_REQUEST, b, 8 + len, RVX__TAG_CLASS | RVX__TF_EAGER);
            return RVX_OK;
        }
    }
    return rvx__tag_send_slow(ep, buf, len, tag, req);
}

/* ---- receive --------------------------------------------------------------------------------- */

/* A posted receive takes an unexpected message (unlinked by the caller). */
RVX_COLD rvx_status_t rvx__tag_take(struct rvx__tag_state *t, rvx__tag_op_t *u, void *buf, size_t len,
                                    rvx_request_t *req, rvx_tag_info_t *info)
{
    rvx_status_t st;
    size_t n;
    if (info) {
        info->tag = u->tag;
        info->length = u->mlen;
        info->sender = u->ep->rank;
    }
    n = u->mlen < len ? u->mlen : len;
    if (u->state == RVX__US_DONE) {
        st = u->status ? (rvx_status_t)u->status : u->mlen > len ? RVX_ERR_MSG_TRUNCATED : RVX_OK;
        if (!u->status && n) memcpy(buf, u->stage, n);
        u->req = NULL;
        rvx__tag_done(t, u, RVX_OK);
        return st;
    }
    u->buf = (uint8_t *)buf;
    u->len = len;
    u->req = req;
    u->info = info;
    u->eff = n;
    req->status = RVX_INPROGRESS;
    if (u->state == RVX__US_EAGER) {
        /* fragments still arriving: what is here moves to the buffer, the rest goes there */
        size_t have = u->done < n ? u->done : n;
        if (have && u->stage) memcpy(buf, u->stage, have);
        if (u->stage && u->stage != u->small) free(u->stage);
        u->stage = NULL;
        u->kind = RVX__OP_RECV;
        u->state = RVX__RS_EAGER;
        return RVX_INPROGRESS;
    }
    u->kind = RVX__OP_RECV;
    rvx__rndv_recv_start(t, u, u->stage, u->done);
    return (rvx_status_t)req->status;
}

/* What a posted receive matches and where its data goes. */
RVX_INLINE void rvx__tag_recv_fill(rvx__tag_op_t *op, void *buf, size_t len, uint64_t tag,
                                   uint64_t mask, rvx_tag_info_t *info)
{
    op->tag = tag;
    op->mask = mask;
    op->buf = (uint8_t *)buf;
    op->len = len;
    op->info = info;
}

RVX_COLD rvx_status_t rvx__tag_recv_slow(rvx_worker_t *w, int src, void *buf, size_t len, uint64_t tag,
                                         uint64_t mask, rvx_request_t *req, rvx_tag_info_t *info)
{
    struct rvx__tag_state *t = w->tag;
    rvx__tag_op_t **pp, *op;
    if ((len && !buf) || !req || src < RVX_ANY_SOURCE || src >= t->npeers) return RVX_ERR_INVALID_PARAM;
    rvx__tag_spill(t); /* an older receive: it matches first */
    for (pp = &t->unx_head; *pp; pp = &(*pp)->next) {
        rvx__tag_op_t *u = *pp;
        if (((u->tag ^ tag) & mask) == 0 && (src < 0 || u->ep->rank == src)) {
            *pp = u->next;
            if (t->unx_tail == &u->next) t->unx_tail = pp;
            u->next = NULL;
            return rvx__tag_take(t, u, buf, len, req, info);
        }
    }
    if (!t->free && !rvx__tag_grow(t)) return RVX_ERR_NO_MEMORY;
    op = t->free;
    t->free = op->next;
    RVX__TAG_POISON(op, 0);
    rvx__tag_recv_fill(op, buf, len, tag, mask, info);
    op->req = req;
    op->src = src;
    rvx__tag_q_add(&t->exp_tail, op);
    req->status = RVX_INPROGRESS;
    return RVX_INPROGRESS;
}

/* Post a receive for any sender; matched at once against what has already arrived. With both
 * queues empty (nothing waits to be received, no receive is posted) it becomes the lone receive:
 * six stores into lone_op, no list. */
RVX_INLINE rvx_status_t rvx_tag_recv(rvx_worker_t *w, void *buf, size_t len, uint64_t tag,
                                     uint64_t tag_mask, rvx_request_t *req, rvx_tag_info_t *info)
{
    struct rvx__tag_state *t = w->tag;
    /* one test for the three: no unexpected message, no posted receive, no lone receive */
    if (RVX_LIKELY(((uintptr_t)t->unx_head | (uintptr_t)t->exp_head | (uintptr_t)t->lone) == 0)) {
        rvx__tag_op_t *op = &t->lone_op;
        rvx__tag_recv_fill(op, buf, len, tag, tag_mask, info);
        t->lone = req;
        req->status = RVX_INPROGRESS;
        return RVX_INPROGRESS;
    }
    return rvx__tag_recv_slow(w, RVX_ANY_SOURCE, buf, len, tag, tag_mask, req, info);
}

/* A receive that takes messages from rank `src` only (RVX_ANY_SOURCE: rvx_tag_recv). If that
 * rank fails before a matching message has arrived, req completes with RVX_ERR_PEER_FAILED. */
static inline rvx_status_t rvx_tag_recv_from(rvx_worker_t *w, int src, void *buf, size_t len, uint64_t tag,
                                             uint64_t tag_mask, rvx_request_t *req, rvx_tag_info_t *info)
{
    return rvx__tag_recv_slow(w, src, buf, len, tag, tag_mask, req, info);
}

static inline rvx_status_t rvx_tag_probe(rvx_worker_t *w, uint64_t tag, uint64_t tag_mask,
                                         rvx_tag_info_t *info)
{
    rvx__tag_op_t *u;
    for (u = w->tag->unx_head; u; u = u->next) {
        if (((u->tag ^ tag) & tag_mask) == 0) {
            if (info) {
                info->tag = u->tag;
                info->length = u->mlen;
                info->sender = u->ep->rank;
            }
            return RVX_OK;
        }
    }
    return RVX_INPROGRESS;
}

/* Withdraw a posted receive nothing has matched: RVX_OK (req completes with RVX_ERR_CANCELED),
 * or RVX_ERR_INVALID_PARAM if it is not waiting to be matched (done, or its data is arriving). */
static inline rvx_status_t rvx_tag_cancel(rvx_worker_t *w, rvx_request_t *req)
{
    struct rvx__tag_state *t = w->tag;
    rvx__tag_op_t *op;
    if (t->lone == req) {
        t->lone = NULL;
        req->status = RVX_ERR_CANCELED;
        return RVX_OK;
    }
    for (op = t->exp_head; op; op = op->next) {
        if (op->req == req) {
            rvx__tag_q_del(&t->exp_head, &t->exp_tail, op);
            rvx__tag_op_free(t, op);
            req->status = RVX_ERR_CANCELED;
            return RVX_OK;
        }
    }
    return RVX_ERR_INVALID_PARAM;
}

/* Memory about to be freed or unmapped: drop its registrations from the cache (leave-pinned
 * buffers), so that a later buffer at the same address is registered afresh. */
static inline void rvx_tag_mem_invalidate(rvx_worker_t *w, void *addr, size_t len)
{
    struct rvx__tag_state *t = w->tag;
    uintptr_t a = (uintptr_t)addr;
    unsigned i;
    for (i = 0; i < RVX__PIPE_MEMO; i++)
        if (t->memo[i].len && t->memo[i].addr < a + len && a < t->memo[i].addr + t->memo[i].len)
            t->memo[i].len = 0;
#if RVX__TAG_RCACHE
    rvx__rcache_invalidate(&t->rcache, addr, len);
#endif
}

/* ---- arrival --------------------------------------------------------------------------------- */

RVX_COLD void rvx__tag_rx_eager(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *body, size_t len)
{
    uint64_t tag = rvx__tag_ld64(body);
    size_t plen = len - 8;
    rvx__tag_op_t *op = rvx__tag_match(t, tag, ep->rank);
    if (op) {
        rvx_request_t *req = op->req;
        rvx_status_t st = plen > op->len ? RVX_ERR_MSG_TRUNCATED : RVX_OK;
        rvx__tag_copy(op->buf, body + 8, plen < op->len ? plen : op->len);
        rvx__tag_fill(op, tag, plen, ep->rank);
        rvx__tag_op_free(t, op);
        req->status = st;
        return;
    }
    if ((op = rvx__tag_unexp(t, ep, tag, plen, RVX__US_DONE)) == NULL) return;
    rvx__tag_stage(op, plen);
    if (op->stage && plen) memcpy(op->stage, body + 8, plen);
    op->done = plen;
}

RVX_COLD void rvx__tag_rx_first(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *body, size_t len)
{
    rvx__tag_peer_t *p = &t->peers[ep->rank];
    uint64_t tag = rvx__tag_ld64(body), mlen = rvx__tag_ld64(body + 8);
    size_t n = len - 16;
    rvx__tag_op_t *op;
    if (p->cur || mlen <= n || mlen >= RVX__TAG_MLEN_MAX) {
        rvx__tag_bad(ep, "dropped a first eager fragment (length %d) from rank %d", (int)(mlen & 0x7fffffff));
        return;
    }
    if ((op = rvx__tag_match(t, tag, ep->rank)) != NULL) {
        rvx__tag_op_proto(op);
        op->kind = RVX__OP_RECV;
        op->state = RVX__RS_EAGER;
        op->ep = ep;
        op->mlen = (size_t)mlen;
        op->eff = op->mlen < op->len ? op->mlen : op->len;
        if (op->eff) memcpy(op->buf, body + 16, n < op->eff ? n : op->eff);
        rvx__tag_fill(op, tag, op->mlen, ep->rank);
    } else {
        if ((op = rvx__tag_unexp(t, ep, tag, (size_t)mlen, RVX__US_EAGER)) == NULL) return;
        rvx__tag_stage(op, (size_t)mlen);
        if (op->stage) memcpy(op->stage, body + 16, n);
    }
    op->done = n;
    p->cur = op;
    rvx__tag_active(t, op); /* waits on the peer for the rest */
}

RVX_COLD void rvx__tag_rx_mid(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *body, size_t len)
{
    rvx__tag_peer_t *p = &t->peers[ep->rank];
    rvx__tag_op_t *op = p->cur;
    if (!op || len > op->mlen - op->done || !len) {
        rvx__tag_bad(ep, "dropped an eager fragment of %d bytes from rank %d", (int)len);
        return;
    }
    if (op->kind == RVX__OP_RECV) {
        if (op->done < op->eff)
            memcpy(op->buf + op->done, body, len < op->eff - op->done ? len : op->eff - op->done);
    } else if (op->stage) {
        memcpy(op->stage + op->done, body, len);
    }
    op->done += len;
    if (op->done < op->mlen) return;
    p->cur = NULL;
    if (op->kind == RVX__OP_RECV) {
        rvx__tag_done(t, op, rvx__tag_rstatus(op, (rvx_status_t)op->status)); /* staging may have failed */
    } else {
        op->state = RVX__US_DONE;
        if (op->flags & RVX__F_ACTIVE) {
            op->flags &= ~RVX__F_ACTIVE;
            rvx__tag_link_del(&op->alink);
            t->w->tag_pending--;
        }
    }
}

RVX_COLD void rvx__tag_rx_slow(rvx_ep_t *ep, unsigned chan, unsigned info, void *vbody, size_t len)
{
    struct rvx__tag_state *t = ep->worker->tag;
    const uint8_t *body = (const uint8_t *)vbody;
    unsigned type = info & 0x3fff;
    switch (type) {
    case RVX__TF_EAGER:
        if (len >= 8) { rvx__tag_rx_eager(t, ep, body, len); return; }
        break;
    case RVX__TF_FIRST:
        if (len > 16 && chan == RVX__CHAN_REQUEST) { rvx__tag_rx_first(t, ep, body, len); return; }
        break;
    case RVX__TF_MID:
        if (chan == RVX__CHAN_REQUEST) { rvx__tag_rx_mid(t, ep, body, len); return; }
        break;
    default:
        if (rvx__rndv_rx(t, ep, chan, type, body, len)) return;
        break;
    }
    rvx__tag_bad(ep, "dropped a malformed tag frame (type %d) from rank %d", (int)type);
}

/* A tag frame from the tl (through proto/rx.h): everything but the fast path below, out of line. */
RVX_INLINE void rvx__tag_rx(rvx_ep_t *ep, unsigned chan, unsigned info, void *body, size_t len)
{
    rvx__tag_rx_slow(ep, chan, info, body, len);
}

/* The matched-expected fast path, in line in the tl's poll loop with no call: an eager frame with
 * 8 to 16 bytes of data for the lone receive (the only one posted), exact tag, which it fits. The
 * data moves as two overlapping 8-byte words (no length branches); completion is the info
 * stores, the lone slot freed and the request's status. Anything else (other sizes, a wildcard
 * or queued receive, a short buffer) takes rvx__tag_rx_slow, a tail call. */
RVX_INLINE void rvx__tag_rx_eager_fast(rvx_ep_t *ep, unsigned chan, void *body, size_t len)
{
    struct rvx__tag_state *t = ep->worker->tag;
    const uint8_t *b = (const uint8_t *)body;
    size_t plen = len - 8; /* a frame shorter than a tag wraps around and goes the slow way */
    rvx_request_t *req = t->lone;
    if (RVX_LIKELY(plen - 8 <= 8 && (uintptr_t)req > 1)) {
        rvx__tag_op_t *op = &t->lone_op;
        uint64_t tag = rvx__tag_ld64(b);
        if (RVX_LIKELY(op->tag == tag && plen <= op->len)) {
            rvx_tag_info_t *ti = op->info;
            uint8_t *d = op->buf;
            rvx__tag_st64(d, rvx__tag_ld64(b + 8));
            rvx__tag_st64(d + plen - 8, rvx__tag_ld64(b + len - 8));
            t->lone = NULL;
            if (ti) {
                RVX__TAG_SCALAR(tag, plen); /* two plain stores; SSE would pack them first */
                ti->tag = tag;
                ti->length = plen;
                ti->sender = ep->rank;
            }
            req->status = RVX_OK;
            return;
        }
    }
    rvx__tag_rx_slow(ep, chan, RVX__TAG_CLASS | RVX__TF_EAGER, body, len);
}

/* ---- progress hook -------------------------------------------------------------------------- */

/* Receives are posted (rvx_progress asks when it found nothing to do). */
RVX_INLINE int rvx__tag_posted(const rvx_worker_t *w)
{
    const struct rvx__tag_state *t = w->tag;
    return ((uintptr_t)t->lone | (uintptr_t)t->exp_head) != 0;
}

static int rvx__tag_check_recvs(struct rvx__tag_state *t);

/* Whether each peer with an endpoint still lives, into t->peers[r].dead. Asked before any queue
 * is walked, never during a walk: asking drains the transport's completions, which can complete
 * and unlink the very operation a walk stands on (and a walk resumed from an unlinked op never
 * returns to the list head). */
RVX_COLD void rvx__tag_verdicts(struct rvx__tag_state *t)
{
    rvx_worker_t *w = t->w;
    int r;
    for (r = 0; r < t->npeers; r++) t->peers[r].dead = w->eps[r] && rvx__tl_ep_alive(&w->eps[r]->tl) != RVX_OK;
}

/* The liveness checks run at most every 10 ms; when one is due, the verdicts are taken fresh. */
RVX_COLD int rvx__tag_check_due(struct rvx__tag_state *t)
{
    double now = rvx__now_s();
    if (now - t->last_check < 0.01) return 0;
    t->last_check = now;
    rvx__tag_verdicts(t);
    return 1;
}

/* Every ~10 ms while operations wait: those whose peer is gone fail. What the peer sent before it
 * went is drained first, so a finished transfer is not reported as failed. The walk starts over
 * after anything that may change the list (the drain, a failure). */
RVX_COLD int rvx__tag_check_peers(struct rvx__tag_state *t)
{
    rvx__tag_link_t *l;
    int n = 0, drained = 0;
    if (!rvx__tag_check_due(t)) return 0;
again:
    for (l = t->active.next; l != &t->active; l = l->next) {
        rvx__tag_op_t *op = RVX_CONTAINER_OF(l, rvx__tag_op_t, alink);
        if (!op->ep || op->state == RVX__RS_ZOMBIE || !t->peers[op->ep->rank].dead) continue;
        if (!drained) {
            unsigned k;
            drained = 1;
            for (k = 0; k < 1000 && rvx__tl_progress(&t->w->iface); k++) {}
            goto again;
        }
        rvx__rndv_fail(t, op, RVX_ERR_PEER_FAILED);
        n++;
        goto again;
    }
    if (t->exp_head || RVX__LONE_POSTED(t)) n += rvx__tag_check_recvs(t);
    return n;
}

/* Posted receives that nobody alive can match any more: one naming a sender whose endpoint has
 * failed, or an any-source one once the worker has an endpoint to every other rank and all of
 * them have failed (ourselves excepted: MPI's view, a wildcard receive is not satisfiable by its
 * own rank's later sends). What the dead sent before going is drained first, so a message
 * already in a ring completes its receive instead. Uses the verdicts of rvx__tag_verdicts. */
RVX_COLD int rvx__tag_dead_src(struct rvx__tag_state *t, int src, int anydead)
{
    return src < 0 ? anydead : t->peers[src].dead;
}

RVX_COLD int rvx__tag_check_recvs(struct rvx__tag_state *t)
{
    rvx_worker_t *w = t->w;
    int r, me = w->ctx->boot.rank, anydead = t->npeers > 1, n = 0, pass;
    rvx__tag_op_t **pp, *op;
    for (r = 0; r < t->npeers && anydead; r++)
        if (r != me && !t->peers[r].dead) anydead = 0; /* alive, or no endpoint to it */
    if (anydead && w->eps[me]) {
        /* what we sent ourselves may still be on its way (a NIC loopback): no verdict on
         * any-source receives until a flush of that endpoint says it has all landed */
        if (t->self_flush.status == RVX_INPROGRESS) {
            anydead = 0;
        } else {
            rvx_request_init(&t->self_flush);
            if (rvx__tl_ep_flush(&w->eps[me]->tl, &t->self_flush) == RVX_INPROGRESS) anydead = 0;
            else t->self_flush.status = RVX_OK;
        }
    }
    for (pass = 0; pass < 2; pass++) {
        int found = RVX__LONE_POSTED(t) && anydead;
        for (op = t->exp_head; op && !found; op = op->next) found = rvx__tag_dead_src(t, op->src, anydead);
        if (!found) return n;
        if (pass == 0) { /* drain what arrived from the dead first, then look again */
            unsigned k;
            for (k = 0; k < 1000 && rvx__tl_progress(&w->iface); k++) {}
            continue;
        }
        if (RVX__LONE_POSTED(t) && anydead) {
            rvx_request_t *req = t->lone;
            t->lone = NULL;
            req->status = RVX_ERR_PEER_FAILED;
            n++;
        }
        for (pp = &t->exp_head; (op = *pp) != NULL;) {
            rvx_request_t *req = op->req;
            if (!rvx__tag_dead_src(t, op->src, anydead)) { pp = &op->next; continue; }
            *pp = op->next;
            if (t->exp_tail == &op->next) t->exp_tail = pp;
            rvx__tag_op_free(t, op);
            req->status = RVX_ERR_PEER_FAILED;
            n++;
        }
    }
    return n;
}

/* rvx_progress found nothing to do with receives posted: now and then (every 64th idle call,
 * at most every 10 ms) look for posted receives whose senders are gone. */
RVX_COLD int rvx__tag_idle(rvx_worker_t *w)
{
    struct rvx__tag_state *t = w->tag;
    if ((++t->tick & 63) || !rvx__tag_check_due(t)) return 0;
    return rvx__tag_check_recvs(t);
}

/* rvx_progress while tag operations are in flight: the transport first (arrivals may move them),
 * then the send queues, the ready steps, and now and then the peers' liveness. */
RVX_COLD int rvx__tag_progress(rvx_worker_t *w)
{
    struct rvx__tag_state *t = w->tag;
    int n = rvx__tl_progress(&w->iface);
#if RVX_LANES > 1
    { /* the other lanes carry rendezvous data only: polled while they have some in flight */
        unsigned l;
        for (l = 1; l < RVX_LANES; l++)
            if (w->lane_iface[l - 1].outstanding) n += rvx__tl_progress(&w->lane_iface[l - 1]);
    }
#endif
    if (w->tag_queued) {
        int r;
        for (r = 0; r < t->npeers; r++)
            if (t->peers[r].sq_head) n += rvx__tag_sq_run(t, &t->peers[r]);
    }
    if (t->ready.next != &t->ready) n += rvx__rndv_run_ready(t);
    if ((++t->tick & 63) == 0) n += rvx__tag_check_peers(t);
    return n;
}

#endif /* RVX_PROTO_TAG_H */
