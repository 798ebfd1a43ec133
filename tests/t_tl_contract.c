/* t_tl_contract: the selected transport provides every name of the tl contract
 * (include/rvx/tl/contract.h). It is a compile-time check: a missing name does not build. At run
 * time it checks the few fields the contract promises. */
#define RVX_AM_HANDLERS(X) X(NOP, on_nop)
#include <rvx/rvx.h>
#include "testlib.h"

static void on_nop(rvx_am_token_t *t, const uint64_t *a, unsigned n, void *p, size_t len)
{
    (void)t; (void)a; (void)n; (void)p; (void)len;
}

#define NAME(f) (void)&f;

int main(void)
{
    /* types */
    rvx__tl_ctx_t c;
    rvx__tl_iface_t i;
    rvx__tl_ep_t e;
    rvx__tl_mem_t m;
    rvx__tl_addr_t a;
    rvx_rkey_t k;
    unsigned char packed[RVX__TL_RKEY_PACKED_SIZE];
    (void)c; (void)e; (void)m; (void)a; (void)k; (void)packed;
    /* set-up */
    NAME(rvx__tl_ctx_init) NAME(rvx__tl_ctx_fini) NAME(rvx__tl_iface_init) NAME(rvx__tl_iface_fini)
    NAME(rvx__tl_iface_address) NAME(rvx__tl_iface_wireup) NAME(rvx__tl_ep_connect) NAME(rvx__tl_ep_disconnect)
    NAME(rvx__tl_ep_alive) NAME(rvx__tl_mem_alloc) NAME(rvx__tl_mem_reg) NAME(rvx__tl_mem_dereg)
    NAME(rvx__tl_rkey_pack) NAME(rvx__tl_rkey_unpack) NAME(rvx__tl_rkey_release)
    /* fast path */
    NAME(rvx__tl_put_short) NAME(rvx__tl_put_bcopy) NAME(rvx__tl_put_zcopy)
    NAME(rvx__tl_get_bcopy) NAME(rvx__tl_get_zcopy) NAME(rvx__tl_atomic64) NAME(rvx__tl_atomic32)
    NAME(rvx__tl_am_claim) NAME(rvx__tl_am_publish) NAME(rvx__tl_am_wait_room) NAME(rvx__tl_am_zcopy)
    NAME(rvx__tl_ep_flush) NAME(rvx__tl_iface_flush) NAME(rvx__tl_progress)
    /* the fields the core relies on */
    memset(&i, 0, sizeof(i));
    T_CHECK(i.nlive == 0 && i.outstanding == 0, "iface counters");
    T_CHECK(RVX__TL_AM_CHANNELS == 2, "request and reply channels");
    T_CHECK(RVX_RKEY_PACKED_SIZE == RVX__TL_RKEY_PACKED_SIZE, "packed rkey size");
    T_CHECK(RVX__TL_AM_ZCOPY == 0 || RVX__TL_AM_ZCOPY == 1, "RVX__TL_AM_ZCOPY is a flag");
    T_CHECK(RVX__TL_AM_ZCOPY_HDR_MAX >= 16, "a zero-copy message carries a 16-byte header");
    return t_exit();
}
