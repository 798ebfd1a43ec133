/* t_unit: one process, loopback endpoint to itself: status strings, set-up argument checks,
 * progress bookkeeping, put/get/atomics on its own regions, all AM kinds with replies, ring laps. */
#define RVX_AM_HANDLERS(X) X(ECHO, on_echo) X(ECHOED, on_echoed) X(SEQ, on_seq) X(TWICE, on_twice) \
                           X(NESTED, on_nested)
#include <rvx/rvx.h>
#include "testlib.h"

static int echoed, echoed_refused, echoed_kind_ok, seq_next, seq_bad, twice_second;
static size_t echoed_len;
static unsigned char echoed_data[RVX_AM_MAX_MEDIUM];

/* Reply with the same arguments and payload (medium), or args only. */
static void on_echo(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    T_CHECK(t->is_request, "echo arrived as a reply");
    if (len > RVX_AM_MAX_MEDIUM) /* a long AM's payload is answered with arguments only */
        T_OK(rvx_am_reply_short(t, RVX_AM_ECHOED, args, nargs));
    else
        T_OK(rvx_am_reply_medium(t, RVX_AM_ECHOED, args, nargs, p, len));
}

static void on_echoed(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    unsigned i;
    echoed_kind_ok = !t->is_request;
    for (i = 0; i < nargs; i++)
        if (args[i] != 1000 + i) echoed_kind_ok = 0;
    echoed_len = len;
    if (len) memcpy(echoed_data, p, len);
    /* a reply handler may not reply (checked once: each refusal prints a line) */
    if (!echoed_refused++) T_STATUS(rvx_am_reply_short(t, RVX_AM_ECHOED, NULL, 0), RVX_ERR_INVALID_PARAM);
    echoed++;
}

static void on_seq(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    (void)t;
    if (nargs != 2 || args[0] != (uint64_t)seq_next || len != args[1] ||
        (len && t_verify(p, len, args[0]) >= 0))
        seq_bad++;
    seq_next++;
}

static void on_twice(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    (void)args; (void)nargs; (void)p; (void)len;
    T_OK(rvx_am_reply_short(t, RVX_AM_ECHOED, NULL, 0));
    twice_second = rvx_am_reply_short(t, RVX_AM_ECHOED, NULL, 0);
}

static rvx_worker_t *the_worker;
static int nested_calls, nested_result = -1;

/* Misuse: progress from inside a handler must do nothing (not hand this frame over again). */
static void on_nested(rvx_am_token_t *t, const uint64_t *args, unsigned nargs, void *p, size_t len)
{
    (void)t; (void)args; (void)nargs; (void)p; (void)len;
    nested_calls++;
    nested_result = rvx_progress(the_worker);
}

static void drain(rvx_worker_t *w)
{
    int i;
    for (i = 0; i < 100; i++) rvx_progress(w);
}

int main(void)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *ep, *ep2;
    rvx_mem_t *mem, *reg;
    rvx_rkey_t rkey, rkey_reg;
    unsigned char packed[RVX_RKEY_PACKED_SIZE], bad[RVX_RKEY_PACKED_SIZE];
    static unsigned char user[8192], buf[8192];
    uint64_t args[RVX_AM_MAX_ARGS + 1], base, v64 = 0;
    uint32_t v32 = 0;
    rvx_status_t s;
    int i, n;

    t_rank = 0;
    /* every status has its own text */
    for (s = RVX_ERR_BAD_MESSAGE; s <= RVX_INPROGRESS; s = (rvx_status_t)(s + 1)) {
        rvx_status_t s2;
        T_CHECK(strcmp(rvx_status_str(s), "unknown status"), "status %d has no text", (int)s);
        for (s2 = RVX_ERR_BAD_MESSAGE; s2 < s; s2 = (rvx_status_t)(s2 + 1))
            T_CHECK(strcmp(rvx_status_str(s), rvx_status_str(s2)), "statuses %d and %d share a text", s, s2);
    }
    /* a waiting loop spins RVX_WAIT_SPIN_NS before its first sleep (half of it is asked, as the
     * loop's clock read can come a little after ours), then keeps sleeping; twice, so that the
     * second wait starts a spin of its own */
    for (i = 0; i < 2; i++) {
        unsigned spins = 0, rounds = 0;
        unsigned long long t0 = rvx__now_ns(), before_sleep = t0;
        while (spins < RVX__BACKOFF_SLEEPING) {
            before_sleep = rvx__now_ns();
            rvx__backoff(&spins);
            rounds++;
        }
        T_CHECK(before_sleep - t0 >= RVX_WAIT_SPIN_NS / 2 && rounds >= 64,
                "wait %d slept after %llu ns and %u rounds of spinning (RVX_WAIT_SPIN_NS %d)", i,
                before_sleep - t0, rounds, RVX_WAIT_SPIN_NS);
        rvx__backoff(&spins);
        T_CHECK(spins == RVX__BACKOFF_SLEEPING + 2, "wait %d did not keep sleeping", i);
    }
    T_CHECK(strstr(rvx_config_string(), "tl=shm") && strstr(rvx_config_string(), "am=1"),
            "config string: %s", rvx_config_string());

    /* set-up argument checks */
    T_STATUS(rvx_init(NULL), RVX_ERR_INVALID_PARAM);
    T_OK(rvx_init(&ctx));
    T_CHECK(rvx_rank(ctx) == 0 && rvx_size(ctx) == 1, "rank %d size %d", rvx_rank(ctx), rvx_size(ctx));
    T_STATUS(rvx_worker_create(NULL, &w), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_worker_create(ctx, NULL), RVX_ERR_INVALID_PARAM);
    T_OK(rvx_worker_create(ctx, &w));
    T_STATUS(rvx_ep_create(w, 1, &ep), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_ep_create(w, -1, &ep), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_mem_alloc(ctx, 0, &mem), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_mem_reg(ctx, NULL, 10, &reg), RVX_ERR_INVALID_PARAM);

    /* progress with no endpoint does nothing; an endpoint makes the iface live */
    T_CHECK(rvx_progress(w) == 0 && w->iface[0].nlive == 0, "idle progress");
    T_OK(rvx_ep_create(w, 0, &ep));
    T_OK(rvx_ep_create(w, 0, &ep2));
    T_CHECK(ep == ep2 && w->iface[0].nlive == 1, "one endpoint per peer (nlive %u)", w->iface[0].nlive);
    T_CHECK(rvx_progress(w) == 0, "progress with nothing arrived");
    T_OK(rvx_ep_status(ep));

    /* RMA on our own regions, both kinds of memory */
    T_OK(rvx_mem_alloc(ctx, 8192, &mem));
    T_OK(rvx_mem_reg(ctx, user, sizeof(user), &reg));
    T_OK(rvx_rkey_pack(mem, packed));
    T_OK(rvx_rkey_unpack(ep, packed, &rkey));
    memcpy(bad, packed, sizeof(bad));
    bad[0] ^= 0xff;
    T_STATUS(rvx_rkey_unpack(ep, bad, &rkey_reg), RVX_ERR_INVALID_PARAM);
    T_OK(rvx_rkey_pack(reg, packed));
    T_OK(rvx_rkey_unpack(ep, packed, &rkey_reg));
    base = (uint64_t)(uintptr_t)rvx_mem_addr(mem);
    t_fill(buf, sizeof(buf), 7);
    T_OK(rvx_put(ep, buf, 8192, base, &rkey));
    T_CHECK(t_verify(rvx_mem_addr(mem), 8192, 7) < 0, "put to own region");
    T_OK(rvx_put(ep, buf, 100, (uint64_t)(uintptr_t)user + 3, &rkey_reg));
    T_CHECK(t_verify(user + 3, 100, 7) < 0, "put to own registered memory");
    T_STATUS(rvx_put(ep, buf, 1, base + 8192, &rkey), RVX_ERR_REMOTE_ACCESS);
    T_STATUS(rvx_put(ep, buf, 2, base + 8191, &rkey), RVX_ERR_REMOTE_ACCESS);
    T_STATUS(rvx_put(ep, buf, 1, base - 1, &rkey), RVX_ERR_REMOTE_ACCESS);
    T_OK(rvx_put(ep, buf, 0, base + 8192, &rkey)); /* an empty put at the end is inside */
    memset(buf, 0, sizeof(buf));
    T_OK(rvx_get(ep, buf, 8192, base, &rkey, NULL));
    T_CHECK(t_verify(buf, 8192, 7) < 0, "get from own region");

    /* atomics: argument rules */
    T_STATUS(rvx_atomic64(ep, RVX_AMO_GET, 0, 0, base, &rkey, NULL, NULL), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, base + 4, &rkey, NULL, NULL), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_atomic32(ep, RVX_AMO_ADD, 1, 0, base + 2, &rkey, NULL, NULL), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, base + 8192, &rkey, NULL, NULL), RVX_ERR_REMOTE_ACCESS);
    T_OK(rvx_atomic64(ep, RVX_AMO_SET, 41, 0, base, &rkey, NULL, NULL));
    T_OK(rvx_atomic64(ep, RVX_AMO_INC, 0, 0, base, &rkey, &v64, NULL));
    T_CHECK(v64 == 41 && *(uint64_t *)rvx_mem_addr(mem) == 42, "inc: fetched %llu", (unsigned long long)v64);
    T_OK(rvx_atomic32(ep, RVX_AMO_CAS, 7, 42, base, &rkey, &v32, NULL));
    T_CHECK(v32 == 42 && *(uint32_t *)rvx_mem_addr(mem) == 7, "cas32: fetched %u", v32);

    /* AM: argument rules, then every kind through the loopback with a reply */
    for (i = 0; i <= RVX_AM_MAX_ARGS; i++) args[i] = 1000 + (uint64_t)i;
    T_STATUS(rvx_am_short(ep, RVX_AM_NHANDLERS, args, 0), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_am_short(ep, RVX_AM_ECHO, args, RVX_AM_MAX_ARGS + 1), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_am_short(ep, RVX_AM_ECHO, NULL, 1), RVX_ERR_INVALID_PARAM);
    T_STATUS(rvx_am_medium(ep, RVX_AM_ECHO, args, 0, buf, RVX_AM_MAX_MEDIUM + 1), RVX_ERR_EXCEEDS_LIMIT);
    T_STATUS(rvx_am_long(ep, RVX_AM_ECHO, args, 0, buf, 10, base + 8190, &rkey), RVX_ERR_REMOTE_ACCESS);
    T_CHECK(rvx_progress(w) == 0, "a refused send must send nothing");
    for (n = 0; n <= RVX_AM_MAX_ARGS; n++) {
        echoed = 0;
        T_OK(rvx_am_short(ep, RVX_AM_ECHO, args, (unsigned)n));
        drain(w);
        T_CHECK(echoed == 1 && echoed_kind_ok && echoed_len == 0, "short with %d args", n);
    }
    t_fill(buf, sizeof(buf), 9);
    for (n = 0; n <= RVX_AM_MAX_MEDIUM; n += (n < 300 ? 1 : 61)) {
        echoed = 0;
        T_OK(rvx_am_medium(ep, RVX_AM_ECHO, args, 3, buf, (size_t)n));
        drain(w);
        T_CHECK(echoed == 1 && echoed_kind_ok && echoed_len == (size_t)n &&
                t_verify(echoed_data, (size_t)n, 9) < 0, "medium of %d bytes", n);
    }
    echoed = 0;
    T_OK(rvx_am_medium(ep, RVX_AM_ECHO, args, RVX_AM_MAX_ARGS, buf, RVX_AM_MAX_MEDIUM));
    drain(w);
    T_CHECK(echoed == 1 && echoed_len == RVX_AM_MAX_MEDIUM, "largest medium");
    echoed = 0;
    T_OK(rvx_am_long(ep, RVX_AM_ECHO, args, 2, buf, 5000, base + 100, &rkey));
    drain(w);
    T_CHECK(echoed == 1 && echoed_len == 0 && t_verify((char *)rvx_mem_addr(mem) + 100, 5000, 9) < 0,
            "long: payload in place");
    echoed = 0;
    T_OK(rvx_am_short(ep, RVX_AM_TWICE, NULL, 0));
    drain(w);
    T_CHECK(echoed == 1 && twice_second == RVX_ERR_INVALID_PARAM, "a second reply is refused");

    /* many laps of the ring, sizes that force skip frames, in order */
    for (i = 0; i < 20000; i++) {
        size_t len = (size_t)(i * 37) % 900;
        uint64_t a[2];
        a[0] = (uint64_t)i;
        a[1] = len;
        t_fill(buf, len, (uint64_t)i);
        rvx_status_t st;
        rvx_am_retry(w, st, rvx_am_medium(ep, RVX_AM_SEQ, a, 2, buf, len));
        T_CHECK(st == RVX_OK, "send %d: %s", i, rvx_status_str(st));
    }
    drain(w);
    T_CHECK(seq_next == 20000 && seq_bad == 0, "ring laps: %d delivered, %d wrong", seq_next, seq_bad);

    /* an endpoint destroyed with frames still in its ring, then created again: the old frames
     * are delivered first, then the new one, nothing twice and nothing stale */
    {
        rvx_ep_t *again;
        uint64_t a[2];
        rvx_status_t st;
        int base_seq = seq_next;
        for (i = 0; i < 3; i++) {
            a[0] = (uint64_t)(base_seq + i);
            a[1] = 0;
            T_OK(rvx_am_medium(ep, RVX_AM_SEQ, a, 2, NULL, 0));
        }
        rvx_ep_destroy(ep);
        T_OK(rvx_ep_create(w, 0, &again));
        a[0] = (uint64_t)(base_seq + 3);
        rvx_am_retry(w, st, rvx_am_medium(again, RVX_AM_SEQ, a, 2, NULL, 0));
        T_CHECK(st == RVX_OK, "send after re-creation: %s", rvx_status_str(st));
        drain(w);
        T_CHECK(seq_next == base_seq + 4 && seq_bad == 0, "re-created endpoint: %d of 4 delivered in order, %d wrong",
                seq_next - base_seq, seq_bad);
        ep = again;
        rvx_rkey_release(&rkey);
        rvx_rkey_release(&rkey_reg);
        T_OK(rvx_rkey_pack(mem, packed));
        T_OK(rvx_rkey_unpack(ep, packed, &rkey));
        T_OK(rvx_rkey_pack(reg, packed));
        T_OK(rvx_rkey_unpack(ep, packed, &rkey_reg));
    }

    /* progress re-entered from a handler does nothing */
    the_worker = w;
    T_OK(rvx_am_short(ep, RVX_AM_NESTED, NULL, 0));
    T_OK(rvx_am_short(ep, RVX_AM_NESTED, NULL, 0));
    drain(w);
    T_CHECK(nested_calls == 2 && nested_result == 0, "nested progress: %d calls, returned %d",
            nested_calls, nested_result);

    /* flush with nothing outstanding returns at once */
    T_OK(rvx_ep_flush_nb(ep, NULL));
    T_OK(rvx_worker_flush_nb(w, NULL));
    T_OK(rvx_ep_flush(ep));
    T_OK(rvx_worker_flush(w));

    rvx_rkey_release(&rkey);
    rvx_rkey_release(&rkey_reg);
    rvx_ep_destroy(ep);
    T_CHECK(w->iface[0].nlive == 0 && rvx_progress(w) == 0, "no live endpoint after destroy");
    rvx_mem_dereg(mem);
    rvx_mem_dereg(reg);
    rvx_worker_destroy(w);
    rvx_finalize(ctx);
    return t_exit();
}
