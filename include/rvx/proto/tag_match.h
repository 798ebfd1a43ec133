/* rvx/proto/tag_match.h: tag matching's operations and matching queues (the API is proto/tag.h).
 *
 * What every part of tag matching shares, in the order they use it: the wire format, the operation
 * (one struct for an unexpected message, a send and a receive a protocol drives, in a pool; a
 * posted receive waits in a small record of its own until matched), the worker's tag
 * state, registration through the cache, operation ids, the active and ready lists, the send
 * queue of each peer, and the matching itself: posted receives in posting order (the lone receive
 * first), unexpected messages in arrival order. The rendezvous protocol (proto/rndv/) and the API
 * (proto/tag.h) are written on top of this file; it calls neither. */
#ifndef RVX_PROTO_TAG_MATCH_H
#define RVX_PROTO_TAG_MATCH_H

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
    rvx_request_t req[RVX_LANES];      /* its stripe on each lane */
    unsigned      lposted;             /* bit l: lane l's stripe is in the transport */
} rvx__tag_chunk_t;

/* What an operation is (op->kind): a posted receive, an unexpected message, a send. */
enum { RVX__KIND_RECV = 1, RVX__KIND_UNEXP, RVX__KIND_SEND };
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
    RVX__SS_ZCOPY,     /* eager zero-copy: the frame leaves from the user's buffer */
    /* any kind */
    RVX__S_ZOMBIE      /* failed or canceled; its transfer is still in the transport */
};
#define RVX__F_READY   1u
#define RVX__F_ACTIVE  2u
#define RVX__F_SQ      4u
#define RVX__F_RKEY    8u
#define RVX__F_STARTED 16u
#define RVX__F_ISSUED  32u
#define RVX__F_LFLUSH  64u /* lanes: a GET part was canceled; a flush learns the lane's error */

/* What matching reads, declared once for its two homes: the record a posted receive waits in
 * (rvx__tag_rop_t) and the head of a full op. */
#define RVX__TAG_MATCH_FIELDS(self)                                                                \
    self           *next;   /* the list it is in (expected, unexpected, free, a send queue) */    \
    uint64_t        tag;                                                                        \
    uint64_t        mask;                                                                       \
    rvx_request_t  *req;                                                                        \
    int32_t         src;    /* posted receive: the sender it takes (RVX_ANY_SOURCE: any) */

/* A posted receive nothing has matched yet: 40 bytes while it waits. Where its data goes (buffer,
 * length, info) is kept in its request, which rvx owns until it completes (RVX__TAG_RQ_*). A
 * match that starts a protocol (eager fragments, a rendezvous) moves it into a full op
 * (rvx__tag_claim); one that completes at once (a single eager frame) never needs one. */
typedef struct rvx__tag_rop rvx__tag_rop_t;
struct rvx__tag_rop {
    RVX__TAG_MATCH_FIELDS(rvx__tag_rop_t)
};
#define RVX__TAG_RQ_BUF(req)  ((uint8_t *)(uintptr_t)(req)->tl_private[0])
#define RVX__TAG_RQ_LEN(req)  ((size_t)(req)->tl_private[1])
#define RVX__TAG_RQ_INFO(req) ((rvx_tag_info_t *)(uintptr_t)(req)->tl_private[2])

typedef struct rvx__tag_op rvx__tag_op_t;
struct rvx__tag_op {
    RVX__TAG_MATCH_FIELDS(rvx__tag_op_t)
    uint8_t        *buf;
    size_t          len;    /* receive: buffer length; send: message length */
    rvx_tag_info_t *info;
    /* protocol state: zeroed when an op enters the protocol (rvx__tag_op_proto) */
    rvx__tag_link_t alink;  /* active list: in flight, counted in w->proto_pending */
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
    rvx_rkey_t      rkey[RVX_LANES];      /* the peer's key on each lane */
    rvx_request_t   tlreq[RVX_LANES];     /* the op's transfer (or flush) on each lane; lane 0's
                                             is also an eager zero-copy send's */
    unsigned        lposted;              /* bit l: lane l's part is in the transport */
    unsigned        lused;                /* bit l: lane l carried data (flushed before FIN) */
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
    unsigned       verdict;           /* liveness: round << 1 | dead (rvx__tag_verdicts) */
    int            qnext;             /* in the list of peers with queued frames (t->qhead): the
                                       * next one (-2: the last); -1: not in it */
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
#include "rcache.h"
#endif

/* The blocks a pool was grown by, freed with the worker. */
typedef struct rvx__tag_slabs {
    void   **p;
    unsigned n, cap;
} rvx__tag_slabs_t;

struct rvx__tag_state {
    rvx__tag_op_t   *unx_head, **unx_tail; /* arrived, not yet received, in arrival order */
    rvx__tag_op_t   *free;
    rvx__tag_rop_t  *exp_head, **exp_tail; /* posted receives, in posting order */
    rvx__tag_rop_t  *rfree;
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
    rvx__tag_slabs_t slabs, rslabs;        /* the blocks of the op and receive-record pools */
    double           last_check;
    unsigned         vround;               /* liveness rounds: a peer's verdict holds in its round */
    int              qhead;                /* the first peer with queued frames (-2: none) */
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
    rvx__tag_rop_t   lone_op;
    rvx_request_t    self_flush;           /* before any-source receives fail (check_recvs) */
};
#define RVX__LONE_QUEUED ((rvx_request_t *)(uintptr_t)1)

/* The worker's tag state (its protocol slot, set by rvx__tag_worker_init). */
RVX_INLINE struct rvx__tag_state *rvx__tag_of(const rvx_worker_t *w)
{
    return (struct rvx__tag_state *)w->proto;
}
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
    return rvx__mem_reg(t->w->ctx, addr, len, 0, mem); /* not a long-AM target */
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

/* Keep a new pool block of n * size bytes; NULL when memory is out. */
RVX_COLD void *rvx__tag_slab_new(rvx__tag_slabs_t *s, unsigned n, size_t size)
{
    void *slab;
    if (s->n == s->cap) {
        unsigned cap = s->cap ? 2 * s->cap : 8;
        void **p = (void **)realloc(s->p, cap * sizeof(*p));
        if (!p) return NULL;
        s->p = p;
        s->cap = cap;
    }
    if ((slab = calloc(n, size)) != NULL) s->p[s->n++] = slab;
    return slab;
}

#define RVX__TAG_SLAB 64 /* records per pool block */

/* Free a pool's blocks; under ASan each block's first `poisoned` bytes are made addressable
 * first (the op pool poisons its free records). */
RVX_COLD void rvx__tag_slabs_free(rvx__tag_slabs_t *s, size_t poisoned)
{
    unsigned i;
    (void)poisoned;
    for (i = 0; i < s->n; i++) {
#ifdef RVX__TAG_ASAN
        ASAN_UNPOISON_MEMORY_REGION(s->p[i], poisoned);
#endif
        free(s->p[i]);
    }
    free(s->p);
    s->p = NULL;
    s->n = s->cap = 0;
}

RVX_COLD int rvx__tag_grow(struct rvx__tag_state *t)
{
    rvx__tag_op_t *slab = (rvx__tag_op_t *)rvx__tag_slab_new(&t->slabs, RVX__TAG_SLAB, sizeof(*slab));
    unsigned i;
    if (!slab) return 0;
    for (i = 0; i < RVX__TAG_SLAB; i++) {
        slab[i].next = t->free;
        t->free = &slab[i];
        RVX__TAG_POISON(&slab[i], 1);
    }
    return 1;
}

RVX_COLD int rvx__tag_rgrow(struct rvx__tag_state *t)
{
    rvx__tag_rop_t *slab = (rvx__tag_rop_t *)rvx__tag_slab_new(&t->rslabs, RVX__TAG_SLAB, sizeof(*slab));
    unsigned i;
    if (!slab) return 0;
    for (i = 0; i < RVX__TAG_SLAB; i++) {
        slab[i].next = t->rfree;
        t->rfree = &slab[i];
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
    op->kind = RVX__KIND_SEND;
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
    op->next = t->free;
    t->free = op;
    RVX__TAG_POISON(op, 1);
}

/* A receive record leaves the expected queue for good (done, moved into an op, or canceled). */
static inline void rvx__tag_rop_free(struct rvx__tag_state *t, rvx__tag_rop_t *r)
{
    if (RVX_UNLIKELY(r == &t->lone_op)) { /* not in the pool: free for the next lone receive */
        r->next = NULL;
        t->lone = NULL;
        return;
    }
    r->next = t->rfree;
    t->rfree = r;
}

/* A matched receive whose data takes more than one step moves into a full op, which the
 * protocols then drive; NULL when memory is out (the caller drops the message as it drops an
 * unexpected one it cannot keep, and the receive ends with RVX_ERR_NO_MEMORY). */
RVX_COLD rvx__tag_op_t *rvx__tag_claim(struct rvx__tag_state *t, rvx__tag_rop_t *r)
{
    rvx__tag_op_t *op = rvx__tag_op_new(t);
    rvx_request_t *req = r->req;
    if (op) {
        op->tag = r->tag;
        op->mask = r->mask;
        op->req = req;
        op->src = r->src;
        op->buf = RVX__TAG_RQ_BUF(req);
        op->len = RVX__TAG_RQ_LEN(req);
        op->info = RVX__TAG_RQ_INFO(req);
        op->kind = RVX__KIND_RECV;
    }
    rvx__tag_rop_free(t, r);
    if (!op) {
        rvx__log("tag: out of memory for a matched receive's protocol state; message dropped");
        req->status = RVX_ERR_NO_MEMORY;
    }
    return op;
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
    t->w->proto_pending++;
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
    if (op->flags & RVX__F_RKEY)
        for (i = 0; i < RVX_LANES; i++) rvx_rkey_release(&op->rkey[i]);
    op->flags &= ~RVX__F_RKEY;
    if (op->stage && op->stage != op->small) free(op->stage);
    op->stage = NULL;
    for (i = 0; i < op->nchunks; i++)
        if (op->chunks[i].mem) rvx__tag_dereg(t, op->chunks[i].mem);
    free(op->chunks);
    op->chunks = NULL;
    op->nchunks = 0;
    if (op->rk) rvx__pipe_rk_release(op);
    rvx__tag_id_free(t, op);
}

/* Finish an operation: the user's request gets `st`, the op goes back to the pool. */
RVX_COLD void rvx__tag_done(struct rvx__tag_state *t, rvx__tag_op_t *op, rvx_status_t st)
{
    rvx_request_t *req = op->req;
    rvx__tag_unready(op);
    if (op->flags & RVX__F_ACTIVE) {
        rvx__tag_link_del(&op->alink);
        t->w->proto_pending--;
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

static inline void rvx__tag_fill(rvx_tag_info_t *info, uint64_t tag, size_t mlen, int rank)
{
    if (info) {
        info->tag = tag;
        info->length = mlen;
        info->sender = rank;
    }
}

/* A control frame on the reply channel; 0 if there is no room now (the caller retries). */
RVX_COLD int rvx__tag_ctrl(rvx_ep_t *ep, unsigned type, const void *body, size_t len)
{
    void *p = rvx__tl_am_claim(&ep->tl[0], RVX__CHAN_REPLY, len);
    if (!p) return 0;
    memcpy(p, body, len);
    rvx__tl_am_publish(&ep->tl[0], RVX__CHAN_REPLY, p, len, RVX__TAG_CLASS | type);
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
        t->w->proto_queued++;
        if (p->qnext == -1) { /* progress runs the peers in this list, never every peer */
            p->qnext = t->qhead;
            t->qhead = op->ep->rank;
        }
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
    if (!p->sq_head) t->w->proto_queued--;
    op->next = NULL;
}

/* ---- arrival helpers ---------------------------------------------------------------------- */

/* The lone receive joins the expected queue as its oldest entry (every receive in the queue was
 * posted after it: posting spills it first). */
static inline void rvx__tag_spill(struct rvx__tag_state *t)
{
    rvx__tag_rop_t *r = &t->lone_op;
    if (!RVX__LONE_POSTED(t)) return;
    r->req = t->lone;
    t->lone = RVX__LONE_QUEUED;
    r->next = t->exp_head;
    if (!t->exp_head) t->exp_tail = &r->next;
    t->exp_head = r;
}

/* Unlink the posted receive *pp from the expected queue. */
static inline rvx__tag_rop_t *rvx__tag_exp_unlink(struct rvx__tag_state *t, rvx__tag_rop_t **pp)
{
    rvx__tag_rop_t *r = *pp;
    *pp = r->next;
    if (t->exp_tail == &r->next) t->exp_tail = pp;
    r->next = NULL;
    return r;
}

/* Match a message (tag, sender) against the posted receives, in posting order; the match is
 * unlinked. */
static inline rvx__tag_rop_t *rvx__tag_match(struct rvx__tag_state *t, uint64_t tag, int rank)
{
    rvx__tag_rop_t **pp, *r;
    rvx__tag_spill(t);
    for (pp = &t->exp_head; (r = *pp) != NULL; pp = &r->next)
        if (((r->tag ^ tag) & r->mask) == 0 && (r->src < 0 || r->src == rank))
            return rvx__tag_exp_unlink(t, pp);
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
    u->kind = RVX__KIND_UNEXP;
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


#endif /* RVX_PROTO_TAG_MATCH_H */
