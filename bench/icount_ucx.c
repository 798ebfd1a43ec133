/* icount_ucx: UCX's own rc_mlx5 (or dc_mlx5) transport, one noinline wrapper per operation, for
 * counting instructions with callgrind beside rvx's icount_rc (bench/compare_mlx5.sh). Two UCT
 * interfaces (or two UCP workers) in one process, connected to each other on the same device.
 *   icount_ucx <op> <N> [tl]   op: uct_put8 uct_am_short8 uct_progress_idle uct_flush_ready
 *                                  uct_put8_batch16 ucp_put8 ucp_tag_send8 ucp_progress_idle
 *                              tl: rc_mlx5 (default) or dc_mlx5
 * Each wrapper runs N times; set-up, flushes between batches and the receiver's progress are outside
 * the wrappers, so (count at 2N - count at N) / N is one call. uct_put8_batch16 is a stream of N
 * puts flushed every 16, counted in two wrappers (bench_uct_put8_batch16 and bench_uct_flush_done,
 * both to be collected), so the count over N is the cost of one put with its share of the flush.
 * Where a wrapper needs completions in the CQ, the program waits for the adapter to write them
 * (ucx_watch.h) before calling it. Exits non-zero if an operation failed or a completion was not
 * there. Links against the system's UCX (libucx-dev); runs on rvxsim through build/sim/rvxsim-env. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uct/api/uct.h>
#include <ucp/api/ucp.h>
#include <ucs/async/async_fwd.h>

#define NOINLINE __attribute__((noinline, used))
#define DIE(...) do { fprintf(stderr, "icount_ucx: " __VA_ARGS__); fputc('\n', stderr); exit(2); } while (0)
#define OK(x) do { ucs_status_t _s = (x); if (_s != UCS_OK) DIE("%s: %s", #x, ucs_status_string(_s)); } while (0)

#include "ucx_watch.h"

/* ------------------------------------------------------------------ the counted wrappers */

NOINLINE ucs_status_t bench_uct_put8(uct_ep_h ep, const uint64_t *v, uint64_t raddr, uct_rkey_t rkey)
{
	return uct_ep_put_short(ep, v, 8, raddr, rkey);
}

NOINLINE ucs_status_t bench_uct_am_short8(uct_ep_h ep, uint64_t hdr)
{
	return uct_ep_am_short(ep, 1, hdr, NULL, 0);
}

NOINLINE unsigned bench_uct_progress_idle(uct_worker_h w)
{
	return uct_worker_progress(w);
}

/* the completion is in the CQ: one progress takes it, then the flush finds nothing outstanding */
NOINLINE ucs_status_t bench_uct_flush_ready(uct_worker_h w, uct_ep_h ep)
{
	uct_worker_progress(w);
	return uct_ep_flush(ep, 0, NULL);
}

/* a stream, flushed every 16 puts: the puts and the flush that asks for their completion ... */
NOINLINE long bench_uct_put8_batch16(uct_ep_h ep, const uint64_t *v, uint64_t raddr, uct_rkey_t rkey)
{
	long bad = 0;
	for (int k = 0; k < 16; k++)
		bad += uct_ep_put_short(ep, v, 8, raddr, rkey) != UCS_OK;
	return bad + (uct_ep_flush(ep, 0, NULL) != UCS_INPROGRESS);
}

/* ... then, every completion in the CQ, progress until the flush is done */
NOINLINE ucs_status_t bench_uct_flush_done(uct_worker_h w, uct_ep_h ep)
{
	ucs_status_t s;
	do
		uct_worker_progress(w);
	while ((s = uct_ep_flush(ep, 0, NULL)) == UCS_INPROGRESS);
	return s;
}

NOINLINE ucs_status_ptr_t bench_ucp_put8(ucp_ep_h ep, const uint64_t *v, uint64_t raddr, ucp_rkey_h rkey,
					 const ucp_request_param_t *p)
{
	return ucp_put_nbx(ep, v, 8, raddr, rkey, p);
}

NOINLINE ucs_status_ptr_t bench_ucp_tag_send8(ucp_ep_h ep, const uint64_t *v, const ucp_request_param_t *p)
{
	return ucp_tag_send_nbx(ep, v, 8, 0x1234, p);
}

NOINLINE unsigned bench_ucp_progress_idle(ucp_worker_h w)
{
	return ucp_worker_progress(w);
}

/* ------------------------------------------------------------------ UCT set-up */

static struct {
	ucs_async_context_t *async;
	uct_component_h comp;
	uct_md_h md;
	uct_worker_h w1, w2;
	uct_iface_h i1, i2;
	uct_ep_h e1, e2;
	uct_mem_h memh;
	uct_rkey_bundle_t rkey;
	uint64_t *buf;
	long am_seen;
	const char *tl;               /* rc_mlx5 or dc_mlx5 */
} U;

static ucs_status_t am_cb(void *arg, void *data, size_t length, unsigned flags)
{
	(void)arg; (void)data; (void)length; (void)flags;
	U.am_seen++;
	return UCS_OK;
}

static uct_iface_h uct_iface(uct_worker_h w)
{
	uct_iface_config_t *cfg;
	uct_iface_params_t p;
	uct_iface_h i;

	OK(uct_md_iface_config_read(U.md, U.tl, NULL, NULL, &cfg));
	memset(&p, 0, sizeof(p));
	p.field_mask = UCT_IFACE_PARAM_FIELD_OPEN_MODE | UCT_IFACE_PARAM_FIELD_DEVICE |
		       UCT_IFACE_PARAM_FIELD_STATS_ROOT | UCT_IFACE_PARAM_FIELD_RX_HEADROOM;
	p.open_mode = UCT_IFACE_OPEN_MODE_DEVICE;
	p.mode.device.tl_name = U.tl;
	p.mode.device.dev_name = "mlx5_0:1";
	OK(uct_iface_open(U.md, w, &p, cfg, &i));
	uct_config_release(cfg);
	uct_iface_progress_enable(i, UCT_PROGRESS_SEND | UCT_PROGRESS_RECV);
	return i;
}

static uct_ep_h uct_ep(uct_iface_h i)
{
	uct_ep_params_t p;
	uct_ep_h e;
	memset(&p, 0, sizeof(p));
	p.field_mask = UCT_EP_PARAM_FIELD_IFACE;
	p.iface = i;
	OK(uct_ep_create(&p, &e));
	return e;
}

/* An endpoint of an interface-connected transport (dc_mlx5): it reaches to_if's address. */
static uct_ep_h uct_ep_to_iface(uct_iface_h i, uct_iface_h to_if)
{
	uct_iface_attr_t a;
	uct_ep_params_t p;
	uct_ep_h e;

	OK(uct_iface_query(to_if, &a));
	uct_device_addr_t *dev = malloc(a.device_addr_len);
	uct_iface_addr_t *ia = malloc(a.iface_addr_len);
	OK(uct_iface_get_device_address(to_if, dev));
	OK(uct_iface_get_address(to_if, ia));
	memset(&p, 0, sizeof(p));
	p.field_mask = UCT_EP_PARAM_FIELD_IFACE | UCT_EP_PARAM_FIELD_DEV_ADDR |
		       UCT_EP_PARAM_FIELD_IFACE_ADDR;
	p.iface = i;
	p.dev_addr = dev;
	p.iface_addr = ia;
	OK(uct_ep_create(&p, &e));
	free(dev);
	free(ia);
	return e;
}

static void uct_connect(uct_iface_h from_if, uct_ep_h from, uct_iface_h to_if, uct_ep_h to)
{
	uct_iface_attr_t a;
	uct_device_addr_t *dev;
	uct_ep_addr_t *ep;

	OK(uct_iface_query(to_if, &a));
	dev = malloc(a.device_addr_len);
	ep = malloc(a.ep_addr_len);
	OK(uct_iface_get_device_address(to_if, dev));
	OK(uct_ep_get_address(to, ep));
	OK(uct_ep_connect_to_ep(from, dev, ep));
	free(dev);
	free(ep);
	(void)from_if;
}

static void uct_setup(void)
{
	uct_component_h *comps;
	unsigned ncomp;
	uct_md_config_t *mcfg;
	uct_component_attr_t ca;
	void *rkey_buf;
	uct_md_attr_t ma;

	OK(ucs_async_context_create(UCS_ASYNC_MODE_THREAD_SPINLOCK, &U.async));
	OK(uct_worker_create(U.async, UCS_THREAD_MODE_SINGLE, &U.w1));
	OK(uct_worker_create(U.async, UCS_THREAD_MODE_SINGLE, &U.w2));
	OK(uct_query_components(&comps, &ncomp));
	for (unsigned c = 0; c < ncomp && !U.md; c++) {
		memset(&ca, 0, sizeof(ca));
		ca.field_mask = UCT_COMPONENT_ATTR_FIELD_NAME | UCT_COMPONENT_ATTR_FIELD_MD_RESOURCE_COUNT;
		OK(uct_component_query(comps[c], &ca));
		if (strcmp(ca.name, "ib"))
			continue;
		U.comp = comps[c];
		OK(uct_md_config_read(U.comp, NULL, NULL, &mcfg));
		OK(uct_md_open(U.comp, "mlx5_0", mcfg, &U.md));
		uct_config_release(mcfg);
	}
	if (!U.md)
		DIE("no ib component with mlx5_0 (run through build/sim/rvxsim-env)");
	U.i1 = uct_iface(U.w1);
	U.i2 = uct_iface(U.w2);
	OK(uct_iface_set_am_handler(U.i2, 1, am_cb, NULL, 0));
	OK(uct_iface_set_am_handler(U.i1, 1, am_cb, NULL, 0));
	uct_iface_attr_t ia;
	OK(uct_iface_query(U.i1, &ia));
	if (ia.cap.flags & UCT_IFACE_FLAG_CONNECT_TO_IFACE) {
		U.e1 = uct_ep_to_iface(U.i1, U.i2);
		U.e2 = uct_ep_to_iface(U.i2, U.i1);
	} else {
		U.e1 = uct_ep(U.i1);
		U.e2 = uct_ep(U.i2);
		uct_connect(U.i1, U.e1, U.i2, U.e2);
		uct_connect(U.i2, U.e2, U.i1, U.e1);
	}
	U.buf = aligned_alloc(4096, 4096);
	memset(U.buf, 0, 4096);
	OK(uct_md_mem_reg(U.md, U.buf, 4096, UCT_MD_MEM_ACCESS_ALL, &U.memh));
	OK(uct_md_query(U.md, &ma));
	rkey_buf = malloc(ma.rkey_packed_size);
	OK(uct_md_mkey_pack(U.md, U.memh, rkey_buf));
	OK(uct_rkey_unpack(U.comp, rkey_buf, &U.rkey));
	free(rkey_buf);
}

static void uct_progress_both(void)
{
	uct_worker_progress(U.w1);
	uct_worker_progress(U.w2);
}

static long uct_flush(void)
{
	ucs_status_t s;
	while ((s = uct_ep_flush(U.e1, 0, NULL)) == UCS_INPROGRESS || s == UCS_ERR_NO_RESOURCE)
		uct_progress_both();
	return s != UCS_OK;
}

static long run_uct(const char *op, long n)
{
	uint64_t v = 42;
	long errors = 0;

	/* a first put establishes the connection on both sides */
	while (uct_ep_put_short(U.e1, &v, 8, (uintptr_t)U.buf + 64, U.rkey.rkey) == UCS_ERR_NO_RESOURCE)
		uct_progress_both();
	errors += uct_flush();
	if (!strcmp(op, "uct_put8")) {
		for (long i = 0; i < n; i++) {
			v = (uint64_t)i + 1;
			errors += bench_uct_put8(U.e1, &v, (uintptr_t)U.buf + 64, U.rkey.rkey) != UCS_OK;
			if ((i & 63) == 63)
				errors += uct_flush();
		}
		errors += uct_flush();
		errors += U.buf[8] != (uint64_t)n;
	} else if (!strcmp(op, "uct_am_short8")) {
		for (long i = 0; i < n; i++) {
			errors += bench_uct_am_short8(U.e1, (uint64_t)i) != UCS_OK;
			if ((i & 15) == 15) {   /* let the receiver take them and credits come back */
				while (U.am_seen < i + 1)
					uct_progress_both();
				errors += uct_flush();
			}
		}
		while (U.am_seen < n)
			uct_progress_both();
	} else if (!strcmp(op, "uct_progress_idle")) {
		for (long i = 0; i < n; i++)
			errors += bench_uct_progress_idle(U.w1) != 0;
	} else if (!strcmp(op, "uct_flush_ready")) {
		for (long i = 0; i < n; i++) {
			watch_snap();   /* the endpoint is flushed: the put finds room */
			errors += uct_ep_put_short(U.e1, &v, 8, (uintptr_t)U.buf + 64, U.rkey.rkey) != UCS_OK;
			/* an unsignaled put (rc): this first flush asks for a completion (a signaled NOP) */
			uct_ep_flush(U.e1, 0, NULL);
			errors += watch_wait();   /* the CQE is in the CQ, not taken */
			if (bench_uct_flush_ready(U.w1, U.e1) != UCS_OK) {
				errors++;   /* not ready after all: the count is wrong, the flush finishes here */
				uct_flush();
			}
		}
	} else if (!strcmp(op, "uct_put8_batch16")) {
		if (n % 16)
			DIE("uct_put8_batch16: N must be a multiple of 16");
		for (long i = 0; i < n; i += 16) {
			v = (uint64_t)i + 1;
			watch_snap();
			errors += bench_uct_put8_batch16(U.e1, &v, (uintptr_t)U.buf + 64, U.rkey.rkey);
			errors += watch_wait();
			if (bench_uct_flush_done(U.w1, U.e1) != UCS_OK) {
				errors++;
				uct_flush();
			}
		}
		errors += U.buf[8] != (uint64_t)n - 15;
	} else {
		DIE("unknown op %s", op);
	}
	return errors;
}

/* ------------------------------------------------------------------ UCP set-up */

static struct {
	ucp_context_h ctx;
	ucp_worker_h w1, w2;
	ucp_ep_h ep;
	ucp_mem_h mem;
	ucp_rkey_h rkey;
	uint64_t *buf;
} P;

static void ucp_wait(ucs_status_ptr_t r)
{
	if (r == NULL)
		return;
	if (UCS_PTR_IS_ERR(r))
		DIE("request failed: %s", ucs_status_string(UCS_PTR_STATUS(r)));
	while (ucp_request_check_status(r) == UCS_INPROGRESS) {
		ucp_worker_progress(P.w1);
		ucp_worker_progress(P.w2);
	}
	ucp_request_free(r);
}

static void ucp_flush(void)
{
	ucp_request_param_t p = { .op_attr_mask = 0 };
	ucp_wait(ucp_ep_flush_nbx(P.ep, &p));
}

static void ucp_setup(void)
{
	ucp_params_t cp;
	ucp_worker_params_t wp;
	ucp_ep_params_t ep;
	ucp_address_t *addr;
	size_t alen, rlen;
	ucp_mem_map_params_t mp;
	void *rkey_buf;

	memset(&cp, 0, sizeof(cp));
	cp.field_mask = UCP_PARAM_FIELD_FEATURES;
	cp.features = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
	OK(ucp_init(&cp, NULL, &P.ctx));
	memset(&wp, 0, sizeof(wp));
	wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
	wp.thread_mode = UCS_THREAD_MODE_SINGLE;
	OK(ucp_worker_create(P.ctx, &wp, &P.w1));
	OK(ucp_worker_create(P.ctx, &wp, &P.w2));
	OK(ucp_worker_get_address(P.w2, &addr, &alen));
	memset(&ep, 0, sizeof(ep));
	ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
	ep.address = addr;
	OK(ucp_ep_create(P.w1, &ep, &P.ep));
	ucp_worker_release_address(P.w2, addr);
	P.buf = aligned_alloc(4096, 4096);
	memset(P.buf, 0, 4096);
	memset(&mp, 0, sizeof(mp));
	mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
	mp.address = P.buf;
	mp.length = 4096;
	OK(ucp_mem_map(P.ctx, &mp, &P.mem));
	OK(ucp_rkey_pack(P.ctx, P.mem, &rkey_buf, &rlen));
	OK(ucp_ep_rkey_unpack(P.ep, rkey_buf, &P.rkey));
	ucp_rkey_buffer_release(rkey_buf);
}

static long run_ucp(const char *op, long n)
{
	ucp_request_param_t p = { .op_attr_mask = 0 };
	uint64_t v = 42, rx[16];
	long errors = 0;

	/* wire-up happens at the first operation: do it before counting */
	ucp_wait(ucp_put_nbx(P.ep, &v, 8, (uintptr_t)P.buf + 64, P.rkey, &p));
	ucp_flush();
	if (!strcmp(op, "ucp_put8")) {
		for (long i = 0; i < n; i++) {
			ucs_status_ptr_t r;
			v = (uint64_t)i + 1;
			r = bench_ucp_put8(P.ep, &v, (uintptr_t)P.buf + 64, P.rkey, &p);
			errors += UCS_PTR_IS_ERR(r);
			ucp_wait(r);
			if ((i & 63) == 63)
				ucp_flush();
		}
		ucp_flush();
		errors += P.buf[8] != (uint64_t)n;
	} else if (!strcmp(op, "ucp_tag_send8")) {
		ucs_status_ptr_t rr[16];
		for (long i = 0; i < n; i += 16) {
			long k = n - i < 16 ? n - i : 16;
			/* the receives are posted first, so the messages are expected ones */
			for (long j = 0; j < k; j++)
				rr[j] = ucp_tag_recv_nbx(P.w2, &rx[j], 8, 0x1234, ~0ull, &p);
			for (long j = 0; j < k; j++) {
				v = (uint64_t)(i + j);
				ucs_status_ptr_t r = bench_ucp_tag_send8(P.ep, &v, &p);
				errors += UCS_PTR_IS_ERR(r);
				ucp_wait(r);
			}
			for (long j = 0; j < k; j++)
				ucp_wait(rr[j]);
		}
	} else if (!strcmp(op, "ucp_progress_idle")) {
		for (long i = 0; i < n; i++)
			bench_ucp_progress_idle(P.w1);
	} else {
		DIE("unknown op %s", op);
	}
	return errors;
}

int main(int argc, char **argv)
{
	long n, errors;

	if (argc != 3 && argc != 4)
		DIE("usage: icount_ucx <op> <N> [rc_mlx5|dc_mlx5]");
	n = atol(argv[2]);
	U.tl = argc == 4 ? argv[3] : "rc_mlx5";
	if (!strncmp(argv[1], "uct_", 4)) {
		uct_setup();
		errors = run_uct(argv[1], n);
	} else {
		/* the transport for the data, ud_mlx5 for UCP's wire-up; no shared memory, no loopback */
		char tls[64];
		snprintf(tls, sizeof(tls), "%s,ud_mlx5", U.tl);
		setenv("UCX_TLS", tls, 0);
		ucp_setup();
		errors = run_ucp(argv[1], n);
	}
	if (errors)
		fprintf(stderr, "icount_ucx: %s: %ld errors\n", argv[1], errors);
	printf("icount_ucx %s %ld done\n", argv[1], n);
	fflush(stdout);
	_exit(errors ? 1 : 0);   /* skip UCX's teardown: it is not measured */
}
