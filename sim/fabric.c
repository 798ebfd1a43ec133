/* rvxsim: the fabric between engines.
 *
 * Each opened device owns an inbox: a shared-memory file "lid-XXXX" in the fabric directory
 * (mode 0600). Its name is the device's LID, so creating the file with O_EXCL is also how LIDs are
 * allocated machine-wide; a file whose owner has died is reclaimed. An inbox holds two rings of
 * fixed-size packet slots: requests and responses. Responses never wait for anything, so an engine
 * can always drain its response ring, which keeps two engines that answer each other free of
 * deadlock. The rings are bounded multi-producer queues with a per-slot state word; the consumer
 * is the owning engine alone. A futex word lets a producer wake a sleeping engine.
 *
 * Producers are other processes, and a process can die anywhere, also halfway through a push. A
 * real fabric does not let a dead sender block a receiver, so neither may the ring: a producer
 * claims its slot by writing its pid and the slot's lap into the state word, then moves the tail
 * (any producer that finds a claimed slot at the tail moves it on too), copies, and publishes. A
 * slot that stays claimed is looked at after a moment: if its claimant is gone the consumer
 * skips it. */
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/file.h>
#include <dirent.h>
#include <sys/syscall.h>
#include <linux/futex.h>

#define INBOX_MAGIC  0x7276787369620005ull   /* "rvxsib" + layout version */
#define RING_SLOTS   128
#define SLOT_SIZE    ALIGN_UP(PKT_HDR + SIM_MTU, 64)

/* A slot's state word, for the slot's position pos (its lap is pos / RING_SLOTS):
 *   pos            free: a producer may claim it
 *   CLAIM(pos,pid) claimed by process pid, being filled
 *   pos + 1        published: the consumer may take it
 * and the consumer frees it for the next lap by storing pos + RING_SLOTS. */
#define CLAIM_BIT      (1ull << 63)
#define CLAIM_POS_MASK ((1ull << 41) - 1)
#define CLAIM_PID_MASK ((1ull << 22) - 1)     /* Linux pid_max is at most 2^22 */
#define CLAIM(pos, pid) (CLAIM_BIT | ((uint64_t)(pos) & CLAIM_POS_MASK) << 22 | \
			 ((uint64_t)(pid) & CLAIM_PID_MASK))
#define CLAIM_OF(s, pos) (((s) & CLAIM_BIT) && ((s) >> 22 & CLAIM_POS_MASK) == ((pos) & CLAIM_POS_MASK))
#define STALL_NS       20000000ull           /* a claim older than this: is its owner alive? */

/* State words live apart from the payload slots, so that creating an inbox touches only a few
 * pages: the file is sparse, and payload pages are allocated only as traffic uses them. */
struct ring {
	_Alignas(64) _Atomic uint64_t tail;   /* producers */
	_Alignas(64) uint64_t head;           /* the owning engine */
	uint64_t stall_head;                  /* the owning engine: a claimed slot it waits for */
	uint64_t stall_since;                 /*   and since when (ns) */
	_Alignas(64) _Atomic uint64_t seq[RING_SLOTS];
	_Alignas(64) uint8_t data[RING_SLOTS][SLOT_SIZE];
};

struct fabric_inbox {
	_Atomic uint64_t magic;
	int32_t pid;
	uint32_t lid;
	_Alignas(64) _Atomic uint32_t sleeping;   /* futex: 1 while the engine sleeps */
	_Alignas(64) struct ring ring[2];         /* [0] requests, [1] responses */
};

struct remote_cache {
	uint16_t lid;
	struct fabric_inbox *ib;
	struct remote_cache *next;
};

static long futex(_Atomic uint32_t *addr, int op, uint32_t val, const struct timespec *ts)
{
	return syscall(SYS_futex, (uint32_t *)addr, op, val, ts, NULL, 0);
}

static void inbox_path(char *buf, size_t n, uint16_t lid)
{
	snprintf(buf, n, "%s/lid-%04x", sim_env.fabric_dir, lid);
}

static struct fabric_inbox *map_inbox(int fd)
{
	void *p = mmap(NULL, sizeof(struct fabric_inbox), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

/* An inbox whose owner is gone can be removed. Owners hold a shared flock on their inbox for
 * their whole life (the kernel drops it when a process dies, however it dies), so a file that
 * takes an exclusive lock has no owner; the magic/pid and age tests cover the moment between a
 * file's creation and its owner's lock. While we hold the exclusive lock nobody else can judge
 * the same file stale, and the inode check makes sure we unlink that file and not a new one. */
static void remove_if_stale(const char *path)
{
	struct stat st, st2;
	bool stale = false;
	int fd = open(path, O_RDWR | O_CLOEXEC);

	if (fd < 0)
		return;
	if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0) {
		if ((size_t)st.st_size == sizeof(struct fabric_inbox)) {
			struct fabric_inbox *ib = map_inbox(fd);
			if (ib) {
				stale = atomic_load(&ib->magic) == INBOX_MAGIC && ib->pid > 0 &&
					kill(ib->pid, 0) < 0 && errno == ESRCH;
				munmap(ib, sizeof(*ib));
			}
		}
		if (!stale && time(NULL) - st.st_mtime > 10)
			stale = true;
		if (stale && stat(path, &st2) == 0 && st2.st_ino == st.st_ino && st2.st_dev == st.st_dev)
			unlink(path);
	}
	close(fd);
}

static void sweep_stale(void)
{
	DIR *d = opendir(sim_env.fabric_dir);
	struct dirent *e;
	char path[sizeof(sim_env.fabric_dir) + 300];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "lid-", 4))
			continue;
		snprintf(path, sizeof(path), "%s/%s", sim_env.fabric_dir, e->d_name);
		remove_if_stale(path);
	}
	closedir(d);
}

int fabric_open(struct sim_ctx *sc)
{
	char path[320];
	uint32_t start, i;

	if (mkdir(sim_env.fabric_dir, 0700) < 0 && errno != EEXIST) {
		sim_log("rvxsim: cannot create fabric directory %s: %s", sim_env.fabric_dir,
			strerror(errno));
		return -1;
	}
	sweep_stale();
	start = ((uint32_t)getpid() * 2654435761u + sc->index * 977u) % 0xBFFE;
	for (i = 0; i < 0xBFFE; i++) {
		uint16_t lid = (uint16_t)((start + i) % 0xBFFE + 1);
		int fd;

		inbox_path(path, sizeof(path), lid);
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 && errno == EEXIST) {
			remove_if_stale(path);
			fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		}
		if (fd < 0) {
			if (errno == EEXIST)
				continue;
			sim_log("rvxsim: cannot create inbox %s: %s", path, strerror(errno));
			return -1;
		}
		if (flock(fd, LOCK_SH) < 0 || ftruncate(fd, sizeof(struct fabric_inbox)) < 0) {
			close(fd);
			unlink(path);
			return -1;
		}
		sc->inbox = map_inbox(fd);
		if (!sc->inbox) {
			close(fd);
			unlink(path);
			return -1;
		}
		sc->inbox_fd = fd;   /* kept open: it holds the owner's lock */
		for (int r = 0; r < 2; r++)
			for (uint64_t s = 0; s < RING_SLOTS; s++)
				atomic_store_explicit(&sc->inbox->ring[r].seq[s], s,
						      memory_order_relaxed);
		sc->inbox->pid = getpid();
		sc->inbox->lid = lid;
		atomic_store(&sc->inbox->magic, INBOX_MAGIC);
		sc->lid = lid;
		snprintf(sc->inbox_path, sizeof(sc->inbox_path), "%s", path);
		return 0;
	}
	sim_log("rvxsim: no free LID in %s", sim_env.fabric_dir);
	return -1;
}

void fabric_close(struct sim_ctx *sc)
{
	struct remote_cache *r = sc->remotes, *n;

	for (; r; r = n) {
		n = r->next;
		if (r->ib && r->ib != sc->inbox)
			munmap(r->ib, sizeof(*r->ib));
		sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)sizeof(*r));
		free(r);
	}
	sc->remotes = NULL;
	if (sc->inbox) {
		unlink(sc->inbox_path);
		munmap(sc->inbox, sizeof(*sc->inbox));
		close(sc->inbox_fd);
		sc->inbox = NULL;
	}
}

static struct fabric_inbox *remote(struct sim_ctx *sc, uint16_t lid)
{
	struct remote_cache *r;
	char path[320];
	struct stat st;
	int fd;

	if (lid == sc->lid)
		return sc->inbox;
	for (r = sc->remotes; r; r = r->next)
		if (r->lid == lid)
			return r->ib;
	inbox_path(path, sizeof(path), lid);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) < 0 || (size_t)st.st_size != sizeof(struct fabric_inbox)) {
		close(fd);
		return NULL;
	}
	struct fabric_inbox *ib = map_inbox(fd);
	close(fd);
	if (!ib)
		return NULL;
	if (atomic_load(&ib->magic) != INBOX_MAGIC) {
		munmap(ib, sizeof(*ib));
		return NULL;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		munmap(ib, sizeof(*ib));
		return NULL;
	}
	sim_count_obj(SIM_OBJ_MODEL_BYTES, sizeof(*r));
	r->lid = lid;
	r->ib = ib;
	r->next = sc->remotes;
	sc->remotes = r;
	return ib;
}

/* Drop a cached mapping, e.g. when a QP is connected again: the LID may have a new owner. */
void fabric_forget_peer(struct sim_ctx *sc, uint16_t lid)
{
	struct remote_cache **pp = &sc->remotes, *r;

	while ((r = *pp)) {
		if (r->lid == lid) {
			*pp = r->next;
			munmap(r->ib, sizeof(*r->ib));
			sim_count_obj(SIM_OBJ_MODEL_BYTES, -(int64_t)sizeof(*r));
			free(r);
			return;
		}
		pp = &r->next;
	}
}

bool fabric_peer_alive(struct sim_ctx *sc, uint16_t lid)
{
	struct fabric_inbox *ib = remote(sc, lid);
	if (!ib)
		return false;
	return !(kill(ib->pid, 0) < 0 && errno == ESRCH);
}

/* A peer stopped by a signal or a debugger is not dead: its engine runs again when it resumes. */
bool fabric_peer_stopped(struct sim_ctx *sc, uint16_t lid)
{
	struct fabric_inbox *ib = remote(sc, lid);
	char path[64], buf[512], *p;
	ssize_t n;
	int fd;

	if (!ib)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", ib->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = 0;
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

/* Move the tail past pos if the slot there is already claimed or published (its producer may
 * have died before moving the tail itself). Returns false if the slot at pos is not taken. */
static bool ring_help(struct ring *r, uint64_t pos, uint64_t s)
{
	if (s != pos + 1 && !CLAIM_OF(s, pos))
		return false;
	atomic_compare_exchange_strong_explicit(&r->tail, &pos, pos + 1, memory_order_relaxed,
						memory_order_relaxed);
	return true;
}

/* The free slot at the tail, moving the tail past slots already taken: its position in *pos.
 * False if the ring is full (the slot at the tail still holds the previous lap). */
static bool ring_free_slot(struct ring *r, uint64_t *pos)
{
	for (;;) {
		uint64_t p = atomic_load_explicit(&r->tail, memory_order_acquire);
		uint64_t s = atomic_load_explicit(&r->seq[p % RING_SLOTS], memory_order_acquire);

		*pos = p;
		if (s == p)
			return true;
		if (!ring_help(r, p, s) && atomic_load_explicit(&r->tail, memory_order_acquire) == p)
			return false;
	}
}

static _Atomic long pushes;   /* for RVXSIM_DIE_MID_PUSH */

static bool ring_push(struct ring *r, const struct pkt *p, int32_t pid)
{
	uint64_t pos, seq;

	do {
		if (!ring_free_slot(r, &pos))
			return false;
		seq = pos;
	} while (!atomic_compare_exchange_weak_explicit(&r->seq[pos % RING_SLOTS], &seq, CLAIM(pos, pid),
							memory_order_acq_rel, memory_order_relaxed));
	if (sim_env.die_mid_push > 0 && atomic_fetch_add(&pushes, 1) + 1 == sim_env.die_mid_push)
		_exit(86);   /* RVXSIM_DIE_MID_PUSH: gone with the slot claimed, tail unmoved */
	ring_help(r, pos, CLAIM(pos, pid));
	memcpy(r->data[pos % RING_SLOTS], p, PKT_HDR + p->len);
	atomic_store_explicit(&r->seq[pos % RING_SLOTS], pos + 1, memory_order_release);
	return true;
}

/* The consumer is done with the slot at head: free it for the next lap. */
static void ring_pop(struct ring *r)
{
	atomic_store_explicit(&r->seq[r->head % RING_SLOTS], r->head + RING_SLOTS,
			      memory_order_release);
	r->head++;
}

bool fabric_send(struct sim_ctx *sc, uint16_t lid, const struct pkt *p)
{
	struct fabric_inbox *ib;
	bool response = p->type >= PKT_ACK;

	if (sc->peer_lost && lid != sc->lid)
		return true;    /* injected link loss: the packet vanishes */
	ib = remote(sc, lid);
	if (!ib)
		return true;    /* nobody at that LID: lost on the wire */
	if (!ring_push(&ib->ring[response], p, sc->inbox->pid))
		return false;
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&ib->sleeping, memory_order_relaxed)) {
		atomic_store(&ib->sleeping, 0);
		futex(&ib->sleeping, FUTEX_WAKE, 1, NULL);
	}
	return true;
}

bool fabric_has_room(struct sim_ctx *sc, uint16_t lid, bool response)
{
	struct fabric_inbox *ib = remote(sc, lid);
	struct ring *r;
	uint64_t pos;

	if (!ib)
		return true;
	r = &ib->ring[response];
	return ring_free_slot(r, &pos);
}

/* The slot at head was claimed by a process that died before publishing it: give the slot back
 * for the next lap and go past it, as if the packet had been lost on the wire. */
static bool skip_abandoned(struct ring *r, uint64_t s)
{
	pid_t pid = (pid_t)(s & CLAIM_PID_MASK);
	uint64_t now = sim_now_ns(), pos = r->head;

	if (r->stall_head != pos + 1) {   /* first sight of this claim: start the clock */
		r->stall_head = pos + 1;
		r->stall_since = now;
		return false;
	}
	if (now - r->stall_since < STALL_NS || !(kill(pid, 0) < 0 && errno == ESRCH))
		return false;
	TRACE("inbox: slot %llu was claimed by pid %d, which died before filling it: skipped",
	      (unsigned long long)pos, (int)pid);
	ring_help(r, pos, s);   /* the tail may still point at it */
	ring_pop(r);
	r->stall_head = 0;
	return true;
}

struct pkt *fabric_peek(struct sim_ctx *sc, bool response)
{
	struct ring *r = &sc->inbox->ring[response];

	for (;;) {
		uint64_t s = atomic_load_explicit(&r->seq[r->head % RING_SLOTS], memory_order_acquire);
		if (s == r->head + 1)
			return (struct pkt *)r->data[r->head % RING_SLOTS];
		if (!CLAIM_OF(s, r->head) || !skip_abandoned(r, s))
			return NULL;
	}
}

void fabric_pop(struct sim_ctx *sc, bool response)
{
	ring_pop(&sc->inbox->ring[response]);
}

/* Something has arrived or is arriving (a claimed slot). Read-only: it runs outside the lock. */
bool fabric_pending(struct sim_ctx *sc)
{
	for (int i = 0; i < 2; i++) {
		struct ring *r = &sc->inbox->ring[i];
		uint64_t h = r->head;
		uint64_t s = atomic_load_explicit(&r->seq[h % RING_SLOTS], memory_order_acquire);
		if (s == h + 1 || CLAIM_OF(s, h))
			return true;
	}
	return false;
}

/* Sleep until a producer or a local verb wakes us, or ns pass. */
void fabric_sleep(struct sim_ctx *sc, long ns)
{
	struct timespec ts = { ns / 1000000000L, ns % 1000000000L };

	atomic_store(&sc->inbox->sleeping, 1);
	atomic_thread_fence(memory_order_seq_cst);
	if (!fabric_pending(sc) && !atomic_load(&sc->stop))
		futex(&sc->inbox->sleeping, FUTEX_WAIT, 1, &ts);
	atomic_store(&sc->inbox->sleeping, 0);
}

void fabric_wake_self(struct sim_ctx *sc)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (sc->inbox && atomic_load_explicit(&sc->inbox->sleeping, memory_order_relaxed)) {
		atomic_store(&sc->inbox->sleeping, 0);
		futex(&sc->inbox->sleeping, FUTEX_WAKE, 1, NULL);
	}
}
