/* rvxsim: environment settings, fault lines and the trace stream. */
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <strings.h>

struct sim_env sim_env;
static FILE *trace_fp;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t env_once = PTHREAD_ONCE_INIT;

static long env_long(const char *name, long def)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return def;
	return strtol(s, NULL, 0);
}

/* RVXSIM_PORT_SPEED: comma-separated items [mlx5_N:][WIDTHx]SPEED, e.g. "mlx5_0:HDR,mlx5_1:1xEDR";
 * an item without a device applies to every device. Codes as rdma-core's ibv_port_attr carries
 * them: active_speed 1 SDR, 2 DDR, 4 QDR, 8 FDR10, 16 FDR, 32 EDR, 64 HDR, 128 NDR;
 * active_width 1 (1x), 2 (4x), 4 (8x), 8 (12x), 16 (2x). Default 4x HDR. */
static const struct { const char *name; uint8_t code; } speed_names[] = {
	{ "SDR", 1 }, { "DDR", 2 }, { "QDR", 4 }, { "FDR10", 8 }, { "FDR", 16 },
	{ "EDR", 32 }, { "HDR", 64 }, { "NDR", 128 },
};
static const struct { const char *name; uint8_t code; } width_names[] = {
	{ "1x", 1 }, { "4x", 2 }, { "8x", 4 }, { "12x", 8 }, { "2x", 16 },
};

static int port_item(const char *it, size_t len)
{
	char buf[64], *v = buf, *colon;
	int dev = -1;
	uint8_t speed = 0, width = 2;

	if (len >= sizeof(buf))
		return -1;
	memcpy(buf, it, len);
	buf[len] = 0;
	colon = strchr(buf, ':');
	if (colon) {
		char *end;
		*colon = 0;
		if (strncmp(buf, "mlx5_", 5))
			return -1;
		dev = (int)strtol(buf + 5, &end, 10);
		if (*end || end == buf + 5 || dev < 0 || dev >= SIM_MAX_DEVICES)
			return -1;
		v = colon + 1;
	}
	for (size_t i = 0; i < sizeof(width_names) / sizeof(width_names[0]); i++) {
		size_t l = strlen(width_names[i].name);
		if (!strncasecmp(v, width_names[i].name, l)) {
			width = width_names[i].code;
			v += l;
			break;
		}
	}
	for (size_t i = 0; i < sizeof(speed_names) / sizeof(speed_names[0]); i++)
		if (!strcasecmp(v, speed_names[i].name))
			speed = speed_names[i].code;
	if (!speed)
		return -1;
	for (int d = 0; d < SIM_MAX_DEVICES; d++) {
		if (dev >= 0 && d != dev)
			continue;
		sim_env.port_speed[d] = speed;
		sim_env.port_width[d] = width;
	}
	return 0;
}

static void port_speed_load(void)
{
	const char *s = getenv("RVXSIM_PORT_SPEED");

	for (int d = 0; d < SIM_MAX_DEVICES; d++) {
		sim_env.port_speed[d] = 64; /* HDR */
		sim_env.port_width[d] = 2;  /* 4x */
	}
	while (s && *s) {
		const char *comma = strchr(s, ',');
		size_t len = comma ? (size_t)(comma - s) : strlen(s);
		if (len && port_item(s, len))
			sim_log("rvxsim: RVXSIM_PORT_SPEED: cannot read '%.*s' (want [mlx5_N:][1x|2x|4x|8x|12x]"
				"SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR); ignored", (int)len, s);
		s = comma ? comma + 1 : NULL;
	}
}

/* ---- RVXSIM_STATS_FILE: RDMA bytes per device (and the MMIO counts, when counted) ---- */
static _Atomic uint64_t stat_bytes[SIM_MAX_DEVICES][2];
static _Atomic int stat_used[SIM_MAX_DEVICES];
static char stats_path[320];

void sim_stats_rdma(int dev, bool read, uint64_t bytes)
{
	if (dev < 0 || dev >= SIM_MAX_DEVICES)
		return;
	atomic_fetch_add_explicit(&stat_bytes[dev][read], bytes, memory_order_relaxed);
	atomic_store_explicit(&stat_used[dev], 1, memory_order_relaxed);
}

/* One line per device that moved RDMA data, appended with one write per line. */
static void stats_write(void)
{
	int fd = open(stats_path, O_WRONLY | O_CREAT | O_APPEND, 0600);

	if (fd < 0) {
		fprintf(stderr, "rvxsim: cannot open RVXSIM_STATS_FILE %s: %s\n", stats_path, strerror(errno));
		return;
	}
	for (int d = 0; d < SIM_MAX_DEVICES; d++) {
		char line[160];
		int n;
		if (!atomic_load(&stat_used[d]))
			continue;
		n = snprintf(line, sizeof(line), "rvxsim-stats pid=%d dev=mlx5_%d rdma_write_bytes=%llu "
			     "rdma_read_bytes=%llu\n", (int)getpid(), d,
			     (unsigned long long)atomic_load(&stat_bytes[d][0]),
			     (unsigned long long)atomic_load(&stat_bytes[d][1]));
		if (n > 0 && write(fd, line, (size_t)n) != n)
			break;
	}
	/* RVXSIM_COUNT_MMIO: the process's doorbell writes, for a tool that cannot call into it */
	char keys[160], line[200];
	if (sim_mmio_counters(keys, sizeof(keys)) > 0) {
		int n = snprintf(line, sizeof(line), "rvxsim-mmio pid=%d%s\n", (int)getpid(), keys);
		if (n > 0 && write(fd, line, (size_t)n) != n) {
			/* nothing better to do at exit */
		}
	}
	close(fd);
}

/* ---- rvxsim_counters: control verbs and live objects of this process ---- */
static _Atomic uint64_t cnt_verbs;
static _Atomic int64_t cnt_obj[SIM_OBJ_N], cnt_peak[SIM_OBJ_N];
static _Atomic uint64_t cnt_wqes, cnt_wqe_bytes;

void sim_count_verb(void)
{
	atomic_fetch_add_explicit(&cnt_verbs, 1, memory_order_relaxed);
}

void sim_count_wqe(uint64_t bytes)
{
	atomic_fetch_add_explicit(&cnt_wqes, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&cnt_wqe_bytes, bytes, memory_order_relaxed);
}

void sim_count_obj(enum sim_obj what, int64_t delta)
{
	int64_t v = atomic_fetch_add(&cnt_obj[what], delta) + delta;
	int64_t p = atomic_load(&cnt_peak[what]);

	while (v > p && !atomic_compare_exchange_weak(&cnt_peak[what], &p, v))
		;
}

/* One line of name=value pairs (names stay; new ones may be added at the end), for tools that
 * measure what a program costs the adapter. Returns what snprintf returns. */
SIM_EXPORT int rvxsim_counters(char *buf, size_t len)
{
	static const char *const names[SIM_OBJ_N] = { "qps", "mr_bytes", "cqes", "srq_wqes",
							 "model_bytes" };
	size_t off = 0;
	int n = snprintf(buf, len, "verbs=%llu", (unsigned long long)atomic_load(&cnt_verbs));

	for (int i = 0; i < SIM_OBJ_N && n >= 0; i++) {
		off += (size_t)n;
		n = snprintf(buf + MIN(off, len), len - MIN(off, len), " %s=%lld %s_peak=%lld",
			     names[i], (long long)atomic_load(&cnt_obj[i]), names[i],
			     (long long)atomic_load(&cnt_peak[i]));
	}
	if (n >= 0) {
		off += (size_t)n;
		n = snprintf(buf + MIN(off, len), len - MIN(off, len), " wqes=%llu wqe_bytes=%llu",
			     (unsigned long long)atomic_load(&cnt_wqes),
			     (unsigned long long)atomic_load(&cnt_wqe_bytes));
	}
	if (n >= 0) {
		off += (size_t)n;
		n = sim_mmio_counters(buf + MIN(off, len), len - MIN(off, len));
	}
	if (n >= 0) {
		struct sim_resident r;
		int64_t model;

		/* the model's heap less the queues and less its arrays' pages never touched */
		sim_resident(&r);
		model = atomic_load(&cnt_obj[SIM_OBJ_MODEL_BYTES]) - (int64_t)r.queue_bytes -
			(int64_t)r.model_idle;

		off += (size_t)n;
		n = snprintf(buf + MIN(off, len), len - MIN(off, len),
			     " queue_bytes=%llu queue_rss=%llu mr_rss=%llu model_rss=%lld engine_cpu_ns=%llu",
			     (unsigned long long)r.queue_bytes, (unsigned long long)r.queue_rss,
			     (unsigned long long)r.mr_rss, (long long)MAX(model, 0),
			     (unsigned long long)sim_engine_cpu_ns());
	}
	return n < 0 ? n : (int)(off + (size_t)n);
}

static void env_load(void)
{
	const char *s;

	sim_env.trace = env_long("RVXSIM_TRACE", 0) != 0;
	sim_env.num_devices = (int)env_long("RVXSIM_NUM_DEVICES", 1);
	if (sim_env.num_devices < 1)
		sim_env.num_devices = 1;
	if (sim_env.num_devices > SIM_MAX_DEVICES)
		sim_env.num_devices = SIM_MAX_DEVICES;
	s = getenv("RVXSIM_LINK");
	sim_env.link_eth = s && (!strcmp(s, "eth") || !strcmp(s, "roce") || !strcmp(s, "ethernet"));
	sim_env.kill_peer_after = env_long("RVXSIM_KILL_PEER_AFTER", -1);
	sim_env.die_mid_push = env_long("RVXSIM_DIE_MID_PUSH", 0);
	sim_env.delay_us = env_long("RVXSIM_DELAY_US", 0);
	sim_env.reg_cost_ns_per_page = env_long("RVXSIM_REG_COST_NS_PER_PAGE", 0);
	sim_env.force_rnr = env_long("RVXSIM_FORCE_RNR", 0);
	sim_env.drop_read_resp = env_long("RVXSIM_DROP_READ_RESP", 0);
	sim_env.drop_ack = env_long("RVXSIM_DROP_ACK", 0);
	sim_env.retry_timeout_ms = env_long("RVXSIM_RETRY_TIMEOUT_MS", 2000);
	sim_env.db_grace_ms = env_long("RVXSIM_DB_GRACE_MS", 1000);
	sim_env.spin_us = env_long("RVXSIM_SPIN_US", 20);
	sim_env.strict = env_long("RVXSIM_STRICT", 0) != 0;
	sim_env.count_mmio = env_long("RVXSIM_COUNT_MMIO", 0) != 0;
	/* counted stores are slow and the writer may stop between two: ten times the grace */
	if (sim_env.count_mmio && !getenv("RVXSIM_DB_GRACE_MS"))
		sim_env.db_grace_ms *= 10;
	s = getenv("RVXSIM_STATS_FILE");
	if (s && *s) {
		snprintf(stats_path, sizeof(stats_path), "%s", s);
		atexit(stats_write);
	}
	s = getenv("RVXSIM_FABRIC_DIR");
	if (s && *s)
		snprintf(sim_env.fabric_dir, sizeof(sim_env.fabric_dir), "%s", s);
	else
		snprintf(sim_env.fabric_dir, sizeof(sim_env.fabric_dir), "/dev/shm/rvxsim-%u",
			 (unsigned)getuid());
	trace_fp = stderr;
	s = getenv("RVXSIM_TRACE_FILE");
	if (s && *s) {
		FILE *f = fopen(s, "a");
		if (f) {
			setvbuf(f, NULL, _IOLBF, 0);
			trace_fp = f;
			sim_env.trace = 1;
		} else {
			fprintf(stderr, "rvxsim: cannot open RVXSIM_TRACE_FILE %s: %s\n", s, strerror(errno));
		}
	}
	port_speed_load();
	s = getenv("RVXSIM_RDMA_DENY");
	while (s && *s) {
		int d = -1, n = 0;
		if (sscanf(s, "mlx5_%d%n", &d, &n) == 1 && d >= 0 && d < SIM_MAX_DEVICES &&
		    (s[n] == ',' || !s[n]))
			sim_env.rdma_deny[d] = true;
		else
			sim_log("rvxsim: RVXSIM_RDMA_DENY: cannot read '%s' (want mlx5_N[,mlx5_M])", s);
		s = strchr(s, ',');
		if (s)
			s++;
	}
}

void sim_env_init(void)
{
	pthread_once(&env_once, env_load);
}

/* One line per fault, written with a single write so lines from threads do not interleave. */
void sim_log(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	if (write(STDERR_FILENO, buf, n) < 0) {
		/* nothing sensible to do */
	}
	if (sim_env.trace && trace_fp != stderr) {
		pthread_mutex_lock(&log_lock);
		fwrite(buf, 1, n, trace_fp);
		pthread_mutex_unlock(&log_lock);
	}
}

void sim_trace(const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&log_lock);
	/* the pid tells processes apart when several trace into one file */
	fprintf(trace_fp, "rvxsim-trace %d: ", (int)getpid());
	va_start(ap, fmt);
	vfprintf(trace_fp, fmt, ap);
	va_end(ap);
	fputc('\n', trace_fp);
	pthread_mutex_unlock(&log_lock);
}

void sim_unsupported(const char *verb)
{
	sim_log("rvxsim: %s: not supported by the model", verb);
	errno = EOPNOTSUPP;
}

bool sim_reserved_ignored(const char *what)
{
	static atomic_bool warned;

	if (sim_env.strict)
		return false;
	if (!atomic_exchange(&warned, true))
		sim_log("rvxsim: stale bytes in %s ignored, as the hardware does (RVXSIM_STRICT=1 makes "
			"stale reserved bytes a fault); further ones are not reported", what);
	return true;
}

SIM_PRIV void rvxsim_priv_unsupported(const char *verb)
{
	sim_unsupported(verb);
}

uint64_t sim_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}
