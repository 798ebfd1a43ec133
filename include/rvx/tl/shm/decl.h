/* rvx/tl/shm/decl.h: shm's declarations: the constants of its mailbox and rings, its types, the
 * upcall a received frame goes to, and the one cold function a file calls ahead of its
 * definition. Every other file of tl/shm/ reads this one first. */
#ifndef RVX_TL_SHM_DECL_H
#define RVX_TL_SHM_DECL_H

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../contract.h"

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
    int32_t         pid;  /* getpid() once: keys name it, and it is a system call each time */
    rvx__shm_reg_t *regs;
    unsigned        nregs, capregs;
} rvx__shm_ctx_t;

typedef struct rvx__shm_mem {
    void  *addr;
    size_t len;
    int    fd;   /* memfd of rvx_mem_alloc memory; -1 for registered user memory */
    int32_t pid; /* the registering process, which its packed keys name */
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

/* ---- cold functions called ahead of their file ---------------------------------------------- */

/* the peer's liveness (shm/iface.h), which a sender waiting for room checks (shm/ring.h) */
RVX_COLD rvx_status_t rvx__shm_ep_alive(rvx__shm_ep_t *ep);

#endif /* RVX_TL_SHM_DECL_H */
