/* rvx/tl/mlx5/rkey.h: a local memory region and the remote keys to it, shared by every mlx5
 * transport: the region's type, the key as a put reads it (already in the byte order of the raddr
 * segment), the bounds check of multi-chunk transfers, and the packed form that travels between
 * processes (pack, stamp with the packing rank, unpack on the endpoint to that rank). */
#ifndef RVX_TL_MLX5_RKEY_H
#define RVX_TL_MLX5_RKEY_H

#include <string.h>

#include "hw.h"

#define RVX__MLX5_MAGIC 0x7276784d4c58ull /* "rvxMLX": rkeys and addresses of this layer */

typedef struct rvx__mlx5_mem {
    void          *addr;
    size_t         len;
    struct ibv_mr *mr;
    uint32_t       lkey;
    int            allocated;
} rvx__mlx5_mem_t;

typedef struct rvx__mlx5_packed_rkey {
    uint64_t magic;
    uint64_t base;
    uint64_t len;
    uint32_t rkey;
    uint32_t owner;   /* rank + 1 of the process that packed it (rvx__mlx5_rkey_stamp) */
} rvx__mlx5_packed_rkey_t;
#define RVX__MLX5_RKEY_PACKED_SIZE sizeof(rvx__mlx5_packed_rkey_t)

/* What a put reads: the remote key already in the byte order and position of the raddr segment's
 * second 8 bytes (rkey big-endian, then the 4 reserved bytes as zero). */
typedef struct rvx__mlx5_rkey {
    uint64_t rkey_word;
    uint64_t base;
    uint64_t len;
#if RVX_DEBUG
    const void *dbg_ep; /* the endpoint it was unpacked on (rvx_rkey_unpack): checked at use */
#endif
} rvx__mlx5_rkey_t;

/* Whether [raddr, raddr + len) lies in the region the key's owner announced. The NIC holds the
 * real bounds; a transfer of several chunks (and a zero-copy one) asks here first, so one that
 * would fail posts no chunk at all and an absurd length returns at once. */
RVX_INLINE int rvx__mlx5_rkey_covers(const rvx__mlx5_rkey_t *k, uint64_t raddr, size_t len)
{
    return (uint64_t)len <= k->len && raddr - k->base <= k->len - (uint64_t)len;
}

RVX_COLD void rvx__mlx5_rkey_pack(const rvx__mlx5_mem_t *mem, void *buf)
{
    rvx__mlx5_packed_rkey_t p;
    memset(&p, 0, sizeof(p));
    p.magic = RVX__MLX5_MAGIC;
    p.base = (uint64_t)(uintptr_t)mem->addr;
    p.len = mem->len;
    p.rkey = mem->mr->rkey;
    memcpy(buf, &p, sizeof(p));
}

/* Name the packing process in its key: a key unpacked on an endpoint to another rank is refused
 * (its number means nothing to that peer's NIC, or worse, names another region there). */
RVX_COLD void rvx__mlx5_rkey_stamp(void *buf, int rank)
{
    uint32_t owner = (uint32_t)rank + 1;
    memcpy((uint8_t *)buf + offsetof(rvx__mlx5_packed_rkey_t, owner), &owner, sizeof(owner));
}

/* Byte-swap once: a put stores rkey_word as the raddr segment's second 8 bytes. `rank` is the
 * peer the key came from: it must be the key's owner. */
RVX_COLD rvx_status_t rvx__mlx5_rkey_unpack(const void *buf, rvx__mlx5_rkey_t *rkey, int rank)
{
    rvx__mlx5_packed_rkey_t p;
    memcpy(&p, buf, sizeof(p));
    memset(rkey, 0, sizeof(*rkey));
    if (p.magic != RVX__MLX5_MAGIC || p.base + p.len < p.base) {
        rvx__log("rkey_unpack: not an " RVX__MLX5_TL " rkey (corrupt, or from another transport) "
                 "for rank %d", rank);
        return RVX_ERR_INVALID_PARAM;
    }
    if (p.owner != (uint32_t)rank + 1) {
        /* owner is the peer's word: printed as sent, never turned into a rank by arithmetic */
        rvx__log("rkey_unpack: a key whose owner word is %u (rank + 1) unpacked on the endpoint to "
                 "rank %d", p.owner, rank);
        return RVX_ERR_INVALID_PARAM;
    }
    rkey->rkey_word = (uint64_t)rvx_htobe32(p.rkey);
    rkey->base = p.base;
    rkey->len = p.len;
    return RVX_OK;
}

RVX_COLD void rvx__mlx5_rkey_release(rvx__mlx5_rkey_t *rkey) { memset(rkey, 0, sizeof(*rkey)); }

/* A peer's region is reached through the NIC only: no load or store address for it. */
RVX_COLD void *rvx__mlx5_rkey_ptr(const rvx__mlx5_rkey_t *rkey, uint64_t raddr, size_t len)
{
    (void)rkey; (void)raddr; (void)len;
    return NULL;
}

#endif /* RVX_TL_MLX5_RKEY_H */
