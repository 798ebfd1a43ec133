/* peer_kill: a rank is killed with SIGKILL in the middle of an exchange; the survivors must see
 * every operation to it fail with RVX_ERR_PEER_FAILED within a bounded time, and go on exchanging
 * with each other to the end, data checked, then leave without waiting for it.
 *
 *   peer_kill [victim] [rounds] [kill_round]      (at least 3 ranks; default victim: the last)
 *
 * Each round every rank puts 64 bytes into each live peer's slot for it and sends the peer a
 * PING naming the round; the peer's handler checks the bytes (the put and the message travel on
 * one endpoint, in order) and answers PONG. At kill_round the lowest surviving rank kills the
 * victim. At the end the survivors agree they are done through messages, try a barrier (which
 * must give up, not hang) and finalize. A survivor prints one line "peer_kill: rank R: ok: ..."
 * when every check passed.
 * Run by tests/t_peer_kill.sh under rvxrun and by tests/t_mpirun_peer_kill.sh under mpirun
 * (the PMIx build, build/pmix/peer_kill). */
#define RVX_AM_HANDLERS(X) X(PING, on_ping) X(PONG, on_pong) X(DONE, on_done)
#include <rvx/rvx.h>
#include "testlib.h"

#include <signal.h>

#define SLOT 64
#define MAXR 64

static rvx_mem_t *mem;
static volatile uint64_t cur_round;
static volatile int got_pong[MAXR], done_from[MAXR], bad_data, bad_round;
static int victim;

static void on_ping(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    uint64_t reply[2];
    rvx_status_t st;
    (void)p; (void)len;
    if (n != 3 || a[0] >= MAXR) { bad_round++; return; }
    /* a[0] sender, a[1] round, a[2] the seed of the 64 bytes it put before this message */
    if (t_verify((unsigned char *)rvx_mem_addr(mem) + a[0] * SLOT, SLOT, a[2]) >= 0) bad_data++;
    reply[0] = (uint64_t)t_rank;
    reply[1] = a[1];
    st = rvx_am_reply_short(t, RVX_AM_PONG, reply, 2);
    /* a reply to the victim's last ping may find it gone */
    T_CHECK(st == RVX_OK || (st == RVX_ERR_PEER_FAILED && a[0] == (uint64_t)victim),
            "reply to rank %d: %s", (int)a[0], rvx_status_str(st));
}

static void on_pong(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n != 2 || a[0] >= MAXR) { bad_round++; return; }
    if (a[1] == cur_round) got_pong[a[0]] = 1;
    else bad_round++;
}

static void on_done(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)p; (void)len;
    if (n == 1 && a[0] < MAXR) done_from[a[0]] = 1;
}

static uint64_t seed_of(int from, uint64_t round) { return ((uint64_t)from << 32) | round; }

int main(int argc, char **argv)
{
    rvx_context_t *ctx;
    rvx_worker_t *w;
    rvx_ep_t *eps[MAXR];
    rvx_rkey_t keys[MAXR];
    t_remote_t *remote;
    int alive[MAXR], *pids, pid, me, n, r, killer, found_round = -1;
    uint64_t rounds, kill_round, round;
    double t_kill = 0, t_found = 0, noticed_after, t0;
    unsigned char src[SLOT];
    rvx_status_t st;

    me = t_start(&ctx, &w);
    n = rvx_size(ctx);
    victim = argc > 1 ? atoi(argv[1]) : n - 1;
    rounds = argc > 2 ? strtoull(argv[2], NULL, 0) : 300;
    kill_round = argc > 3 ? strtoull(argv[3], NULL, 0) : 100;
    killer = victim == 0 ? 1 : 0;
    if (n < 3 || n > MAXR || victim < 0 || victim >= n || kill_round >= rounds) {
        fprintf(stderr, "FAIL: peer_kill needs 3..%d ranks and victim < ranks, kill_round < rounds\n", MAXR);
        return 1;
    }
    /* a slot per sender, then the time of the kill, which the killer puts into every survivor */
    T_OK(rvx_mem_alloc(ctx, (size_t)n * SLOT + sizeof(double), &mem));
    for (r = 0; r < n; r++) {
        T_OK(rvx_ep_create(w, r, &eps[r]));
        alive[r] = r != me;
    }
    remote = t_exchange(ctx, mem);
    for (r = 0; r < n; r++) T_OK(rvx_rkey_unpack(eps[r], remote[r].packed, &keys[r]));
    pid = (int)getpid();
    pids = (int *)calloc((size_t)n, sizeof(int));
    T_OK(rvx_allgather(ctx, &pid, sizeof(pid), pids));
    T_OK(rvx_barrier(ctx));

    for (round = 0; round < rounds; round++) {
        cur_round = round;
        if (me == killer && round == kill_round) {
            /* CLOCK_MONOTONIC: one clock for every process here. Read before the kill: read after
             * it, a killer descheduled in between (a loaded machine) saw a survivor notice the
             * death "before" the kill */
            t_kill = rvx__now_s();
            T_CHECK(kill(pids[victim], SIGKILL) == 0, "kill rank %d (pid %d)", victim, pids[victim]);
            for (r = 0; r < n; r++)
                if (r != victim && r != me)
                    T_OK(rvx_put(eps[r], &t_kill, sizeof(t_kill), remote[r].addr + (uint64_t)n * SLOT,
                                 &keys[r]));
        }
        for (r = 0; r < n; r++) {
            uint64_t args[3];
            if (!alive[r]) continue;
            got_pong[r] = 0;
            t_fill(src, SLOT, seed_of(me, round));
            args[0] = (uint64_t)me;
            args[1] = round;
            args[2] = seed_of(me, round);
            st = rvx_put(eps[r], src, SLOT, remote[r].addr + (uint64_t)me * SLOT, &keys[r]);
            if (st == RVX_OK) rvx_am_retry(w, st, rvx_am_short(eps[r], RVX_AM_PING, args, 3));
            if (st != RVX_OK) {
                T_CHECK(r == victim && st == RVX_ERR_PEER_FAILED, "round %llu: send to rank %d: %s",
                        (unsigned long long)round, r, rvx_status_str(st));
                got_pong[r] = -1; /* noticed below */
            }
        }
        for (r = 0; r < n; r++) {
            if (!alive[r]) continue;
            st = got_pong[r] < 0 ? RVX_ERR_PEER_FAILED
                                 : rvx_wait_flag(w, eps[r], &got_pong[r], 10000);
            if (st == RVX_OK) continue;
            T_CHECK(r == victim && st == RVX_ERR_PEER_FAILED, "round %llu: waiting for rank %d: %s",
                    (unsigned long long)round, r, rvx_status_str(st));
            if (r != victim) { alive[r] = 0; continue; }
            /* the victim is gone: every kind of operation to it says so, at once */
            t_found = rvx__now_s();
            found_round = (int)round;
            alive[r] = 0;
            T_STATUS(rvx_ep_status(eps[r]), RVX_ERR_PEER_FAILED);
            T_STATUS(rvx_ep_flush(eps[r]), RVX_ERR_PEER_FAILED);
            st = rvx_put(eps[r], src, SLOT, remote[r].addr + (uint64_t)me * SLOT, &keys[r]);
            T_CHECK(st == RVX_OK || st == RVX_ERR_PEER_FAILED, "put: %s", rvx_status_str(st));
            T_STATUS(rvx_ep_flush(eps[r]), RVX_ERR_PEER_FAILED);
            {
                static volatile int never;
                double t1 = rvx__now_s();
                T_STATUS(rvx_wait_flag(w, eps[r], &never, 5000), RVX_ERR_PEER_FAILED);
                T_CHECK(rvx__now_s() - t1 < 1, "waiting on a known-dead peer took %.2f s",
                        rvx__now_s() - t1);
            }
            {
                uint64_t a[3] = {(uint64_t)me, round, 0};
                int i;
                for (i = 0; i < 100000; i++)
                    if ((st = rvx_am_short(eps[r], RVX_AM_PING, a, 3)) != RVX_OK) break;
                T_CHECK(st == RVX_ERR_PEER_FAILED, "sending to the dead rank: %s after %d sends",
                        rvx_status_str(st), i);
            }
        }
    }

    /* the survivors agree they are done, without the dead rank and without a collective */
    for (r = 0; r < n; r++) {
        uint64_t a = (uint64_t)me;
        if (!alive[r]) continue;
        rvx_am_retry(w, st, rvx_am_short(eps[r], RVX_AM_DONE, &a, 1));
        T_OK(st);
    }
    for (r = 0; r < n; r++) {
        if (!alive[r]) continue;
        T_OK(rvx_wait_flag(w, eps[r], &done_from[r], 10000));
    }
    /* a collective needs every rank: with one dead it gives up after the bootstrap's timeout
     * (shortened here to 1 s) instead of hanging, and leaves nothing that holds up finalize */
    ctx->boot.timeout_s = 1;
    t0 = rvx__now_s();
    st = rvx_barrier(ctx);
    T_CHECK(st == RVX_ERR_TIMED_OUT || st == RVX_ERR_PEER_FAILED, "barrier without rank %d: %s",
            victim, rvx_status_str(st));
    T_CHECK(rvx__now_s() - t0 < 4, "barrier without rank %d took %.2f s to give up", victim,
            rvx__now_s() - t0);
    /* the killer's time of the kill came before its DONE, on the same endpoint */
    if (me != killer) memcpy(&t_kill, (char *)rvx_mem_addr(mem) + (size_t)n * SLOT, sizeof(t_kill));
    noticed_after = t_found - t_kill;
    T_CHECK(found_round >= 0, "rank %d's death was never reported", victim);
    T_CHECK(t_kill > 0, "the killer's time of the kill did not arrive");
    T_CHECK(noticed_after >= 0 && noticed_after < 5, "reported %.3f s after the kill", noticed_after);
    T_CHECK(!bad_data, "%d pings found wrong data", bad_data);
    T_CHECK(!bad_round, "%d messages named the wrong round", bad_round);

    t0 = rvx__now_s();
    for (r = 0; r < n; r++) rvx_rkey_release(&keys[r]);
    rvx_worker_destroy(w);
    rvx_mem_dereg(mem);
    rvx_finalize(ctx);
    T_CHECK(rvx__now_s() - t0 < 1, "teardown took %.2f s", rvx__now_s() - t0);
    free(remote);
    free(pids);
    if (!t_failures)
        printf("peer_kill: rank %d: ok: rank %d, killed by rank %d in its round %llu, reported here "
               "in round %d, %.3f s after the kill; %llu more rounds with the survivors, data "
               "correct\n", me, victim, killer, (unsigned long long)kill_round, found_round,
               noticed_after, (unsigned long long)(rounds - (uint64_t)found_round - 1));
    return t_exit();
}
