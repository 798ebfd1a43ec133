/* fuzz/wire: what a peer hands over outside the frames: packed remote keys (rvx_rkey_unpack) and,
 * on shm, the worker address records the bootstrap carries (the transport's ep_connect).
 *
 * Input byte 0 picks what the rest is:
 *   even  a packed key, taken as is or as a valid key of ours with bytes changed, unpacked on the
 *         loopback endpoint (shm and rc_mlx5) and, on shm, on an endpoint to a second process
 *         (forked at start, holding two shared-memory files of known size), then released;
 *   odd   (shm) an address record naming this process, the second one or no process, with any
 *         mailbox file and length: connected, then disconnected, or refused.
 * rc_mlx5 addresses are not fuzzed here: past the checks of the record's header (magic, job
 * size, link layer) an address only names a QP, LID and GID to connect to, which rvxsim would
 * make real QP transitions for; a wrong one fails the connection like a peer that is gone. */
#define _GNU_SOURCE 1
#include <rvx/rvx.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/wait.h>

static rvx_context_t *ctx;
static rvx_worker_t *w;
static rvx_ep_t *ep;
static rvx_mem_t *mem;
static uint8_t packed[RVX_RKEY_PACKED_SIZE];

#if RVX_TL == RVX_TL_SHM
static pid_t peer;
static int peer_mbox_fd, peer_mem_fd;
static rvx__tl_ep_t peer_ep; /* an endpoint to the second process, at the transport */

/* The second process: it only holds its files open until we are gone. */
static void start_peer(void)
{
    rvx__tl_addr_t a;
    size_t mbox_len = w->iface[0].mbox_len;
    peer_mbox_fd = rvx__shm_memfd("fuzz-peer-mbox", mbox_len);
    peer_mem_fd = rvx__shm_memfd("fuzz-peer-mem", 8192);
    peer = fork();
    if (peer == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        for (;;) pause();
    }
    memset(&a, 0, sizeof(a));
    a.magic = RVX__SHM_MAGIC;
    a.mbox_len = mbox_len;
    a.pid = peer;
    a.fd = peer_mbox_fd;
    a.nslots = w->iface[0].nslots;
    if (peer < 0 || peer_mbox_fd < 0 || peer_mem_fd < 0 ||
        rvx__tl_ep_connect(&w->iface[0], &peer_ep, 0, &a) != RVX_OK) {
        fprintf(stdout, "fuzz/wire: the second process could not be set up\n");
        abort();
    }
}
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc; (void)argv;
    unsetenv("RVX_SIZE");
    unsetenv("RVX_RANK");
    if (!getenv("FUZZ_VERBOSE")) stderr = fopen("/dev/null", "w"); /* rvx's log lines */
    if (rvx_init(&ctx) != RVX_OK || rvx_worker_create(ctx, &w) != RVX_OK ||
        rvx_ep_create(w, 0, &ep) != RVX_OK || rvx_mem_alloc(ctx, 1 << 14, &mem) != RVX_OK) {
        fprintf(stdout, "fuzz/wire: set-up failed\n");
        abort();
    }
    rvx_rkey_pack(mem, packed);
#if RVX_TL == RVX_TL_SHM
    start_peer();
#endif
    return 0;
}

static void key(const uint8_t *d, size_t n)
{
    uint8_t kb[RVX_RKEY_PACKED_SIZE];
    rvx_rkey_t rk;
    size_t i;
    memcpy(kb, packed, sizeof(kb));
    if (n && (d[0] & 2)) { /* ours, changed where the input says */
        for (i = 1; i + 1 < n; i += 2) kb[d[i] % sizeof(kb)] ^= d[i + 1];
    } else {
        for (i = 0; i + 1 < n && i < sizeof(kb); i++) kb[i] = d[i + 1];
    }
    if (rvx_rkey_unpack(ep, kb, &rk) == RVX_OK) rvx_rkey_release(&rk);
#if RVX_TL == RVX_TL_SHM
    {
        /* the same bytes as a key of the second process: its pid, one of its files */
        rvx__shm_packed_rkey_t p;
        memcpy(&p, kb, sizeof(p));
        p.pid = peer;
        if (n && (d[0] & 4)) p.fd = d[0] & 8 ? peer_mem_fd : peer_mbox_fd;
        memcpy(kb, &p, sizeof(p));
        if (rvx__tl_rkey_unpack(&peer_ep, kb, &rk) == RVX_OK) {
            /* what was mapped is readable to its end (a page past a file's end would SIGBUS) */
            if (rk.lbase && rk.maplen) {
                volatile uint8_t x = rk.lbase[rk.maplen - 1];
                (void)x;
            }
            rvx_rkey_release(&rk);
        }
    }
#endif
}

#if RVX_TL == RVX_TL_SHM
static void address(const uint8_t *d, size_t n)
{
    rvx__tl_addr_t a;
    rvx__tl_ep_t tep;
    unsigned sel = n ? d[0] >> 1 : 0;
    memset(&a, 0, sizeof(a));
    if (n > 1) memcpy(&a, d + 1, n - 1 < sizeof(a) ? n - 1 : sizeof(a));
    switch (sel % 4) { /* which process it names: never an unrelated one of this user */
    case 0: a.pid = getpid(); break;
    case 1: a.pid = peer; break;
    case 2: a.pid = 0x3ffffff0; break; /* no such process */
    default: a.pid = peer; a.fd = (sel >> 2) & 1 ? peer_mem_fd : peer_mbox_fd; break;
    }
    if ((sel >> 3) & 1) a.magic = RVX__SHM_MAGIC;
    if ((sel >> 4) & 1) a.nslots = w->iface[0].nslots;
    if (rvx__tl_ep_connect(&w->iface[0], &tep, 0, &a) == RVX_OK) {
        /* what it mapped as the peer's mailbox is there to its end */
        if (tep.peer_mbox && tep.peer_mbox != w->iface[0].mbox) {
            volatile uint8_t x = tep.peer_mbox[w->iface[0].mbox_len - 1];
            (void)x;
        }
        rvx__tl_ep_disconnect(&tep);
    }
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
#if RVX_TL == RVX_TL_SHM
    if (size && (data[0] & 1)) {
        address(data, size);
        return 0;
    }
#endif
    key(data, size);
    return 0;
}
