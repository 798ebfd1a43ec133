/* fuzz/sim_wqe: whatever an application writes into a send queue must not crash rvxsim. The
 * model's WQE decoders (RC and DCI: sim/decode.c's decode; UD: sim/ud.c's ud_decode) run on a
 * send queue filled with the input's bytes, at any producer count and doorbell record, for QPs
 * of every geometry and with memory regions to check keys and bounds against. A WQE the decoder
 * takes is also traced (the formatting of every field). The two files are compiled into this
 * harness (their static functions are reached that way); the model itself is not changed.
 *
 * Input: byte 0 the QP (type, ring size, largest WQE, strict or not), bytes 1-8 producer count
 * and doorbell distance, byte 9 patches (the ctrl segment's index and QPN made right, so the
 * decoder goes past them), then the ring's bytes, repeated to fill it. */
#include "../sim/engine.c"
#include "../sim/ud.c"

static struct sim_ctx sc;
static struct sim_mr mrs[3];
static struct sim_mr *tab[8];
static struct sim_pd pd_a, pd_b;      /* the model's PDs (engine.c reads their protection domain) */
static uint8_t region[3][4096];
static uint8_t ring[256 * 64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    unsigned i;
    (void)argc; (void)argv;
    /* the model's fault lines are expected here by the thousand */
    if (!getenv("FUZZ_VERBOSE")) stderr = fopen("/dev/null", "w");
    setenv("RVXSIM_TRACE_FILE", "/dev/null", 1); /* trace_wqe's lines */
    sim_env_init();
    sim_env.trace = 0;
    for (i = 0; i < 3; i++) {
        mrs[i].mr.lkey = mrs[i].mr.rkey = (i + 1) << 8 | 0x5a;
        mrs[i].mr.pd = i == 2 ? &pd_b.pd : &pd_a.pd;
        mrs[i].iova = mrs[i].addr = (uintptr_t)region[i];
        mrs[i].length = sizeof(region[i]);
        mrs[i].access = i == 1 ? 0 : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
        tab[i + 1] = &mrs[i];
    }
    sc.mr_tab = tab;
    sc.mr_tab_size = 8;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct wqe w;
    static struct ud_wqe uw;
    struct sim_qp qp;
    char whybuf[256];
    const char *why = "";
    uint32_t pc, db, cnt, i;
    unsigned cfg, patch;
    if (size < 10) return 0;
    cfg = data[0];
    memcpy(&pc, data + 1, 4);
    memcpy(&db, data + 5, 4);
    patch = data[9];
    data += 10;
    size -= 10;
    memset(&qp, 0, sizeof(qp));
    qp.sc = &sc;
    qp.qp.pd = &pd_a.pd;
    qp.qpn = 0x1234;
    cnt = 1u << (1 + (cfg & 7));          /* 2 .. 256 WQEBBs */
    qp.sq_wqe_cnt = cnt;
    qp.sq_buf = ring;
    qp.max_wqe_bytes = 64u << ((cfg >> 3) & 3); /* 64 .. 512 */
    qp.max_inline = (cfg & 0x20) ? 0 : qp.max_wqe_bytes - 32;
    qp.dc_type = (cfg & 0x40) ? SIM_DCI : 0;
    sim_env.strict = (cfg >> 7) & 1;
    db = pc + (db % (2 * cnt + 1));        /* the doorbell record at or after the WQE */
    if (size)
        for (i = 0; i < cnt * 64; i += (uint32_t)size)
            memcpy(ring + i, data, cnt * 64 - i < size ? cnt * 64 - i : size);
    else
        memset(ring, 0, cnt * 64);
    if (patch & 1) { /* a ctrl segment whose index and QPN are right */
        uint8_t *c = ring + ((pc & (cnt - 1)) << 6);
        c[1] = (uint8_t)(pc >> 8);
        c[2] = (uint8_t)pc;
        c[4] = (uint8_t)(qp.qpn >> 16);
        c[5] = (uint8_t)(qp.qpn >> 8);
        c[6] = (uint8_t)qp.qpn;
    }
    if (patch & 2) { /* the first data or pointer segment names a real region */
        uint8_t *c = ring + ((pc & (cnt - 1)) << 6);
        uint32_t k = htobe32(mrs[(patch >> 2) % 3].mr.lkey);
        uint64_t a = htobe64((uint64_t)(uintptr_t)region[(patch >> 2) % 3] + ((patch >> 4) << 6));
        unsigned off = (patch & 0x40) ? 32 : 16;
        memcpy(c + off + 4, &k, 4);
        memcpy(c + off + 8, &a, 8);
    }
    if (patch & 0x80) {
        if (ud_decode(&qp, pc, db, &uw, whybuf, sizeof(whybuf)) == 0) { volatile uint32_t l = uw.len; (void)l; }
    } else if (decode(&qp, pc, db, &w, &why, whybuf, sizeof(whybuf)) == 0) {
        int t = sim_env.trace;
        sim_env.trace = 1; /* format every field; the lines go to /dev/null */
        trace_wqe(&qp, &w);
        sim_env.trace = t;
        /* a decoded data segment's memory is where the model would read or write */
        for (i = 0; i < w.nsge; i++) {
            if (!w.sge[i].inl) {
                const char *m;
                uint8_t *p = (uint8_t *)mr_ptr(&qp, w.sge[i].lkey, w.sge[i].addr, w.sge[i].len, 0, &m);
                if (p && w.sge[i].len) { volatile uint8_t x = p[w.sge[i].len - 1]; (void)x; }
            } else if (w.sge[i].addr + w.sge[i].len > sizeof(w.b)) {
                abort(); /* an inline payload outside the copied WQE */
            }
        }
    }
    (void)why;
    return 0;
}
