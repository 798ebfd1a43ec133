/* rvxsim: RVXSIM_COUNT_MMIO=1, every MMIO write the application makes to tell the adapter about
 * new WQEs counted exactly: send doorbell-record writes, 8-byte doorbells, BlueFlame copies.
 *
 * Why trap each store: the registers are ordinary memory, so the engine sees only their latest
 * contents (two quick posts overwrite each other), and a batching API is judged on exact counts.
 * In this mode each QP's UAR page and doorbell-record page come from an arena of write-protected
 * pages. A store faults (SIGSEGV); the handler counts it by its offset, makes the page writable
 * and sets the trap flag, so the store runs and the CPU stops right after it (SIGTRAP), where the
 * page is protected again. Both handlers touch only atomics and mprotect. A fault anywhere else
 * goes to the handler installed before ours, or to the default action: no real crash is hidden.
 * 40 us to a few hundred per store (two signals, two mprotect): a separate run for counting,
 * never for timing; valgrind cannot single-step, so it cannot run this mode. x86-64 Linux only.
 * Nothing here runs when the mode is off: QPs get ordinary memory and no handler is installed.
 *
 * The rule, per QP (offsets in its UAR page; the bfreg at +0x800, two halves of SIM_BF_SIZE):
 *  - a store at offset 4 of the doorbell-record page (dbrec[MLX5_SND_DBR]): sq_dbrec_writes;
 *  - a store at the first byte of a half opens a write to that half;
 *  - a store at byte 8 or later of the half last opened, before the next store at a half's first
 *    byte, makes that write a BlueFlame copy (bf_copies, once per copy, however many stores);
 *  - an opened write that no such store follows is an 8-byte doorbell (doorbells).
 * So a copy is told from a doorbell by what follows it, not by the store's width: a copy of one
 * WQEBB written by a single 64-byte instruction would count as a doorbell (rdma-core, UCX and rvx
 * write 8 or 16 bytes per store). Stores at bytes 1-7 of a half (a doorbell written in two 32-bit
 * halves) and to dbrec[MLX5_RCV_DBR] are let through uncounted. The model's own writes (RESET
 * clears both pages) open the pages first and are not counted. One thread writes a QP's pages at
 * a time, as libmlx5 requires: a store by a second thread while the page is open for the first is
 * not seen. */
#include "internal.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define SLOT_BYTES 8192u          /* the UAR page, then the doorbell-record page */
#define MAX_SLOTS  16384u         /* QPs counted at once: 128 MiB of address space, reserved */
#define UAR_BF     0x800u

static _Atomic uint64_t n_dbrec, n_open, n_bf;

#if defined(__x86_64__) && defined(__linux__)
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#define EFLAGS_TF 0x100

static uint8_t *_Atomic arena;
static _Atomic uint8_t live[MAX_SLOTS];
static _Atomic int8_t open_half[MAX_SLOTS];   /* the half whose write is open, or -1 */
static _Atomic uint32_t stores[MAX_SLOTS];     /* every store to the slot, for the engine */
static uint32_t free_slots[MAX_SLOTS], n_free, high;   /* under lock */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction old_segv, old_trap;
/* The pages each thread opened for the store being stepped (two if one store spans both), by
 * thread id, held from the fault to the trap. A table, not thread-local storage: a library that
 * is loaded by dlopen (as UCX loads this one) may find no room left in the static TLS block, and
 * dynamic TLS may be allocated on first use, which a signal handler must not do. */
#define STEP_THREADS 64u
static struct step {
	_Atomic pid_t tid;
	uint8_t *page[2];
} steps[STEP_THREADS];

/* This thread's entry; with claim, a free one taken if it has none. NULL: none (or all taken). */
static struct step *step_of(int claim)
{
	pid_t me = (pid_t)syscall(SYS_gettid);
	for (unsigned i = 0; i < STEP_THREADS; i++)
		if (atomic_load_explicit(&steps[i].tid, memory_order_relaxed) == me)
			return &steps[i];
	for (unsigned i = 0; claim && i < STEP_THREADS; i++) {
		pid_t none = 0;
		if (atomic_compare_exchange_strong(&steps[i].tid, &none, me))
			return &steps[i];
	}
	return NULL;
}

/* Not ours: what would have happened without the model. A fault returns to the store, which
 * faults again under the default action; a sent signal is sent again. */
static void chain(const struct sigaction *old, int sig, siginfo_t *si, void *uc)
{
	if (old->sa_flags & SA_SIGINFO) {
		old->sa_sigaction(sig, si, uc);
	} else if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
		old->sa_handler(sig);
	} else if (!(sig == SIGTRAP && old->sa_handler == SIG_IGN)) {
		signal(sig, SIG_DFL);
		if (sig == SIGTRAP || si->si_code <= 0)
			raise(sig);
	}
}

static void count(uint32_t slot, uint32_t off)
{
	atomic_fetch_add_explicit(&stores[slot], 1, memory_order_relaxed);
	if (off >= 4096) {
		if (off - 4096 == MLX5_SND_DBR * 4)
			atomic_fetch_add_explicit(&n_dbrec, 1, memory_order_relaxed);
		return;
	}
	if (off < UAR_BF || off >= UAR_BF + 2 * SIM_BF_SIZE)
		return;
	int8_t h = (int8_t)((off - UAR_BF) / SIM_BF_SIZE);
	uint32_t o = (off - UAR_BF) % SIM_BF_SIZE;
	if (o == 0) {
		atomic_fetch_add_explicit(&n_open, 1, memory_order_relaxed);
		atomic_store_explicit(&open_half[slot], h, memory_order_relaxed);
	} else if (o >= 8 && atomic_load_explicit(&open_half[slot], memory_order_relaxed) == h) {
		atomic_fetch_add_explicit(&n_bf, 1, memory_order_relaxed);
		atomic_store_explicit(&open_half[slot], -1, memory_order_relaxed);
	}
}

static void on_segv(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	uint8_t *base = atomic_load_explicit(&arena, memory_order_relaxed);
	uintptr_t a = (uintptr_t)si->si_addr, b = (uintptr_t)base;
	uint32_t slot, off;
	int saved = errno;

	if (!base || si->si_code != SEGV_ACCERR || a < b || a >= b + (size_t)MAX_SLOTS * SLOT_BYTES)
		goto not_ours;
	slot = (uint32_t)((a - b) / SLOT_BYTES);
	off = (uint32_t)((a - b) % SLOT_BYTES);
	if (!atomic_load_explicit(&live[slot], memory_order_acquire))
		goto not_ours;
	struct step *st = step_of(1);
	if (!st || st->page[1])
		goto not_ours;
	uint8_t *page = base + (size_t)slot * SLOT_BYTES + (off & ~4095u);
	if (mprotect(page, 4096, PROT_READ | PROT_WRITE)) {
		if (!st->page[0])
			atomic_store(&st->tid, 0);
		goto not_ours;
	}
	count(slot, off);
	st->page[st->page[0] ? 1 : 0] = page;
	uc->uc_mcontext.gregs[REG_EFL] |= EFLAGS_TF;
	errno = saved;
	return;
not_ours:
	errno = saved;
	chain(&old_segv, sig, si, ucv);
}

static void on_trap(int sig, siginfo_t *si, void *ucv)
{
	ucontext_t *uc = ucv;
	int saved = errno;

	struct step *st = step_of(0);
	if (!st || !st->page[0]) {
		chain(&old_trap, sig, si, ucv);
		return;
	}
	for (int i = 0; i < 2 && st->page[i]; i++) {
		mprotect(st->page[i], 4096, PROT_READ);
		st->page[i] = NULL;
	}
	atomic_store(&st->tid, 0);
	uc->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)EFLAGS_TF;
	errno = saved;
}

/* The arena and the two handlers, at the first counted QP (so that a handler a library installs
 * at load time is already there to be chained to). Under lock. */
static int arena_init(void)
{
	struct sigaction sa;
	void *p;

	if (arena)
		return 0;
	p = mmap(NULL, (size_t)MAX_SLOTS * SLOT_BYTES, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return ENOMEM;
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
	sa.sa_sigaction = on_segv;
	sigaction(SIGSEGV, &sa, &old_segv);
	sa.sa_sigaction = on_trap;
	sigaction(SIGTRAP, &sa, &old_trap);
	atomic_store(&arena, (uint8_t *)p);
	return 0;
}

bool sim_mmio_available(void)
{
	return true;
}

/* qp->uar and qp->dbrec from a zeroed, write-protected slot of the arena. */
int sim_mmio_alloc(struct sim_qp *qp)
{
	uint32_t slot;
	uint8_t *p;
	int err;

	pthread_mutex_lock(&lock);
	err = arena_init();
	if (!err && !n_free && high == MAX_SLOTS) {
		sim_log("rvxsim: RVXSIM_COUNT_MMIO: more than %u QPs at once are not counted", MAX_SLOTS);
		err = ENOMEM;
	}
	if (err) {
		pthread_mutex_unlock(&lock);
		return err;
	}
	slot = n_free ? free_slots[--n_free] : high++;
	pthread_mutex_unlock(&lock);
	p = arena + (size_t)slot * SLOT_BYTES;
	/* a slot given back was emptied (MADV_DONTNEED), so it reads as zeros */
	if (mprotect(p, SLOT_BYTES, PROT_READ))
		return errno;
	atomic_store(&open_half[slot], -1);
	atomic_store_explicit(&live[slot], 1, memory_order_release);
	qp->uar = p;
	qp->bf = p + UAR_BF;
	qp->dbrec = (__be32 *)(void *)(p + 4096);
	return 0;
}

bool sim_mmio_owns(const void *p)
{
	uintptr_t a = (uintptr_t)p, b = (uintptr_t)atomic_load(&arena);
	return b && a >= b && a < b + (size_t)MAX_SLOTS * SLOT_BYTES;
}

/* The slot back: unmapped in effect (a store through a stale pointer is a crash), emptied. */
void sim_mmio_free(struct sim_qp *qp)
{
	uint32_t slot = (uint32_t)(((uintptr_t)qp->uar - (uintptr_t)arena) / SLOT_BYTES);

	atomic_store(&live[slot], 0);
	mprotect(qp->uar, SLOT_BYTES, PROT_NONE);
	madvise(qp->uar, SLOT_BYTES, MADV_DONTNEED);
	pthread_mutex_lock(&lock);
	free_slots[n_free++] = slot;
	pthread_mutex_unlock(&lock);
}

uint32_t sim_mmio_stores(const struct sim_qp *qp)
{
	if (!sim_mmio_owns(qp->uar))
		return 0;
	return atomic_load_explicit(&stores[((uintptr_t)qp->uar - (uintptr_t)arena) / SLOT_BYTES],
				    memory_order_relaxed);
}

/* The model's own writes to the pages (RESET clears them): open around them, not counted. */
void sim_mmio_model_writes(struct sim_qp *qp, bool open)
{
	mprotect(qp->uar, SLOT_BYTES, open ? PROT_READ | PROT_WRITE : PROT_READ);
}

#else /* not x86-64 Linux: the mode is refused, QPs get ordinary memory */

bool sim_mmio_available(void)
{
	return false;
}

int sim_mmio_alloc(struct sim_qp *qp)
{
	static atomic_bool said;

	(void)qp;
	if (!atomic_exchange(&said, true))
		sim_log("rvxsim: RVXSIM_COUNT_MMIO: not available here (x86-64 Linux only); "
			"MMIO writes are not counted");
	return EOPNOTSUPP;
}

bool sim_mmio_owns(const void *p)
{
	(void)p;
	return false;
}

void sim_mmio_free(struct sim_qp *qp)
{
	(void)qp;
}

void sim_mmio_model_writes(struct sim_qp *qp, bool open)
{
	(void)qp;
	(void)open;
}

uint32_t sim_mmio_stores(const struct sim_qp *qp)
{
	(void)qp;
	return 0;
}
#endif

/* Counting is on and works here. */
static bool counting(void)
{
	sim_env_init();
	return sim_env.count_mmio && sim_mmio_available();
}

/* out[0] send doorbell-record writes, out[1] 8-byte doorbells, out[2] BlueFlame copies, all of
 * this process so far; -1 (out untouched) when RVXSIM_COUNT_MMIO=1 is not set or cannot work. */
SIM_EXPORT int rvxsim_mmio_counts(uint64_t out[3])
{
	uint64_t opened, bf;

	if (!counting())
		return -1;
	bf = atomic_load(&n_bf);
	opened = atomic_load(&n_open);
	out[0] = atomic_load(&n_dbrec);
	out[1] = opened - bf;
	out[2] = bf;
	return 0;
}

/* The keys rvxsim_counters() appends in counting mode (nothing otherwise). */
int sim_mmio_counters(char *buf, size_t len)
{
	uint64_t c[3];

	if (rvxsim_mmio_counts(c))
		return 0;
	return snprintf(buf, len, " sq_dbrec_writes=%llu doorbells=%llu bf_copies=%llu",
			(unsigned long long)c[0], (unsigned long long)c[1], (unsigned long long)c[2]);
}
