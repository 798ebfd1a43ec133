/* rvxsim: the object tables. QPs by number (one table per device, shared by every context
 * opened on it, so a QP number is unique on the device) and MRs by key (per context). */
#include "verbs.h"
#include <stdlib.h>
#include <string.h>

static struct sim_qp **qp_tabs[SIM_MAX_DEVICES];
static int open_count[SIM_MAX_DEVICES];
static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;

#define QP_TAB_SIZE 65536

/* A context opened on device index: its QP table, allocated by the first. 0 or -1 (no memory). */
int sim_qp_tab_acquire(int index)
{
	pthread_mutex_lock(&tab_lock);
	if (!qp_tabs[index])
		qp_tabs[index] = calloc(QP_TAB_SIZE, sizeof(struct sim_qp *));
	if (qp_tabs[index])
		open_count[index]++;
	pthread_mutex_unlock(&tab_lock);
	return qp_tabs[index] ? 0 : -1;
}

/* A context closed: the last one frees the table. */
void sim_qp_tab_release(int index)
{
	pthread_mutex_lock(&tab_lock);
	if (--open_count[index] == 0) {
		free(qp_tabs[index]);
		qp_tabs[index] = NULL;
	}
	pthread_mutex_unlock(&tab_lock);
}

/* The next QP number (from 0x100) whose slot is free; under sc->lock. */
uint32_t sim_qp_tab_free_qpn(struct sim_ctx *sc)
{
	for (;;) {
		uint32_t n = sc->next_qpn++ & 0xffffff;
		if (n >= 0x100 && !qp_tabs[sc->index][n & (QP_TAB_SIZE - 1)])
			return n;
	}
}

/* Put qp (or NULL) in qpn's slot; under sc->lock. */
void sim_qp_tab_set(struct sim_ctx *sc, uint32_t qpn, struct sim_qp *qp)
{
	qp_tabs[sc->index][qpn & (QP_TAB_SIZE - 1)] = qp;
}

struct sim_qp *sim_qp_lookup(struct sim_ctx *sc, uint32_t qpn)
{
	struct sim_qp *q = qp_tabs[sc->index][qpn & (QP_TAB_SIZE - 1)];
	return q && q->qpn == qpn && q->sc == sc ? q : NULL;
}

/* Like sim_qp_lookup, for a QP of any context on the device (what a shared CQ may hold). */
struct sim_qp *sim_qp_lookup_dev(struct sim_ctx *sc, uint32_t qpn)
{
	struct sim_qp *q = qp_tabs[sc->index][qpn & (QP_TAB_SIZE - 1)];
	return q && q->qpn == qpn ? q : NULL;
}

struct sim_mr *sim_mr_lookup(struct sim_ctx *sc, uint32_t key)
{
	uint32_t i = key >> 8;
	if (i >= sc->mr_tab_size || !sc->mr_tab[i] || sc->mr_tab[i]->mr.lkey != key)
		return NULL;
	return sc->mr_tab[i];
}

/* The key table's entry at a key's index, whatever its variant byte (a UMR names its mkey so:
 * libmlx5 does not follow the variants a type 2 bind or an invalidation gives). */
struct sim_mr *sim_mr_index(struct sim_ctx *sc, uint32_t key)
{
	uint32_t i = key >> 8;
	return i < sc->mr_tab_size ? sc->mr_tab[i] : NULL;
}

/* The first free MR slot (from 1), the table doubled when full; under sc->lock.
 * 0 when there is no memory. */
uint32_t sim_mr_tab_slot(struct sim_ctx *sc)
{
	uint32_t idx;

	for (idx = 1; idx < sc->mr_tab_size && sc->mr_tab[idx]; idx++)
		;
	if (idx >= sc->mr_tab_size) {
		uint32_t nsize = sc->mr_tab_size ? sc->mr_tab_size * 2 : 64;
		struct sim_mr **t = realloc(sc->mr_tab, nsize * sizeof(*t));
		if (!t)
			return 0;
		memset(t + sc->mr_tab_size, 0, (nsize - sc->mr_tab_size) * sizeof(*t));
		sc->mr_tab = t;
		sc->mr_tab_size = nsize;
		if (idx == 0)
			idx = 1;
	}
	return idx;
}

/* Empty m's slot if it still holds m; under sc->lock. */
void sim_mr_tab_clear(struct sim_ctx *sc, struct sim_mr *m)
{
	if (m->mr.handle < sc->mr_tab_size && sc->mr_tab[m->mr.handle] == m)
		sc->mr_tab[m->mr.handle] = NULL;
}
