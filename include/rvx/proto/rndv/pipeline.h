/* rvx/proto/rndv/pipeline.h: the PIPELINE rendezvous protocol (RVX_RNDV=RVX_RNDV_PIPELINE), Open
 * MPI's three phases with the registration pipelined on both sides.
 *
 *   Phase 1: the RTS carries the first RVX_PIPE_EAGER bytes. The receiver copies them, registers
 *            phase 2's range of its buffer only and answers RTR (the CTS) with that key; then it
 *            registers the rest RVX_PIPE_CHUNK bytes at a time, sending each chunk's key in a KEY
 *            frame as soon as it is registered.
 *   Phase 2: the next RVX_PIPE_BOUNCE bytes are copied into pre-registered bounce buffers
 *            (RVX_PIPE_BOUNCE_BUFS of RVX_PIPE_FRAG bytes) and written at once.
 *   Phase 3: the sender registers the rest RVX_PIPE_CHUNK bytes at a time and writes a piece once
 *            its own chunk and the receiver's key for that range are both ready (a piece ends
 *            where either ends), while earlier pieces are on the wire. Then flush and FIN.
 * With the registration cache the pieces stay registered (leave pinned): a buffer sent again skips
 * phase 2, a buffer received into again is all cache hits and puts every key in the CTS (no KEY
 * frame), so the message is written back to back straight after the CTS. A receiver's chunk that
 * fails to register is reported in a KEY frame: the sender stops, flushes, and its FIN carries
 * the error (both requests fail with it). */
#ifndef RVX_PROTO_RNDV_PIPELINE_H
#define RVX_PROTO_RNDV_PIPELINE_H

#define RVX__RNDV_P1(mlen)      ((size_t)(mlen) < (size_t)RVX_PIPE_EAGER ? (size_t)(mlen) : (size_t)RVX_PIPE_EAGER)
#define RVX__RNDV_RTS_LEN(mlen) ((size_t)RVX__TAG_RTS_HDR + RVX__RNDV_P1(mlen))
#define RVX__RNDV_RTR_LEN     ((size_t)32) /* the header; the keys follow */
#define RVX__RNDV_RTS_ADDR    0
#define RVX__RNDV_PHASE1      1
#define RVX__RNDV_SEND_REG    0
#define RVX__RNDV_RECV_ID     1
#define RVX__RNDV_PEER_WRITES 1
#include "common.h"

#define RVX__PIPE_KEY_LEN  ((size_t)(8 + RVX_RKEY_PACKED_SIZE))
#define RVX__PIPE_KEYS_MAX ((unsigned)((RVX__TAG_FRAME - 32) / RVX__PIPE_KEY_LEN)) /* keys in one frame */
/* the most pieces a receiver cuts `eff` bytes into (each but the first and last >= CHUNK / 2) */
#define RVX__PIPE_KCAP(eff) ((size_t)(eff) / (RVX_PIPE_CHUNK / 2) + 3)

/* Is this range already registered in the cache (left pinned by an earlier message)? */
static inline int rvx__pipe_cached(struct rvx__tag_state *t, void *addr, size_t len)
{
#if RVX__TAG_RCACHE
    return rvx__rcache_find(&t->rcache, addr, len) != NULL;
#else
    (void)t; (void)addr; (void)len;
    return 0;
#endif
}

/* Are these `nk` keys (end:8 rkey each) a correct continuation of what the sender holds: ends
 * rising, none past `eff`, no more than the receiver can cut? */
static int rvx__pipe_keys_ok(const rvx__tag_op_t *op, const uint8_t *b, unsigned nk, size_t eff)
{
    size_t prev = op->nrk ? op->rk[op->nrk - 1].end : 0;
    unsigned i;
    if (op->nrk + (size_t)nk > RVX__PIPE_KCAP(eff)) return 0;
    for (i = 0; i < nk; i++) {
        uint64_t end = rvx__load_u64(b + i * RVX__PIPE_KEY_LEN);
        if (end <= prev || end > eff) return 0;
        prev = (size_t)end;
    }
    return 1;
}

/* Unpack checked keys into the sender's list (op->eff set). */
RVX_COLD rvx_status_t rvx__pipe_keys_add(rvx__tag_op_t *op, const uint8_t *b, unsigned nk)
{
    unsigned i, l;
    if (!op->rk && !(op->rk = (struct rvx__pipe_rkey *)calloc(RVX__PIPE_KCAP(op->eff), sizeof(*op->rk))))
        return RVX_ERR_NO_MEMORY;
    for (i = 0; i < nk; i++) {
        const uint8_t *e = b + i * RVX__PIPE_KEY_LEN;
        struct rvx__pipe_rkey *k = &op->rk[op->nrk];
        rvx_status_t st = RVX_OK;
        k->end = (size_t)rvx__load_u64(e);
        for (l = 0; l < RVX_LANES && st == RVX_OK; l++)
            st = rvx__tl_rkey_unpack(&op->ep->tl[l], e + 8 + l * RVX__TL_RKEY_PACKED_SIZE, &k->key[l]);
        if (st != RVX_OK) {
            for (l = 0; l < RVX_LANES; l++) rvx_rkey_release(&k->key[l]);
            return st;
        }
        op->nrk++;
    }
    return RVX_OK;
}

RVX_INLINE unsigned rvx__pipe_memo_slot(uintptr_t a)
{
    return (unsigned)(((a >> 6) ^ (a >> 17)) % RVX__PIPE_MEMO);
}

/* The end of a pipeline piece that starts at `off` and wants `want` bytes: on a page boundary
 * (unless it is the last, or that would halve it), so that the registrations of neighbouring
 * pieces do not share a page (the cache would merge them, registering the earlier ones again). */
static inline size_t rvx__pipe_cut(const struct rvx__tag_state *t, const rvx__tag_op_t *op, size_t off,
                                   size_t want)
{
    uintptr_t start = (uintptr_t)op->buf + off, end;
    if (op->eff - off <= want) return op->eff;
    end = (start + want) & ~(uintptr_t)(t->page - 1);
    return end >= start + want / 2 ? off + (size_t)(end - start) : off + want;
}

/* The receiver's key for the range at op->done, or NULL while it has not come. */
static inline struct rvx__pipe_rkey *rvx__pipe_key(rvx__tag_op_t *op)
{
    while (op->krk < op->nrk && op->rk[op->krk].end <= op->done) op->krk++;
    return op->krk < op->nrk ? &op->rk[op->krk] : NULL;
}

/* ---- frames ----------------------------------------------------------------------------------- */

/* The request-channel frame of a queued send: the RTS with phase 1. */
static int rvx__rndv_emit(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    (void)t;
    return rvx__rndv_emit_rts(op);
}

/* RTR, the CTS: how much the receiver wants, where, and the keys of what it has registered so
 * far (at least the first piece's, unless phase 1 carried all it wanted). */
RVX_COLD int rvx__pipe_rx_rtr(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *b, size_t len)
{
    rvx__tag_op_t *op;
    uint64_t eff;
    unsigned nk;
    if (!(op = rvx__rndv_rtr_op(t, ep, b, len, RVX__RNDV_RTR_LEN))) return 0;
    eff = rvx__load_u64(b + 8);
    nk = rvx__tag_ld32(b + 24);
    if (nk > RVX__PIPE_KEYS_MAX || len != RVX__RNDV_RTR_LEN + nk * RVX__PIPE_KEY_LEN ||
        (eff > op->done && !nk) || /* more wanted: the first piece's key comes with the CTS */
        !rvx__pipe_keys_ok(op, b + RVX__RNDV_RTR_LEN, nk, (size_t)eff))
        return 0;
    op->peer_id = rvx__tag_ld32(b + 4);
    op->eff = (size_t)eff;
    op->raddr = rvx__load_u64(b + 16);
    if (eff <= op->done) { /* phase 1 carried all the receiver wanted */
        rvx__tag_done(t, op, RVX_OK);
    } else {
        rvx_status_t st = rvx__pipe_keys_add(op, b + RVX__RNDV_RTR_LEN, nk);
        if (st != RVX_OK) op->status = st; /* the pipeline step fails it, FIN tells the receiver */
        op->state = RVX__SS_PIPE;
        rvx__tag_ready(t, op);
    }
    return 1;
}

/* KEY: more of the receive buffer registered, or its registration failed. */
RVX_COLD int rvx__pipe_rx_key(struct rvx__tag_state *t, rvx_ep_t *ep, const uint8_t *b, size_t len)
{
    rvx__tag_op_t *op;
    int32_t st;
    unsigned nk;
    if (len < 16 || !(op = rvx__tag_id_find(t, rvx__tag_ld32(b), ep, RVX__KIND_SEND))) return 0;
    st = (int32_t)rvx__tag_ld32(b + 4);
    nk = rvx__tag_ld32(b + 8);
    if (nk > RVX__PIPE_KEYS_MAX || len != 16 + nk * RVX__PIPE_KEY_LEN || (st < 0 && nk)) return 0;
    if (op->state != RVX__SS_PIPE) /* keys still on the way when the send stopped on an error */
        return op->state == RVX__SS_FLUSH || op->state == RVX__SS_FIN || op->state == RVX__S_ZOMBIE;
    st = rvx__rndv_peer_status(ep, (uint32_t)st);
    if (st < 0) {
        if (!op->status) op->status = st;
    } else {
        rvx_status_t s2;
        if (!rvx__pipe_keys_ok(op, b + 16, nk, op->eff)) return 0;
        if ((s2 = rvx__pipe_keys_add(op, b + 16, nk)) != RVX_OK && !op->status) op->status = s2;
    }
    rvx__tag_ready(t, op);
    return 1;
}

/* Rendezvous frames: 1 if taken, 0 if malformed (counted by the caller). */
RVX_COLD int rvx__rndv_rx(struct rvx__tag_state *t, rvx_ep_t *ep, unsigned chan, unsigned type,
                          const uint8_t *b, size_t len)
{
    switch (type) {
    case RVX__TF_RTS: return rvx__rndv_rx_rts(t, ep, chan, b, len);
    case RVX__TF_RTR: return rvx__pipe_rx_rtr(t, ep, b, len);
    case RVX__TF_KEY: return rvx__pipe_rx_key(t, ep, b, len);
    case RVX__TF_FIN: return rvx__rndv_rx_fin(t, ep, b, len);
    default:          return 0;
    }
}

/* ---- sender: phases 2 and 3 ------------------------------------------------------------------- */

/* What a phase of rvx__pipe_step did: went as far as it could go (GO: on to the next), stopped
 * for a key the receiver has not sent (PARK: its KEY frame readies the op), stopped for a
 * resource (AGAIN: back on the ready list), or failed (FAIL). */
enum { RVX__PIPE_GO, RVX__PIPE_PARK, RVX__PIPE_AGAIN, RVX__PIPE_FAIL };

/* The first step of phases 2 and 3: is the buffer left pinned from an earlier send (then phase 2
 * is skipped), bounce buffers, and room for the pieces (the sender's registrations cut by the
 * receiver's keys). */
RVX_COLD rvx_status_t rvx__pipe_send_setup(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    size_t rest;
    unsigned slot = rvx__pipe_memo_slot((uintptr_t)op->buf);
    op->p1_end = op->done;
    op->pinned = t->memo[slot].len && t->memo[slot].addr == (uintptr_t)op->buf && t->memo[slot].len >= op->eff;
    t->n_pipe_pinned += op->pinned;
    op->p2_end = RVX_PIPE_BOUNCE ? rvx__pipe_cut(t, op, op->done, RVX_PIPE_BOUNCE) : op->done;
    if (!op->pinned && op->p2_end > op->done && !t->bounce &&
        rvx__mem_alloc(t->w->ctx, (size_t)RVX_PIPE_BOUNCE_BUFS * RVX_PIPE_FRAG, 0, &t->bounce) != RVX_OK) {
        t->bounce = NULL;
        op->p2_end = op->done; /* no bounce buffers: phase 3 does it all */
    }
    rest = op->eff - op->p2_end;
    op->chunks = (rvx__tag_chunk_t *)calloc(rest / (RVX_PIPE_CHUNK / 2) + 3 + RVX__PIPE_KCAP(op->eff),
                                            sizeof(*op->chunks));
    if (!op->chunks) return RVX_ERR_NO_MEMORY;
    op->flags |= RVX__F_STARTED;
    return RVX_OK;
}

/* Phase 2: copy into a free bounce buffer and write it at once (lane 0). */
RVX_COLD int rvx__pipe_phase2(struct rvx__tag_state *t, rvx__tag_op_t *op, int *progressed, rvx_status_t *st)
{
    struct rvx__pipe_rkey *k;
    while (!op->pinned && op->done < op->p2_end) {
        size_t n = op->p2_end - op->done < RVX_PIPE_FRAG ? op->p2_end - op->done : RVX_PIPE_FRAG;
        unsigned s;
        uint8_t *src;
        if (!(k = rvx__pipe_key(op))) return RVX__PIPE_PARK;
        if (n > k->end - op->done) n = k->end - op->done;
        for (s = 0; s < RVX_PIPE_BOUNCE_BUFS; s++)
            if (t->bslot[s].status != RVX_INPROGRESS) break;
        if (s == RVX_PIPE_BOUNCE_BUFS) return RVX__PIPE_AGAIN;
        src = (uint8_t *)rvx_mem_addr(t->bounce) + (size_t)s * RVX_PIPE_FRAG;
        memcpy(src, op->buf + op->done, n);
        rvx_request_init(&t->bslot[s]);
        *st = rvx__tl_put_zcopy(&op->ep->tl[0], src, n, &t->bounce->tl[0], op->raddr + op->done, &k->key[0],
                                &t->bslot[s]);
        if (*st != RVX_INPROGRESS) t->bslot[s].status = RVX_OK;
        if (*st == RVX_ERR_NO_RESOURCE) return RVX__PIPE_AGAIN;
        if (*st < 0) return RVX__PIPE_FAIL;
        op->lused |= 1u;
        op->done += n;
        t->n_pipe_bounce++;
        *progressed = 1;
    }
    return RVX__PIPE_GO;
}

/* Phase 3: post piece c, [op->done, op->done + n), from the chunk registered last (striped across
 * the lanes, each stripe posted once): RVX_OK when all of it is posted, else the transport's
 * refusal (RVX_ERR_NO_RESOURCE: try again) or error. */
RVX_COLD rvx_status_t rvx__pipe_post_piece(struct rvx__tag_state *t, rvx__tag_op_t *op, rvx__tag_chunk_t *c,
                                           struct rvx__pipe_rkey *k, size_t n)
{
    size_t off[RVX_LANES], ln[RVX_LANES];
    unsigned l;
    rvx__lane_split(t->w->ctx, n, op->eff >= RVX_LANE_STRIPE_MIN, off, ln);
    for (l = 0; l < RVX_LANES; l++) {
        rvx_status_t st;
        if (!ln[l] || (c->lposted & (1u << l))) continue;
        rvx_request_init(&c->req[l]);
        st = rvx__tl_put_zcopy(&op->ep->tl[l], op->buf + op->done + off[l], ln[l], &op->cmem->tl[l],
                               op->raddr + op->done + off[l], &k->key[l], &c->req[l]);
        if (st != RVX_INPROGRESS) c->req[l].status = RVX_OK;
        if (st == RVX_ERR_NO_RESOURCE || st < 0) return st;
        c->lposted |= 1u << l;
        op->lused |= 1u << l;
    }
    return RVX_OK;
}

/* Phase 3: register a chunk, write it, go on with the next while it moves. A buffer left pinned
 * comes here at once, in the pieces its first send registered (phase 2's range, then the
 * chunks): each is a cache hit, posted back to back after the CTS. */
RVX_COLD int rvx__pipe_phase3(struct rvx__tag_state *t, rvx__tag_op_t *op, int *progressed, rvx_status_t *st)
{
    struct rvx__pipe_rkey *k;
    while (op->done < op->eff) {
        rvx__tag_chunk_t *c;
        size_t n;
        if (op->nposted == op->nchunks) { /* a new piece, and a new registration past the last */
            c = &op->chunks[op->nchunks];
            c->end = 0;
            c->mem = NULL;
            if (op->done >= op->creg_end) {
                size_t end = op->done < op->p2_end ? op->p2_end : rvx__pipe_cut(t, op, op->done, RVX_PIPE_CHUNK);
                if ((*st = rvx__tag_reg(t, op->buf + op->done, end - op->done, &c->mem)) != RVX_OK) {
                    c->mem = NULL;
                    return RVX__PIPE_FAIL;
                }
                op->cmem = c->mem;
                op->creg_end = end;
            }
            op->nchunks++;
        }
        c = &op->chunks[op->nposted];
        if (!(k = rvx__pipe_key(op))) return RVX__PIPE_PARK; /* registered; the receiver is not ready */
        if (!c->end) c->end = op->creg_end < k->end ? op->creg_end : k->end;
        n = c->end - op->done;
        *st = rvx__pipe_post_piece(t, op, c, k, n);
        if (*st == RVX_ERR_NO_RESOURCE) return RVX__PIPE_AGAIN;
        if (*st < 0) return RVX__PIPE_FAIL;
        op->nposted++;
        op->done += n;
        t->n_pipe_chunks++;
        *progressed = 1;
    }
    return RVX__PIPE_GO;
}

/* Sender, SS_PIPE: phases 2 and 3, as far as resources and the receiver's keys allow. A write
 * goes only where the receiver has sent a key: a piece ends where the sender's chunk or the
 * receiver's key ends, whichever is first; a missing key parks the op until its KEY frame
 * readies it (the sender's next chunk is registered meanwhile). On failure what was posted
 * finishes, then FIN tells the receiver. */
RVX_COLD int rvx__pipe_step(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    rvx_status_t st = RVX_OK;
    int progressed = 0, r = RVX__PIPE_FAIL;
    if (op->status) /* keys that could not be unpacked, or the receiver's registration failed */
        st = (rvx_status_t)op->status;
    else if (!(op->flags & RVX__F_STARTED) && (st = rvx__pipe_send_setup(t, op)) != RVX_OK)
        ;
    else if ((r = rvx__pipe_phase2(t, op, &progressed, &st)) == RVX__PIPE_GO)
        r = rvx__pipe_phase3(t, op, &progressed, &st);
    if (r == RVX__PIPE_PARK) return progressed;
    if (r == RVX__PIPE_AGAIN) return rvx__rndv_again(t, op, progressed);
    if (r == RVX__PIPE_FAIL) op->status = st;
    op->state = RVX__SS_FLUSH;
    return rvx__rndv_again(t, op, 1);
}

/* Sender, SS_FIN: tell the receiver the data is in (or how it failed), and complete. With the
 * cache, a buffer sent whole stays registered: phase 2's range is registered too (once, after the
 * request completed) and the buffer remembered, so that next time it is all a hit: no pipeline. */
RVX_COLD int rvx__pipe_send_fin(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    uint8_t *buf = op->buf;
    size_t p1 = op->p1_end, p2 = op->p2_end, eff = op->eff;
    int ok = op->pinned || p2 <= p1;
    rvx_mem_t *mem;
    if (!rvx__rndv_ctrl_status(op, RVX__TF_FIN, (uint32_t)op->status)) return rvx__rndv_again(t, op, 0);
    if (!RVX__TAG_RCACHE || op->status || op->eff <= op->p1_end) {
        rvx__tag_done(t, op, (rvx_status_t)op->status);
        return 1;
    }
    rvx__tag_done(t, op, RVX_OK);
    if (!ok && rvx__tag_reg(t, buf + p1, p2 - p1, &mem) == RVX_OK) {
        rvx__tag_dereg(t, mem);
        ok = 1;
    }
    if (ok) {
        unsigned slot = rvx__pipe_memo_slot((uintptr_t)buf);
        t->memo[slot].addr = (uintptr_t)buf;
        t->memo[slot].len = eff;
    }
    return 1;
}

/* Sender, SS_FLUSH: every write out of the transport and flushed before FIN. */
RVX_COLD int rvx__pipe_flush(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (!rvx__rndv_flushed(t, op)) return rvx__rndv_again(t, op, 0);
    return rvx__pipe_send_fin(t, op);
}

/* ---- receiver: the buffer registered piece by piece, the keys sent as they come ------------- */

/* Receiver: register the next piece of the buffer (phase 2's range first, then chunks), and the
 * pieces after it as long as they are cache hits: a buffer received into before is registered
 * at once and all its keys go with the CTS; a first-time one, a piece per step, each announced
 * by a KEY frame as soon as it is registered. */
RVX_COLD rvx_status_t rvx__pipe_rreg(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    int first = 1;
    while (op->creg_end < op->eff) {
        size_t want = RVX_PIPE_BOUNCE > 0 && op->creg_end == op->p1_end ? (size_t)RVX_PIPE_BOUNCE : (size_t)RVX_PIPE_CHUNK;
        size_t end = rvx__pipe_cut(t, op, op->creg_end, want);
        rvx__tag_chunk_t *c = &op->chunks[op->nchunks];
        rvx_status_t st;
        int hit = rvx__pipe_cached(t, op->buf + op->creg_end, end - op->creg_end);
        if (!first && !hit) break;
        if ((st = rvx__tag_reg(t, op->buf + op->creg_end, end - op->creg_end, &c->mem)) != RVX_OK) {
            c->mem = NULL;
            return st;
        }
        c->end = end;
        op->nchunks++;
        op->creg_end = end;
        first = 0;
        if (!hit) {
            op->pinned = 0;
            break;
        }
    }
    return RVX_OK;
}

/* Receiver: the RTR (rtr) or a KEY frame, with the keys registered and not yet sent (as many as
 * fit) or, in a KEY frame, the status of a failed registration; 0 if the ring is full. */
RVX_COLD int rvx__pipe_send_keys(struct rvx__tag_state *t, rvx__tag_op_t *op, int rtr)
{
    uint8_t b[RVX__RNDV_RTR_LEN + RVX__PIPE_KEYS_MAX * RVX__PIPE_KEY_LEN];
    size_t h = rtr ? RVX__RNDV_RTR_LEN : 16;
    unsigned n = op->nchunks - op->nkeys, i;
    if (n > RVX__PIPE_KEYS_MAX) n = RVX__PIPE_KEYS_MAX;
    if (!rtr && op->status) n = 0;
    rvx__tag_st32(b, op->peer_id);
    if (rtr) {
        rvx__tag_st32(b + 4, op->id);
        rvx__tag_st64(b + 8, op->eff);
        rvx__tag_st64(b + 16, (uint64_t)(uintptr_t)op->buf);
        rvx__tag_st32(b + 24, n);
        rvx__tag_st32(b + 28, 0);
    } else {
        rvx__tag_st32(b + 4, (uint32_t)op->status);
        rvx__tag_st32(b + 8, n);
        rvx__tag_st32(b + 12, 0);
    }
    for (i = 0; i < n; i++) {
        rvx__tag_chunk_t *c = &op->chunks[op->nkeys + i];
        rvx__tag_st64(b + h + i * RVX__PIPE_KEY_LEN, c->end);
        rvx_rkey_pack(c->mem, b + h + i * RVX__PIPE_KEY_LEN + 8);
    }
    if (!rvx__tag_ctrl(op->ep, rtr ? RVX__TF_RTR : RVX__TF_KEY, b, h + n * RVX__PIPE_KEY_LEN)) return 0;
    op->nkeys += n;
    t->n_pipe_keys += !rtr;
    return 1;
}

/* Receiver, RS_RTR: the CTS with the keys registered so far; then wait for FIN while the rest is
 * registered and its keys sent (RS_WAIT). */
RVX_COLD int rvx__pipe_send_rtr(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (!rvx__pipe_send_keys(t, op, 1)) return rvx__rndv_again(t, op, 0);
    if (op->eff <= op->done) return rvx__rndv_recv_done(t, op);
    op->state = RVX__RS_WAIT; /* for FIN; meanwhile the rest is registered and its keys sent */
    if (op->creg_end < op->eff || op->nkeys < op->nchunks) return rvx__rndv_again(t, op, 1);
    t->n_pipe_rpinned += op->pinned;
    return 1;
}

/* Receiver, RS_START: the CTS goes once the first piece is registered (or all of a buffer left
 * pinned). */
RVX_COLD int rvx__pipe_recv_start(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    if (op->eff > op->done && !op->status) {
        rvx_status_t st;
        op->p1_end = op->creg_end = op->done;
        op->pinned = 1;
        op->chunks = (rvx__tag_chunk_t *)calloc(RVX__PIPE_KCAP(op->eff), sizeof(*op->chunks));
        st = op->chunks ? rvx__pipe_rreg(t, op) : RVX_ERR_NO_MEMORY;
        if (st != RVX_OK) { /* ask for nothing more; the receive fails */
            op->status = st;
            op->eff = op->done;
        }
    }
    op->state = RVX__RS_RTR;
    return rvx__pipe_send_rtr(t, op);
}

/* Receiver, RS_WAIT: the next piece registered, its key sent. A failed registration is told to
 * the sender: it stops, and its FIN fails the receive. */
RVX_COLD int rvx__pipe_recv_more(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    unsigned had = op->nchunks;
    rvx_status_t st;
    if (!op->status && op->nkeys == op->nchunks && op->creg_end < op->eff && (st = rvx__pipe_rreg(t, op)) != RVX_OK)
        op->status = st;
    t->n_pipe_rchunks += op->nchunks - had;
    if (op->nkeys < op->nchunks || (op->status && op->creg_end < op->eff)) {
        if (!rvx__pipe_send_keys(t, op, 0)) return rvx__rndv_again(t, op, 0);
        if (op->status) op->creg_end = op->eff; /* told: nothing more to register */
    }
    if (op->nkeys < op->nchunks || op->creg_end < op->eff) return rvx__rndv_again(t, op, 1);
    return 1;
}

/* One step of a rendezvous operation; 1 if it moved. Ops that wait on the transport or on room
 * in a ring put themselves back on the ready list. */
RVX_COLD int rvx__rndv_step(struct rvx__tag_state *t, rvx__tag_op_t *op)
{
    switch (op->state) {
    case RVX__S_ZOMBIE: return rvx__rndv_zombie_step(t, op);
    case RVX__RS_START: return rvx__pipe_recv_start(t, op);
    case RVX__RS_RTR:   return rvx__pipe_send_rtr(t, op);
    case RVX__RS_WAIT:  return rvx__pipe_recv_more(t, op);
    case RVX__SS_PIPE:  return rvx__pipe_step(t, op);
    case RVX__SS_FLUSH: return rvx__pipe_flush(t, op);
    case RVX__SS_FIN:   return rvx__pipe_send_fin(t, op);
    default:            return 0;
    }
}

#endif /* RVX_PROTO_RNDV_PIPELINE_H */
