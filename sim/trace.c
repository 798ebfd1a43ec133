/* rvxsim: environment settings, fault lines and the trace stream. */
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <string.h>
#include <errno.h>
#include <time.h>
#include <unistd.h>

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
	sim_env.delay_us = env_long("RVXSIM_DELAY_US", 0);
	sim_env.reg_cost_ns_per_page = env_long("RVXSIM_REG_COST_NS_PER_PAGE", 0);
	sim_env.force_rnr = env_long("RVXSIM_FORCE_RNR", 0);
	sim_env.retry_timeout_ms = env_long("RVXSIM_RETRY_TIMEOUT_MS", 2000);
	sim_env.db_grace_ms = env_long("RVXSIM_DB_GRACE_MS", 1000);
	sim_env.spin_us = env_long("RVXSIM_SPIN_US", 20);
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
