/* rvx/tl/shm/mem.h: memory and keys: memfds and mapping a peer's (its regions, its mailbox),
 * the context and what this process registered, rvx_mem_alloc/rvx_mem_reg regions, and remote
 * keys packed, unpacked (a peer's memfd mapped once, here) and released. All cold. */
#ifndef RVX_TL_SHM_MEM_H
#define RVX_TL_SHM_MEM_H

#include "decl.h"

/* ---- memfds and a peer's mapping ------------------------------------------------------------ */

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

/* ---- context and registrations -------------------------------------------------------------- */

RVX_COLD rvx_status_t rvx__shm_ctx_init(rvx__shm_ctx_t *ctx, unsigned lane)
{
    (void)lane; /* one lane only (config.h refuses RVX_LANES > 1 on shm) */
    memset(ctx, 0, sizeof(*ctx));
    ctx->page = (size_t)sysconf(_SC_PAGESIZE);
    ctx->pid = (int32_t)getpid();
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

/* ---- memory and keys ------------------------------------------------------------------------ */

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
    mem->pid = ctx->pid;
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
    mem->pid = ctx->pid;
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
    p.pid = mem->pid;
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
    if (p.pid == ep->ifc->tctx->pid) {
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

/* The mapping of a region from rvx_mem_alloc (memory attached per access has none). */
RVX_COLD void *rvx__shm_rkey_ptr(const rvx__shm_rkey_t *rkey, uint64_t raddr, size_t len)
{
    uint64_t off = raddr - rkey->rbase;
    if (!rkey->lbase || raddr < rkey->rbase || off > rkey->maplen || len > rkey->maplen - off)
        return NULL;
    return rkey->lbase + off;
}

RVX_COLD void rvx__shm_rkey_release(rvx__shm_rkey_t *rkey)
{
    if (rkey->lbase && !rkey->self) munmap(rkey->lbase, rkey->maplen);
    memset(rkey, 0, sizeof(*rkey));
}

#endif /* RVX_TL_SHM_MEM_H */
