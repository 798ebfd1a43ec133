/* fuzz/wire: what a peer hands over outside the frames: packed remote keys (rvx_rkey_unpack) and
 * the worker address records the bootstrap carries (the transport's wire-up and ep_connect).
 * Built for shm, rc_mlx5, dc_mlx5 and both pairs (wire_shm, wire_rc, wire_dc, wire_pair_rc,
 * wire_pair_dc).
 *
 * Input byte 0 picks what the rest is:
 *   even  a packed key, taken as is or as a valid key of ours with bytes changed, unpacked on the
 *         loopback endpoint (every transport; a pair's is on the node, so both its keys, shm's
 *         then the network's, are resolved), on the same endpoint seen as off the node (a pair:
 *         the network's key alone) and, on shm, on an endpoint to a second process (forked at
 *         start, holding two shared-memory files of known size), then released;
 *   odd   address records:
 *         shm   one naming this process, the second one or no process, with any mailbox file and
 *               length: connected, then disconnected, or refused;
 *         dc    a job of 1 to 8 ranks whose 48-byte records are the input's (magic, link layer,
 *               DCT number, LID or GID, control region): wired up and kept as the worker keeps
 *               them, then an endpoint connected to every rank (and disconnected) or refused;
 *         pair  the same job with the pair's records (node number, shm's record, the network's):
 *               the check of the node's local ranks, and with dc_mlx5 the network's wire-up and
 *               a connection to every rank off the node.
 * rc_mlx5 addresses are not fuzzed here: past the checks of the record's header (magic, job
 * size, link layer) an address only names a QP, LID and GID to connect to, which rvxsim would
 * make real QP transitions for; a wrong one fails the connection like a peer that is gone. A dc
 * endpoint connects with no verbs call, so its whole record is fuzzed. */
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

#if RVX_TL == RVX_TL_SHM && !defined(RVX_TL_INTRA)
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
#if RVX_TL == RVX_TL_SHM && !defined(RVX_TL_INTRA)
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
#ifdef RVX_TL_INTRA
    {
        /* the same key on an endpoint to a rank off the node: the network's key alone */
        rvx__tl_ep_t off = ep->tl[0];
        off.intra = 0;
        if (rvx__tl_rkey_unpack(&off, kb, &rk) == RVX_OK) {
            if (rk.shm.maplen) abort(); /* nothing of shm's is mapped off the node */
            rvx__tl_rkey_release(&rk);
        }
    }
#endif
#if RVX_TL == RVX_TL_SHM && !defined(RVX_TL_INTRA)
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

#if RVX_TL == RVX_TL_SHM && !defined(RVX_TL_INTRA)
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

#if RVX_TL == RVX_TL_DC_MLX5 || defined(RVX_TL_INTRA)
/* A job of n ranks whose records are the input's: wired up on a copy of our interface sized for
 * it, kept as the worker keeps them (core.h: the first RVX__TL_ADDR_KEPT bytes, packed), then an
 * endpoint to every rank the transport would connect here. Byte 1: the job's size and (dc) the
 * link layer the interface believes it is on; the records follow, zeros past the input's end. */
static void address(const uint8_t *d, size_t size)
{
    int n = 1 + (size > 1 ? d[1] % 8 : 0), r;
    size_t stride = RVX__ADDR_STRIDE(n), i; /* as the core gathers them */
    uint8_t *recs = (uint8_t *)calloc((size_t)n, stride), *kept;
    rvx__tl_iface_t f = w->iface[0];
    rvx__tl_ctx_t cx;
    rvx_status_t st;
    for (i = 0; i + 2 < size && i < (size_t)n * stride; i++) recs[i] = d[i + 2];
    f.nranks = n;
#if RVX_TL == RVX_TL_DC_MLX5 && !defined(RVX_TL_INTRA)
    cx = *f.ctx;
    cx.is_roce = size > 1 && (d[1] & 8);
    f.ctx = &cx;
    f.refused = NULL;
    f.nrefused = 0;
    f.gids.his = NULL;
    f.nlive = 0;
#else
    (void)cx;
#if RVX_TL == RVX_TL_DC_MLX5
    f.net.nranks = n;
    f.net.refused = NULL;
    f.net.nrefused = 0;
    f.net.gids.his = NULL;
    f.net.nlive = 0;
#endif
    f.nlive = f.noff = 0;
    for (r = 0; r < n; r++) { /* shm's part names this process or none: never another of this user */
        rvx__shm_addr_t *sa = RVX__PAIR_SHM_ADDR(recs + (size_t)r * stride);
        sa->pid = r & 1 ? getpid() : 0x3ffffff0;
    }
#endif
#if RVX_TL == RVX_TL_DC_MLX5
    st = rvx__tl_iface_wireup(&f, recs, stride);
#else /* the rc pair: the node check only (rc_mlx5's own wire-up connects QPs, see above) */
    st = rvx__pair_check_node(&f, recs, stride);
#endif
#if RVX_TL == RVX_TL_DC_MLX5
    if (st == RVX_OK) {
        size_t ks = RVX__ADDR_KSTRIDE(n);
        kept = (uint8_t *)malloc((size_t)n * ks);
        for (r = 0; r < n; r++) memcpy(kept + (size_t)r * ks, recs + (size_t)r * stride, ks);
        rvx__tl_iface_addrs(&f, kept, ks);
        for (r = 0; r < n; r++) {
            rvx__tl_ep_t tep;
            const rvx__tl_addr_t *a = (const rvx__tl_addr_t *)(const void *)(kept + (size_t)r * ks);
#ifdef RVX_TL_INTRA
            if (a->node == f.node) continue; /* on the node: shm's connect, as in wire_shm */
#endif
            if (rvx__tl_ep_connect(&f, &tep, r, a) == RVX_OK) {
#if !defined(RVX_TL_INTRA)
                if (cx.is_roce) { /* the GID the address segment would carry */
                    uint8_t gid[16];
                    rvx__dc_gid(&tep, gid);
                }
#endif
                rvx__tl_ep_disconnect(&tep);
            }
        }
        free(kept);
    }
#if !defined(RVX_TL_INTRA)
    free(f.refused);
    free(f.gids.his);
#else
    free(f.net.refused);
    free(f.net.gids.his);
#endif
#else
    (void)st;
    (void)kept;
#endif
    free(recs);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
#if RVX_TL == RVX_TL_SHM || RVX_TL == RVX_TL_DC_MLX5 || defined(RVX_TL_INTRA)
    if (size && (data[0] & 1)) {
        address(data, size);
        return 0;
    }
#endif
    key(data, size);
    return 0;
}
