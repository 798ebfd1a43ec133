/* rvx/tl/shm.h: the shared-memory transport, for processes of one user on one machine.
 *
 * Memory. rvx_mem_alloc memory lives in a memfd (never named in a file system, mode 0600); a peer
 * maps it once, when it unpacks the rkey, through /proc/<pid>/fd/<fd>, so a put or a get is a plain
 * copy into or out of that mapping and an atomic is a CPU atomic on it. Memory registered with
 * rvx_mem_reg is ordinary process memory; peers reach it through cross-memory attach
 * (process_vm_writev/readv), which the kernel allows only where ptrace would be allowed. The rkey
 * carries the region's bounds: an access outside fails with RVX_ERR_REMOTE_ACCESS and touches
 * nothing, as a NIC would refuse it.
 *
 * Messages. Each worker owns a mailbox (one memfd): for every possible sender, two
 * single-producer/single-consumer rings of 64-byte slots, one for requests and one for replies.
 * A sender's rings sit at its slot: its rank here, where every rank of the job is a peer; in a
 * pair build (tl/pair.h) its index among the ranks of its node, so that the mailbox grows with
 * the node, not the job.
 * A frame is an 8-byte header {stamp:32, len:16, info:16} followed by `len` bytes, padded to whole
 * slots. The sender writes the body, then the header with one release store; the stamp is the
 * ring position + 1, so a slot left from an earlier lap never looks new. The receiver reads the
 * header with an acquire load, hands the body to the protocol, and publishes its position in the
 * ring's control line, which the sender reads only when its cached copy says the ring is full. No
 * locks and no system calls on this path. A frame never wraps: if it would cross the end of the
 * ring, a skip frame fills the rest and the frame starts at slot 0. */
#ifndef RVX_TL_SHM_H
#define RVX_TL_SHM_H

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "contract.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 1U
#endif

#define RVX__SHM_SLOT        64
#define RVX__SHM_NSLOTS      RVX_SHM_RING_SLOTS
#define RVX__SHM_RING_BYTES  (RVX__SHM_SLOT + RVX__SHM_NSLOTS * RVX__SHM_SLOT)
#define RVX__SHM_SKIP        0xffffu
/* A ring's control line: word 0 is the consumer's position (written by the consumer as it goes);
 * word 1 is where the producer stopped when its endpoint was destroyed. */
#define RVX__SHM_CTL_TAIL    1
/* The mailbox's first line: word 0 says the owner destroyed its worker. */
#define RVX__SHM_MBOX_CLOSED 0xc105edull
#define RVX__SHM_MAGIC       0x7276785348u /* "rvxSH" */
#ifndef RVX__SHM_RX_BATCH
#define RVX__SHM_RX_BATCH    16
#endif

/* ---- types ---------------------------------------------------------------------------------- */

/* What this process registered: a key that names this very process (a loopback endpoint) is
 * checked against it, since its bounds would otherwise be the key's word alone. */
typedef struct rvx__shm_reg {
    uintptr_t base;
    size_t    len;
} rvx__shm_reg_t;

typedef struct rvx__shm_ctx {
    size_t          page;
    rvx__shm_reg_t *regs;
    unsigned        nregs, capregs;
} rvx__shm_ctx_t;

typedef struct rvx__shm_mem {
    void  *addr;
    size_t len;
    int    fd;   /* memfd of rvx_mem_alloc memory; -1 for registered user memory */
} rvx__shm_mem_t;

/* What a put reads: the first three fields, nothing else. `maplen` is the length of the local
 * mapping, 0 for memory reached by cross-memory attach, which sends every access to the slow path
 * (where `len` is the region's real length). */
typedef struct rvx__shm_rkey {
    uint64_t rbase;   /* region start in the owner's address space */
    uint64_t maplen;
    uint8_t *lbase;   /* region start in this process (mapping), or NULL */
    uint64_t len;
    int32_t  pid;
    int32_t  self;    /* region of this very process: nothing to unmap */
#if RVX_DEBUG
    const void *dbg_ep; /* the endpoint it was unpacked on (rvx_rkey_unpack): checked at use */
#endif
} rvx__shm_rkey_t;

typedef struct rvx__shm_packed_rkey {
    uint64_t magic;
    uint64_t base;
    uint64_t len;
    int32_t  pid;
    int32_t  fd;      /* -1: cross-memory attach */
} rvx__shm_packed_rkey_t;
#define RVX__SHM_RKEY_PACKED_SIZE sizeof(rvx__shm_packed_rkey_t)
/* bytes of an iface address in a job of n ranks */
#define RVX__SHM_ADDR_SIZE(n) sizeof(rvx__shm_addr_t)

typedef struct rvx__shm_addr {
    uint64_t magic;
    uint64_t mbox_len;
    int32_t  pid;
    int32_t  fd;
    int32_t  nslots;  /* senders its mailbox has rings for */
    int32_t  slot;    /* where this rank's rings are in its peers' mailboxes */
} rvx__shm_addr_t;

typedef struct rvx__shm_tx {
    uint8_t                *slots;
    const volatile uint64_t *peer_head; /* the consumer's position, in the peer's mailbox */
    uint64_t                tail;       /* next position to write */
    uint64_t                head_cache; /* last consumer position seen */
} rvx__shm_tx_t;

typedef struct rvx__shm_rx {
    const uint32_t *next;               /* stamp word of the slot at `head`: all an empty poll reads */
    uint32_t  expect;                   /* the stamp a new frame there will carry: head + 1 */
    uint8_t  *slots;
    uint64_t *head_pub;                 /* published consumer position, read by the sender */
    uint64_t  head;
} rvx__shm_rx_t;

struct rvx__shm_iface;

typedef struct rvx__shm_ep {
    rvx__shm_rx_t         rx[RVX__TL_AM_CHANNELS];
    rvx__shm_tx_t         tx[RVX__TL_AM_CHANNELS];
    struct rvx__shm_iface *ifc;
    uint8_t              *peer_mbox;
    size_t                peer_mbox_len;
    int                   rank;
    int                   pid;
    int                   pidfd;
    int                   failed;
} rvx__shm_ep_t;

#if RVX_CAN_RECEIVE
/* The upcall a received frame goes to: defined above this transport (tl/bind.h hands it to the
 * protocols' rvx__rx_deliver; a pair, tl/pair.h, first finds its own endpoint). */
RVX_INLINE void rvx__shm_rx_deliver(rvx__shm_ep_t *ep, unsigned chan, unsigned info, void *body,
                                size_t len);
#endif

typedef struct rvx__shm_iface {
    unsigned       nrx;          /* endpoints whose rings progress polls */
    unsigned       nlive;
    unsigned       outstanding;  /* always 0: every shm operation completes before it returns */
    unsigned       rx_cap;
    rvx__shm_ep_t **rx;
    uint8_t       *mbox;
    size_t         mbox_len;
    int            mbox_fd;
    int            rank;
    int            nranks;
    int            in_rx;        /* handlers are running: progress must not re-enter */
    unsigned       warned_nested;
    rvx__shm_ctx_t *tctx;         /* its registrations bound loopback keys */
    int            slot;         /* this rank's rings in a peer's mailbox */
    int            nslots;       /* senders this mailbox has rings for */
    int            by_node;      /* slots are node-local indices (else slot == rank) */
} rvx__shm_iface_t;

/* ---- what a pair (tl/pair.h) reads of shm: named here, so that its fields stay shm's -------- */

/* endpoints whose rings progress polls: none, and shm's progress has nothing to do */
RVX_INLINE unsigned rvx__shm_iface_nrx(const rvx__shm_iface_t *ifc) { return ifc->nrx; }

/* where a rank's rings sit in its node's mailboxes (slot) and how many senders each has (nslots):
 * from its address, and this rank's own */
RVX_INLINE void rvx__shm_addr_slot(const rvx__shm_addr_t *a, int *slot, int *nslots)
{
    *slot = a->slot;
    *nslots = a->nslots;
}
RVX_INLINE void rvx__shm_iface_slot(const rvx__shm_iface_t *ifc, int *slot, int *nslots)
{
    *slot = ifc->slot;
    *nslots = ifc->nslots;
}

/* ---- helpers -------------------------------------------------------------------------------- */

RVX_INLINE uint8_t *rvx__shm_ring(uint8_t *mbox, int slot, unsigned chan)
{
    return mbox + RVX__SHM_SLOT + ((size_t)slot * RVX__TL_AM_CHANNELS + chan) * RVX__SHM_RING_BYTES;
}

/* Bytes of a mailbox with rings for nslots senders. */
RVX_INLINE size_t rvx__shm_mbox_bytes(int nslots)
{
    return RVX__SHM_SLOT + (size_t)nslots * RVX__TL_AM_CHANNELS * RVX__SHM_RING_BYTES;
}

RVX_INLINE uint64_t rvx__shm_header(uint64_t pos, size_t len, unsigned info)
{
    return (uint32_t)(pos + 1) | ((uint64_t)len << 32) | ((uint64_t)info << 48);
}

/* Point the receive cursor at the slot of `head`. */
RVX_INLINE void rvx__shm_rx_at(rvx__shm_rx_t *rx)
{
    rx->next = (const uint32_t *)(const void *)
        (rx->slots + ((size_t)rx->head & (RVX__SHM_NSLOTS - 1)) * RVX__SHM_SLOT);
    rx->expect = (uint32_t)(rx->head + 1);
}

RVX_COLD int rvx__shm_memfd(const char *name, size_t len)
{
    int fd = (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC);
    if (fd < 0) return -1;
    /* Only this user may open it through /proc; peers of other users cannot. */
    if (fchmod(fd, 0600) || ftruncate(fd, (off_t)len)) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Map a peer's memfd through /proc/<pid>/fd/<fd>; NULL (and a line saying why) if refused. */
RVX_COLD void *rvx__shm_map_peer(int pid, int fd, size_t len, const char *what)
{
    char path[64];
    struct stat sb;
    void *p;
    int lfd;
    sb.st_size = 0;
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
    lfd = open(path, O_RDWR | O_CLOEXEC);
    if (lfd < 0) {
        rvx__log("cannot open %s of process %d (%s): %s; shared memory needs processes of one "
                 "user on one machine", what, pid, path, strerror(errno));
        return NULL;
    }
    /* the length a peer names is checked against the memfd's real size: a page mapped past its
     * end raises SIGBUS at the first access */
    if (fstat(lfd, &sb) != 0 || sb.st_size < 0 || len > (uint64_t)sb.st_size) {
        rvx__log("%s of process %d: %zu bytes named, the memory holds %lld; refused", what, pid,
                 len, (long long)sb.st_size);
        close(lfd);
        errno = EINVAL;
        return NULL;
    }
    p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, lfd, 0);
    close(lfd);
    if (p == MAP_FAILED) {
        rvx__log("cannot map %s of process %d: %s", what, pid, strerror(errno));
        return NULL;
    }
    return p;
}

/* ---- context, iface, endpoint (cold) -------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__shm_ctx_init(rvx__shm_ctx_t *ctx, unsigned lane)
{
    (void)lane; /* one lane only (config.h refuses RVX_LANES > 1 on shm) */
    memset(ctx, 0, sizeof(*ctx));
    ctx->page = (size_t)sysconf(_SC_PAGESIZE);
    return RVX_OK;
}

RVX_COLD void rvx__shm_ctx_fini(rvx__shm_ctx_t *ctx)
{
    free(ctx->regs);
    memset(ctx, 0, sizeof(*ctx));
}

RVX_COLD rvx_status_t rvx__shm_reg_add(rvx__shm_ctx_t *ctx, void *addr, size_t len)
{
    if (ctx->nregs == ctx->capregs) {
        unsigned cap = ctx->capregs ? 2 * ctx->capregs : 8;
        rvx__shm_reg_t *r = (rvx__shm_reg_t *)realloc(ctx->regs, cap * sizeof(*r));
        if (!r) return RVX_ERR_NO_MEMORY;
        ctx->regs = r;
        ctx->capregs = cap;
    }
    ctx->regs[ctx->nregs].base = (uintptr_t)addr;
    ctx->regs[ctx->nregs].len = len;
    ctx->nregs++;
    return RVX_OK;
}

RVX_COLD void rvx__shm_reg_del(rvx__shm_ctx_t *ctx, const void *addr, size_t len)
{
    unsigned i;
    for (i = 0; i < ctx->nregs; i++) {
        if (ctx->regs[i].base == (uintptr_t)addr && ctx->regs[i].len == len) {
            ctx->regs[i] = ctx->regs[--ctx->nregs];
            return;
        }
    }
}

/* Is [base, base+len) inside one region this process registered? */
RVX_COLD int rvx__shm_reg_covers(const rvx__shm_ctx_t *ctx, uint64_t base, uint64_t len)
{
    unsigned i;
    for (i = 0; ctx && i < ctx->nregs; i++) {
        uint64_t off = base - ctx->regs[i].base;
        if (off <= ctx->regs[i].len && len <= ctx->regs[i].len - off) return 1;
    }
    return 0;
}

/* A lane's bandwidth in MB/s: shared memory has no port to ask, so the fabric header's figure. */
RVX_COLD uint32_t rvx__shm_ctx_bw_mbs(const rvx__shm_ctx_t *ctx)
{
    (void)ctx;
    return RVX_FAB_BW_MBS;
}

/* The iface of rank `rank` whose mailbox has rings for `nslots` senders and whose own rings are
 * at `slot` in its peers'. by_node: the slots are indices among the node's ranks, which the
 * caller checks are distinct at wire-up (tl/pair/setup.h); else every slot is its rank. */
RVX_COLD rvx_status_t rvx__shm_iface_open(rvx__shm_iface_t *ifc, rvx__shm_ctx_t *ctx, int rank,
                                          int nranks, int slot, int nslots, int by_node)
{
    memset(ifc, 0, sizeof(*ifc));
    if (slot < 0 || slot >= nslots || nslots > nranks) {
        rvx__log("rank %d: local rank %d of %d ranks on its node does not fit a job of %d", rank,
                 slot, nslots, nranks);
        return RVX_ERR_INVALID_PARAM;
    }
    ifc->tctx = ctx;
    ifc->rank = rank;
    ifc->nranks = nranks;
    ifc->slot = slot;
    ifc->nslots = nslots;
    ifc->by_node = by_node;
    ifc->mbox_len = rvx__shm_mbox_bytes(nslots);
    ifc->mbox_fd = rvx__shm_memfd("rvx-mailbox", ifc->mbox_len);
    if (ifc->mbox_fd < 0) {
        rvx__log("cannot create the shared-memory mailbox (%zu bytes): %s", ifc->mbox_len,
                 strerror(errno));
        return RVX_ERR_NO_MEMORY;
    }
    ifc->mbox = (uint8_t *)mmap(NULL, ifc->mbox_len, PROT_READ | PROT_WRITE, MAP_SHARED,
                                ifc->mbox_fd, 0);
    if (ifc->mbox == MAP_FAILED) {
        close(ifc->mbox_fd);
        return RVX_ERR_NO_MEMORY;
    }
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__shm_iface_init(rvx__shm_iface_t *ifc, rvx__shm_ctx_t *ctx, int rank,
                                         int nranks, int node)
{
    (void)node; /* one transport for every peer: where a peer runs changes nothing */
    return rvx__shm_iface_open(ifc, ctx, rank, nranks, rank, nranks, 0);
}

RVX_COLD void rvx__shm_iface_fini(rvx__shm_iface_t *ifc)
{
    /* peers that still map the mailbox see it closed and stop waiting for room in it */
    rvx_store_release_u64((uint64_t *)(void *)ifc->mbox, RVX__SHM_MBOX_CLOSED);
    free(ifc->rx);
    munmap(ifc->mbox, ifc->mbox_len);
    close(ifc->mbox_fd);
    memset(ifc, 0, sizeof(*ifc));
}

RVX_COLD void rvx__shm_iface_address(rvx__shm_iface_t *ifc, rvx__shm_addr_t *addr)
{
    memset(addr, 0, sizeof(*addr));
    addr->magic = RVX__SHM_MAGIC;
    addr->mbox_len = ifc->mbox_len;
    addr->pid = (int32_t)getpid();
    addr->fd = ifc->mbox_fd;
    addr->nslots = ifc->nslots;
    addr->slot = ifc->slot;
}

/* Nothing to set up per pair in advance: rings are found through the mailbox at ep_connect. */
RVX_COLD rvx_status_t rvx__shm_iface_wireup(rvx__shm_iface_t *ifc, const uint8_t *addrs, size_t size)
{
    (void)ifc;
    (void)addrs;
    (void)size;
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__shm_ep_connect(rvx__shm_iface_t *ifc, rvx__shm_ep_t *ep, int rank,
                                         const rvx__shm_addr_t *addr)
{
    unsigned c;
    memset(ep, 0, sizeof(*ep));
    if (addr->magic != RVX__SHM_MAGIC || addr->nslots != ifc->nslots ||
        addr->mbox_len != ifc->mbox_len) {
        /* the rings are found at offsets the number of senders gives: a mailbox of another
         * length would put them outside what is mapped */
        rvx__log("address of rank %d is not a shm address of this job (different build, or a "
                 "mailbox for %d senders where this rank's has %d)", rank, (int)addr->nslots,
                 ifc->nslots);
        return RVX_ERR_INVALID_PARAM;
    }
    /* a slot out of range would put a ring outside the mailbox; two ranks of one node with one
     * slot are refused at wire-up, by the caller that knows the nodes (by_node) */
    if (addr->slot < 0 || addr->slot >= ifc->nslots || (!ifc->by_node && addr->slot != rank)) {
        rvx__log("rank %d names slot %d of %d for its rings: out of range%s", rank,
                 (int)addr->slot, ifc->nslots, ifc->by_node ? "" : " or not its rank");
        return RVX_ERR_INVALID_PARAM;
    }
    ep->ifc = ifc;
    ep->rank = rank;
    ep->pid = addr->pid;
    if (addr->pid == getpid()) {
        ep->peer_mbox = ifc->mbox;           /* loopback: our own mailbox */
        ep->pidfd = -1;
    } else {
        ep->peer_mbox = (uint8_t *)rvx__shm_map_peer(addr->pid, addr->fd, addr->mbox_len,
                                                     "the mailbox");
        if (!ep->peer_mbox) return RVX_ERR_PEER_FAILED;
        ep->peer_mbox_len = addr->mbox_len;
        /* A pidfd becomes readable when the peer exits: the liveness check is one poll(). */
        ep->pidfd = (int)syscall(SYS_pidfd_open, addr->pid, 0);
    }
    for (c = 0; c < RVX__TL_AM_CHANNELS; c++) {
        uint8_t *txr = rvx__shm_ring(ep->peer_mbox, ifc->slot, c);
        uint8_t *rxr = rvx__shm_ring(ifc->mbox, addr->slot, c);
        ep->tx[c].slots = txr + RVX__SHM_SLOT;
        ep->tx[c].peer_head = (const volatile uint64_t *)txr;
        ep->tx[c].head_cache = rvx_load_acquire_u64((uint64_t *)txr);
        /* resume where an earlier endpoint to this peer stopped: restarting at the consumer's
         * position would leave older, still-valid frames behind the new ones */
        ep->tx[c].tail = ((uint64_t *)txr)[RVX__SHM_CTL_TAIL];
        ep->rx[c].slots = rxr + RVX__SHM_SLOT;
        ep->rx[c].head_pub = (uint64_t *)rxr;
        ep->rx[c].head = *ep->rx[c].head_pub;
        rvx__shm_rx_at(&ep->rx[c]);
    }
#if RVX_CAN_RECEIVE
    if (ifc->nrx == ifc->rx_cap) {
        unsigned cap = ifc->rx_cap ? 2 * ifc->rx_cap : 8;
        rvx__shm_ep_t **n = (rvx__shm_ep_t **)realloc(ifc->rx, cap * sizeof(*n));
        if (!n) return RVX_ERR_NO_MEMORY;
        ifc->rx = n;
        ifc->rx_cap = cap;
    }
    ifc->rx[ifc->nrx++] = ep;
#endif
    ifc->nlive++;
    return RVX_OK;
}

RVX_COLD void rvx__shm_ep_disconnect(rvx__shm_ep_t *ep)
{
    rvx__shm_iface_t *ifc = ep->ifc;
    unsigned i;
    for (i = 0; i < ifc->nrx; i++) {
        if (ifc->rx[i] == ep) {
            ifc->rx[i] = ifc->rx[--ifc->nrx];
            break;
        }
    }
    ifc->nlive--;
    for (i = 0; i < RVX__TL_AM_CHANNELS; i++)
        ((uint64_t *)(uintptr_t)ep->tx[i].peer_head)[RVX__SHM_CTL_TAIL] = ep->tx[i].tail;
    if (ep->peer_mbox && ep->peer_mbox != ifc->mbox) munmap(ep->peer_mbox, ep->peer_mbox_len);
    if (ep->pidfd >= 0) close(ep->pidfd);
    ep->peer_mbox = NULL;
}

RVX_COLD rvx_status_t rvx__shm_ep_alive(rvx__shm_ep_t *ep)
{
    if (ep->failed) return RVX_ERR_PEER_FAILED;
    if (rvx_load_acquire_u64((uint64_t *)(void *)ep->peer_mbox) == RVX__SHM_MBOX_CLOSED) {
        ep->failed = 1;  /* the peer destroyed its worker */
        return RVX_ERR_PEER_FAILED;
    }
    if (ep->pid == getpid()) return RVX_OK;
    if (ep->pidfd >= 0) {
        struct pollfd pfd;
        pfd.fd = ep->pidfd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        if (poll(&pfd, 1, 0) > 0 && (pfd.revents & POLLIN)) ep->failed = 1;
    } else if (kill(ep->pid, 0) && errno == ESRCH) {
        ep->failed = 1;
    }
    return ep->failed ? RVX_ERR_PEER_FAILED : RVX_OK;
}

/* ---- memory and keys (cold) ----------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__shm_mem_alloc(rvx__shm_ctx_t *ctx, size_t len, rvx__shm_mem_t *mem)
{
    size_t maplen = (len + ctx->page - 1) & ~(ctx->page - 1);
    mem->fd = rvx__shm_memfd("rvx-mem", maplen);
    if (mem->fd < 0) return RVX_ERR_NO_MEMORY;
    mem->addr = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_SHARED, mem->fd, 0);
    if (mem->addr == MAP_FAILED) {
        close(mem->fd);
        return RVX_ERR_NO_MEMORY;
    }
    mem->len = len;
    if (rvx__shm_reg_add(ctx, mem->addr, len) != RVX_OK) {
        munmap(mem->addr, maplen);
        close(mem->fd);
        return RVX_ERR_NO_MEMORY;
    }
    return RVX_OK;
}

RVX_COLD rvx_status_t rvx__shm_mem_reg(rvx__shm_ctx_t *ctx, void *addr, size_t len,
                                      rvx__shm_mem_t *mem)
{
    mem->addr = addr;
    mem->len = len;
    mem->fd = -1;
    return rvx__shm_reg_add(ctx, addr, len);
}

RVX_COLD void rvx__shm_mem_dereg(rvx__shm_ctx_t *ctx, rvx__shm_mem_t *mem)
{
    rvx__shm_reg_del(ctx, mem->addr, mem->len);
    if (mem->fd >= 0) {
        munmap(mem->addr, (mem->len + ctx->page - 1) & ~(ctx->page - 1));
        close(mem->fd);
    }
}

RVX_COLD void rvx__shm_rkey_pack(const rvx__shm_mem_t *mem, void *buf)
{
    rvx__shm_packed_rkey_t p;
    memset(&p, 0, sizeof(p));
    p.magic = RVX__SHM_MAGIC;
    p.base = (uint64_t)(uintptr_t)mem->addr;
    p.len = mem->len;
    p.pid = (int32_t)getpid();
    p.fd = mem->fd;
    memcpy(buf, &p, sizeof(p));
}

/* The key already names its process (pid), which unpack checks against the endpoint's peer. */
RVX_COLD void rvx__shm_rkey_stamp(void *buf, int rank) { (void)buf; (void)rank; }

RVX_COLD rvx_status_t rvx__shm_rkey_unpack(rvx__shm_ep_t *ep, const void *buf, rvx__shm_rkey_t *rkey)
{
    rvx__shm_packed_rkey_t p;
    memcpy(&p, buf, sizeof(p));
    memset(rkey, 0, sizeof(*rkey));
    if (p.magic != RVX__SHM_MAGIC || p.pid != ep->pid || p.base + p.len < p.base) {
        rvx__log("rkey_unpack: not an rkey of rank %d's process (corrupt or from another peer)",
                 ep->rank);
        return RVX_ERR_INVALID_PARAM;
    }
    rkey->rbase = p.base;
    rkey->len = p.len;
    rkey->pid = p.pid;
    if (p.pid == getpid()) {
        /* a loopback key is bounded by what this process registered, never by its own word */
        if (!rvx__shm_reg_covers(ep->ifc->tctx, p.base, p.len)) {
            rvx__log("rkey_unpack: a key of this process names %llu bytes at %#llx, which it did "
                     "not register", (unsigned long long)p.len, (unsigned long long)p.base);
            memset(rkey, 0, sizeof(*rkey));
            return RVX_ERR_INVALID_PARAM;
        }
        rkey->self = 1;
        rkey->lbase = (uint8_t *)(uintptr_t)p.base;
        rkey->maplen = p.len;
    } else if (p.fd >= 0 && p.len) {
        rkey->lbase = (uint8_t *)rvx__shm_map_peer(p.pid, p.fd, p.len, "a memory region");
        if (!rkey->lbase) return errno == EINVAL ? RVX_ERR_INVALID_PARAM : RVX_ERR_PEER_FAILED;
        rkey->maplen = p.len;
    }
    return RVX_OK;
}

RVX_COLD void rvx__shm_rkey_release(rvx__shm_rkey_t *rkey)
{
    if (rkey->lbase && !rkey->self) munmap(rkey->lbase, rkey->maplen);
    memset(rkey, 0, sizeof(*rkey));
}

/* ---- RMA ------------------------------------------------------------------------------------ */

/* Not in the mapping: cross-memory attach into registered memory, or an error. The bounds are
 * checked against the region's real length before any byte moves; a mapped key (maplen == len)
 * only comes here when it is out of bounds. */
RVX_COLD rvx_status_t rvx__shm_rma_slow(rvx__shm_ep_t *ep, void *local, size_t len, uint64_t raddr,
                                        const rvx__shm_rkey_t *rkey, int is_put)
{
    uint64_t off = raddr - rkey->rbase;
    size_t done = 0;
    if (off > rkey->len || len > rkey->len - off || rkey->lbase) return RVX_ERR_REMOTE_ACCESS;
    while (done < len) {
        struct iovec l, r;
        ssize_t n;
        l.iov_base = (char *)local + done;
        l.iov_len = len - done;
        r.iov_base = (void *)(uintptr_t)(raddr + done);
        r.iov_len = len - done;
        n = syscall(is_put ? SYS_process_vm_writev : SYS_process_vm_readv, rkey->pid, &l, 1UL,
                    &r, 1UL, 0UL);
        if (n <= 0) {
            int e = n < 0 ? errno : EFAULT;
            if (e == ESRCH) { ep->failed = 1; return RVX_ERR_PEER_FAILED; }
            if (e == EPERM) {
                rvx__log("the kernel forbids cross-memory attach to process %d (ptrace policy); "
                         "allocate shared regions with rvx_mem_alloc instead", rkey->pid);
                return RVX_ERR_UNSUPPORTED;
            }
            if (e == EFAULT) return RVX_ERR_REMOTE_ACCESS; /* region no longer mapped there */
            return RVX_ERR_IO;
        }
        done += (size_t)n;
    }
    return RVX_OK;
}

/* The mapping check: one subtraction and two compares (the second catches a wrapped offset). */
#define RVX__SHM_IN_MAP(rkey, raddr, len, off)                                                  \
    ((off) = (raddr) - (rkey)->rbase,                                                           \
     RVX_LIKELY((off) + (len) <= (rkey)->maplen && (off) + (len) >= (len)))

RVX_INLINE rvx_status_t rvx__shm_put_short(rvx__shm_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__shm_rkey_t *rkey)
{
    uint64_t off;
    if (RVX__SHM_IN_MAP(rkey, raddr, len, off)) {
        if (len) memcpy(rkey->lbase + off, src, len);
        return RVX_OK;
    }
    return rvx__shm_rma_slow(ep, (void *)(uintptr_t)src, len, raddr, rkey, 1);
}

RVX_INLINE rvx_status_t rvx__shm_put_bcopy(rvx__shm_ep_t *ep, const void *src, size_t len,
                                          uint64_t raddr, const rvx__shm_rkey_t *rkey)
{
    return rvx__shm_put_short(ep, src, len, raddr, rkey);
}

/* shm has no registration: zero-copy is the same single copy, completed before return. */
RVX_INLINE rvx_status_t rvx__shm_put_zcopy(rvx__shm_ep_t *ep, const void *src, size_t len,
                                          const rvx__shm_mem_t *lmem, uint64_t raddr,
                                          const rvx__shm_rkey_t *rkey, rvx_request_t *req)
{
    (void)lmem;
    (void)req;
    return rvx__shm_put_short(ep, src, len, raddr, rkey);
}

RVX_INLINE rvx_status_t rvx__shm_get_bcopy(rvx__shm_ep_t *ep, void *dst, size_t len, uint64_t raddr,
                                          const rvx__shm_rkey_t *rkey, rvx_request_t *req)
{
    uint64_t off;
    (void)req;
    if (RVX__SHM_IN_MAP(rkey, raddr, len, off)) {
        if (len) memcpy(dst, rkey->lbase + off, len);
        return RVX_OK;
    }
    return rvx__shm_rma_slow(ep, dst, len, raddr, rkey, 0);
}

RVX_INLINE rvx_status_t rvx__shm_get_zcopy(rvx__shm_ep_t *ep, void *dst, size_t len,
                                          const rvx__shm_mem_t *lmem, uint64_t raddr,
                                          const rvx__shm_rkey_t *rkey, rvx_request_t *req)
{
    (void)lmem;
    return rvx__shm_get_bcopy(ep, dst, len, raddr, rkey, req);
}

/* ---- atomics: CPU atomics on the mapping ---------------------------------------------------- */

RVX_COLD rvx_status_t rvx__shm_amo_slow(const rvx__shm_rkey_t *rkey, uint64_t raddr, size_t size)
{
    uint64_t off = raddr - rkey->rbase;
    if (off > rkey->len || size > rkey->len - off) return RVX_ERR_REMOTE_ACCESS;
    if (raddr & (size - 1)) return RVX_ERR_INVALID_PARAM; /* must be naturally aligned */
    rvx__log("atomics over shm need memory from rvx_mem_alloc (this region was registered "
             "with rvx_mem_reg and is reached by cross-memory attach, which is not atomic)");
    return RVX_ERR_UNSUPPORTED;
}

/* One body for both widths: T is the integer type, S its signed twin. Operations the CPU has
 * are one instruction; MULT, MIN and MAX are a compare-and-swap loop. */
#define RVX__SHM_AMO_DEFINE(BITS, T, S)                                                         \
    RVX_INLINE T rvx__shm_amo##BITS(T *p, rvx_amo_op_t op, T v, T cmp)                         \
    {                                                                                           \
        T old, nv;                                                                              \
        switch (op) {                                                                           \
        case RVX_AMO_SET:  __atomic_store_n(p, v, __ATOMIC_SEQ_CST); return 0;                 \
        case RVX_AMO_GET:  return __atomic_load_n(p, __ATOMIC_SEQ_CST);                         \
        case RVX_AMO_SWAP: return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST);                  \
        case RVX_AMO_CAS:                                                                       \
            __atomic_compare_exchange_n(p, &cmp, v, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);     \
            return cmp;                                                                         \
        case RVX_AMO_ADD:  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);                   \
        case RVX_AMO_SUB:  return __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST);                   \
        case RVX_AMO_INC:  return __atomic_fetch_add(p, (T)1, __ATOMIC_SEQ_CST);                \
        case RVX_AMO_DEC:  return __atomic_fetch_sub(p, (T)1, __ATOMIC_SEQ_CST);                \
        case RVX_AMO_AND:  return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST);                   \
        case RVX_AMO_OR:   return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST);                    \
        case RVX_AMO_XOR:  return __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST);                   \
        default: break;                                                                         \
        }                                                                                       \
        old = __atomic_load_n(p, __ATOMIC_RELAXED);                                             \
        do {                                                                                    \
            switch (op) {                                                                       \
            case RVX_AMO_MULT: nv = (T)(old * v); break;                                        \
            case RVX_AMO_MIN:  nv = (S)old < (S)v ? old : v; break;                             \
            case RVX_AMO_MAX:  nv = (S)old > (S)v ? old : v; break;                             \
            case RVX_AMO_UMIN: nv = old < v ? old : v; break;                                   \
            default:           nv = old > v ? old : v; break; /* UMAX */                        \
            }                                                                                   \
        } while (!__atomic_compare_exchange_n(p, &old, nv, 1, __ATOMIC_SEQ_CST,                 \
                                              __ATOMIC_RELAXED));                               \
        return old;                                                                             \
    }                                                                                           \
                                                                                                \
    RVX_INLINE rvx_status_t rvx__shm_atomic##BITS(rvx__shm_ep_t *ep, rvx_amo_op_t op, T v, T cmp, \
                                                 uint64_t raddr, const rvx__shm_rkey_t *rkey,        \
                                                 T *fetch, rvx_request_t *req)                  \
    {                                                                                           \
        uint64_t off;                                                                           \
        T old;                                                                                  \
        (void)ep;                                                                               \
        (void)req;                                                                              \
        if (RVX_UNLIKELY(!RVX__SHM_IN_MAP(rkey, raddr, sizeof(T), off) ||                       \
                         (raddr & (sizeof(T) - 1))))                                            \
            return rvx__shm_amo_slow(rkey, raddr, sizeof(T));                                   \
        old = rvx__shm_amo##BITS((T *)(void *)(rkey->lbase + off), op, v, cmp);                 \
        if (fetch) *fetch = old;                                                                \
        return RVX_OK;                                                                          \
    }

RVX__SHM_AMO_DEFINE(32, uint32_t, int32_t)
RVX__SHM_AMO_DEFINE(64, uint64_t, int64_t)

/* ---- messages ------------------------------------------------------------------------------- */

RVX_INLINE size_t rvx__shm_nslots(size_t len) { return (8 + len + RVX__SHM_SLOT - 1) / RVX__SHM_SLOT; }

/* Room for a frame with `len` body bytes; returns where to write the body, or NULL when full.
 * A frame that would cross the ring's end is preceded by a skip frame. */
RVX_INLINE void *rvx__shm_am_claim(rvx__shm_ep_t *ep, unsigned chan, size_t len)
{
    rvx__shm_tx_t *tx = &ep->tx[chan];
    uint64_t pos = tx->tail;
    size_t nslots = rvx__shm_nslots(len);
    size_t idx = (size_t)pos & (RVX__SHM_NSLOTS - 1);
    size_t skip = (nslots > 1 && idx + nslots > RVX__SHM_NSLOTS) ? RVX__SHM_NSLOTS - idx : 0;

    if (RVX_UNLIKELY(pos + skip + nslots - tx->head_cache > RVX__SHM_NSLOTS)) {
        tx->head_cache = rvx_load_acquire_u64(tx->peer_head);
        if (pos + skip + nslots - tx->head_cache > RVX__SHM_NSLOTS) return NULL;
    }
    if (skip) {
        rvx_store_release_u64((uint64_t *)(void *)(tx->slots + idx * RVX__SHM_SLOT),
                              rvx__shm_header(pos, skip * RVX__SHM_SLOT - 8, RVX__SHM_SKIP));
        tx->tail = pos += skip;
        idx = 0;
    }
    return tx->slots + idx * RVX__SHM_SLOT + 8;
}

/* Make the frame visible: one release store of its header, after the body. RVX_OK always. */
RVX_INLINE rvx_status_t rvx__shm_am_publish(rvx__shm_ep_t *ep, unsigned chan, void *body, size_t len,
                                           unsigned info)
{
    rvx__shm_tx_t *tx = &ep->tx[chan];
    rvx_store_release_u64((uint64_t *)(void *)((uint8_t *)body - 8),
                          rvx__shm_header(tx->tail, len, info));
    tx->tail += rvx__shm_nslots(len);
    return RVX_OK;
}

/* Zero-copy message, as the contract has it: between processes there is no zero-copy here, so
 * header and body are copied into the ring (the same as claim + publish) and the call completes
 * at once: RVX_OK, buf reusable; lmem and req are not used. RVX_ERR_NO_RESOURCE: ring full. */
#define RVX__SHM_AM_ZCOPY         0  /* no real zero-copy: callers need not register */
#define RVX__SHM_AM_ZCOPY_HDR_MAX 28
RVX_INLINE rvx_status_t rvx__shm_am_zcopy(rvx__shm_ep_t *ep, unsigned chan, const void *hdr, size_t hdrlen,
                                         const void *buf, size_t len, const rvx__shm_mem_t *lmem,
                                         unsigned info, rvx_request_t *req)
{
    uint8_t *b;
    (void)lmem;
    (void)req;
    if (hdrlen > RVX__SHM_AM_ZCOPY_HDR_MAX) return RVX_ERR_INVALID_PARAM;
    if (RVX_UNLIKELY(ep->failed)) return RVX_ERR_PEER_FAILED;
    b = (uint8_t *)rvx__shm_am_claim(ep, chan, hdrlen + len);
    if (!b) return RVX_ERR_NO_RESOURCE;
    if (hdrlen) memcpy(b, hdr, hdrlen);
    if (len) memcpy(b + hdrlen, buf, len);
    rvx__shm_am_publish(ep, chan, b, hdrlen + len, info);
    return RVX_OK;
}

#if RVX_CAN_RECEIVE
RVX_INLINE int rvx__shm_ready(const rvx__shm_ep_t *ep, unsigned chan)
{
    return __atomic_load_n(ep->rx[chan].next, __ATOMIC_RELAXED) == ep->rx[chan].expect;
}

/* Hand over up to a batch of frames from one ring. */
RVX_COLD int rvx__shm_consume(rvx__shm_ep_t *ep, unsigned chan)
{
    rvx__shm_rx_t *rx = &ep->rx[chan];
    int n = 0;
    while (n < RVX__SHM_RX_BATCH) {
        uint64_t head = rx->head;
        uint8_t *slot = (uint8_t *)(uintptr_t)rx->next;
        uint64_t hdr = rvx_load_acquire_u64((uint64_t *)(void *)slot);
        size_t len = (size_t)(hdr >> 32) & 0xffff, nslots, i;
        unsigned info = (unsigned)(hdr >> 48);
        if ((uint32_t)hdr != rx->expect) break;
        nslots = rvx__shm_nslots(len);
        if (RVX_UNLIKELY(((size_t)head & (RVX__SHM_NSLOTS - 1)) + nslots > RVX__SHM_NSLOTS)) {
            /* a frame may not wrap: the peer is broken; drop the rest of this lap */
            nslots = RVX__SHM_NSLOTS - ((size_t)head & (RVX__SHM_NSLOTS - 1));
            info = RVX__SHM_SKIP;
            rvx__log("shm: rank %d sent a frame that crosses the ring end; dropped", ep->rank);
        }
        if (info != RVX__SHM_SKIP) rvx__shm_rx_deliver(ep, chan, info, slot + 8, len);
        /* Continuation slots may hold payload that, a lap later, would be read as a header:
         * stamp each with its own (now stale) position. */
        for (i = 1; i < nslots; i++)
            *(uint64_t *)(void *)(slot + i * RVX__SHM_SLOT) = (uint32_t)(head + i + 1);
        rx->head = head + nslots;
        rvx__shm_rx_at(rx);
        rvx_store_release_u64(rx->head_pub, rx->head);
        n++;
    }
    return n;
}

/* Something has arrived on endpoint `first` (or later ones): deliver it all. Out of line, so
 * that the empty poll needs no saved registers. */
RVX_COLD int rvx__shm_progress_from(rvx__shm_iface_t *ifc, unsigned first)
{
    unsigned i;
    int done = 0;
    /* Progress called from inside a handler would hand the same frame over again (the ring's
     * head moves only after its handler returns): refuse, and say so once. */
    if (ifc->in_rx) {
        if (!ifc->warned_nested++) rvx__log("rvx_progress called from an AM handler: ignored");
        return 0;
    }
    ifc->in_rx = 1;
    for (i = first; i < ifc->nrx; i++) {
        rvx__shm_ep_t *ep = ifc->rx[i];
        if (rvx__shm_ready(ep, RVX__CHAN_REPLY)) done += rvx__shm_consume(ep, RVX__CHAN_REPLY);
        if (rvx__shm_ready(ep, RVX__CHAN_REQUEST)) done += rvx__shm_consume(ep, RVX__CHAN_REQUEST);
    }
    ifc->in_rx = 0;
    return done;
}
#endif

/* Progress: nothing without live endpoints; shm has no TX completions to poll (outstanding is
 * always 0); RX rings only in builds that can receive: two loads and a compare per ring. */
RVX_INLINE int rvx__shm_progress(rvx__shm_iface_t *ifc)
{
#if RVX_CAN_RECEIVE
    unsigned i, n = ifc->nrx;
    for (i = 0; i < n; i++) {
        const rvx__shm_ep_t *ep = ifc->rx[i];
        if (RVX_UNLIKELY(rvx__shm_ready(ep, RVX__CHAN_REPLY) || rvx__shm_ready(ep, RVX__CHAN_REQUEST)))
            return rvx__shm_progress_from(ifc, i);
    }
    return 0;
#else
    (void)ifc;
    return 0;
#endif
}

/* A reply must not fail for lack of room: wait, draining incoming replies (whose handlers cannot
 * send) so two peers replying to each other cannot deadlock; give up if the peer is gone. */
RVX_COLD void *rvx__shm_am_wait_room(rvx__shm_ep_t *ep, unsigned chan, size_t len)
{
    unsigned spins = 0;
    void *body;
    while (!(body = rvx__shm_am_claim(ep, chan, len))) {
#if RVX_CAN_RECEIVE
        unsigned i;
        for (i = 0; i < ep->ifc->nrx; i++)
            if (rvx__shm_ready(ep->ifc->rx[i], RVX__CHAN_REPLY))
                rvx__shm_consume(ep->ifc->rx[i], RVX__CHAN_REPLY);
#endif
        if ((spins & 1023) == 1023 && rvx__shm_ep_alive(ep) != RVX_OK) return NULL;
        spins++;
        if (spins > 4096) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    return body;
}

/* Every shm operation is complete (visible to the peer) when it returns; a flush only orders
 * earlier stores before later ones and reports a peer already known to have failed. */
RVX_INLINE rvx_status_t rvx__shm_ep_flush(rvx__shm_ep_t *ep, rvx_request_t *req)
{
    (void)req;
    rvx_release_fence();
    return RVX_UNLIKELY(ep->failed) ? RVX_ERR_PEER_FAILED : RVX_OK;
}

RVX_INLINE rvx_status_t rvx__shm_iface_flush(rvx__shm_iface_t *ifc, rvx_request_t *req)
{
    (void)ifc;
    (void)req;
    rvx_release_fence();
    return RVX_OK;
}

#endif /* RVX_TL_SHM_H */
