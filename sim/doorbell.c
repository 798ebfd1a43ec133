/* rvxsim: doorbells. What the application wrote to a QP's doorbell record and BlueFlame
 * register: new WQEs, BlueFlame copies checked against the ring, doorbells that are not where
 * they belong. */
#include "engine.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <errno.h>
#include <unistd.h>
#include <sched.h>
#include <time.h>

/* ------------------------------------------------------------------ doorbells */

/* What did the write that changed the first 8 bytes of a BlueFlame half do? 1: a BlueFlame copy
 * of the WQE; 0: an 8-byte doorbell (the rest of the half is left over from earlier writes);
 * -1: a copy whose bytes differ from the queue. The half is ordinary memory, so the engine only
 * sees its latest contents: bytes left over from a copy it never observed are recognised by
 * matching some WQE still in the ring. A copy that is still arriving gets a moment to finish. */
static bool half_is(struct sim_qp *qp, const uint8_t *half, uint32_t idx, uint32_t len)
{
	uint32_t mask = qp->sq_wqe_cnt - 1;
	for (uint32_t o = 0; o < len; o += 64)
		if (memcmp(half + o, qp->sq_buf + (((idx + o / 64) & mask) << 6), 64))
			return false;
	return true;
}

static int classify_half(struct sim_qp *qp, int h, const uint8_t *half, uint32_t idx, uint32_t len)
{
	uint32_t mask = qp->sq_wqe_cnt - 1;

	if (half_is(qp, half, idx, len))
		return 1;
	if (!memcmp(half + 8, qp->bf_shadow[h] + 8, 56))
		return 0;
	for (uint32_t i = 0; i < qp->sq_wqe_cnt; i++)
		if (i != (idx & mask) && !memcmp(half + 8, qp->sq_buf + (i << 6) + 8, 56))
			return 0;
	/* Stores are 8 bytes wide: a copy in progress leaves every 8-byte word equal to the WQE's,
	 * to the previous contents, or to a word some other WQE in the ring has at that offset.
	 * A word that is none of these was written wrong. */
	for (uint32_t o = 8; o < len; o += 8) {
		uint64_t w = *(volatile uint64_t *)(half + o);
		bool ok = w == *(uint64_t *)(qp->sq_buf + (((idx + o / 64) & mask) << 6) + o % 64) ||
			  w == *(uint64_t *)(qp->bf_shadow[h] + o);
		for (uint32_t i = 0; i < qp->sq_wqe_cnt && !ok; i++)
			ok = w == *(uint64_t *)(qp->sq_buf + (i << 6) + o % 64);
		if (!ok)
			return -2;
	}
	return -1;
}

/* RVXSIM_COUNT_MMIO: every store takes tens of microseconds and the writer may be descheduled
 * between any two, so a wait that has run out starts again while the application is still
 * storing to the QP's registers (its count of stores moved since the last look). */
static bool mmio_progress(struct sim_qp *qp, uint32_t *seen, uint64_t *since, uint64_t now)
{
	uint32_t n;

	if (!sim_env.count_mmio)
		return false;
	n = sim_mmio_stores(qp);
	if (n == *seen)
		return false;
	*seen = n;
	*since = now;
	return true;
}

/* A half whose bytes matched nothing when its doorbell was seen: the copy may still be arriving
 * (the writer can be preempted in the middle of it), so look again on later rounds. It is a
 * fault only if the half keeps the same first 8 bytes and still matches nothing after a while.
 * With RVXSIM_COUNT_MMIO every store takes tens of microseconds (and on a loaded machine the
 * writer was seen to stop for up to a second between two), so the engine often sees a copy
 * begun: a half that reads as a doorbell, or holds a word of nothing known, is watched for 2 s
 * after the last store to the QP's registers before it is taken for a doorbell or a fault. */
static void bf_recheck(struct sim_qp *qp, int h, uint64_t now)
{
	uint8_t *half = qp->bf + h * SIM_BF_SIZE;
	uint64_t v = *(volatile uint64_t *)half;
	int kind;

	if (v != qp->bf_pend_v[h]) {
		qp->bf_pend[h] = false;     /* a newer write superseded it */
		return;
	}
	kind = classify_half(qp, h, half, qp->bf_pend_idx[h], qp->bf_pend_len[h]);
	if (kind == -2 && !sim_env.count_mmio)
		now = qp->bf_pend_since[h] + 200000000ull;
	if (kind == 1 || (kind == 0 && !sim_env.count_mmio))
		goto done;
	if ((int64_t)(now - qp->bf_pend_since[h]) < (sim_env.count_mmio ? 2000000000ll : 200000000ll) ||
	    mmio_progress(qp, &qp->bf_pend_stores[h], &qp->bf_pend_since[h], now))
		return;
	if (kind == 0)
		goto done;
	qp->bf_pend[h] = false;
	if (!qp->bad)
		qp_fault(qp, qp->bf_pend_idx[h], "BlueFlame bytes differ from the WQE in the queue");
	qp->bad = 1;
	qp_set_err(qp);
	return;
done:
	qp->bf_pend[h] = false;
	memcpy(qp->bf_shadow[h], half, SIM_BF_SIZE);
}

/* Is v the first 8 bytes of a WQE in the ring? Normally of the one at the index it names; a WQE
 * whose own ctrl index is wrong is still rung faithfully, and decode() reports that WQE. */
static bool ctrl_in_ring(struct sim_qp *qp, uint32_t idx, const uint8_t *v)
{
	uint32_t mask = qp->sq_wqe_cnt - 1;

	if (!memcmp(qp->sq_buf + ((idx & mask) << 6), v, 8))
		return true;
	for (uint32_t i = 0; i < qp->sq_wqe_cnt; i++)
		if (!memcmp(qp->sq_buf + (i << 6), v, 8))
			return true;
	return false;
}

/* A faulty doorbell: the WQE it names completes in error if it has not run yet; if it has,
 * the QP goes to the error state at once. */
static void doorbell_fault(struct sim_qp *qp, uint32_t idx)
{
	qp->bad = 1;
	if ((int16_t)(idx - (qp->sq_pc & 0xffff)) >= 0) {
		qp->poisoned = true;
		qp->poison_idx = idx;
	} else {
		qp_set_err(qp);
	}
}

/* Before calling a doorbell missing: a write of the same 8 bytes as the half already held is
 * invisible, so accept a half that names the WQE ending at the doorbell record. */
static bool doorbell_in_place(struct sim_qp *qp)
{
	for (int h = 0; h < 2; h++) {
		const uint8_t *vb = qp->bf + h * SIM_BF_SIZE;
		uint32_t idx = vb[1] << 8 | vb[2], ds = vb[7] & 0x3f;
		if (ds && ((idx + (ds + 3) / 4) & 0xffff) == (qp->sq_db_seen & 0xffff) &&
		    ctrl_in_ring(qp, idx, vb)) {
			qp->sq_db_covered = qp->sq_db_seen;
			qp->sq_db_pending_since = 0;
			return true;
		}
	}
	return false;
}

/* The send doorbell record: new WQEs posted (1), nothing new (0), or a record that went wrong
 * (-1: the QP goes to ERR and the record is not read again until RESET). */
static int watch_dbrec(struct sim_qp *qp, uint64_t now)
{
	uint32_t db16 = be32toh(qp->dbrec[MLX5_SND_DBR]) & 0xffff;
	uint32_t delta = (db16 - qp->sq_db_seen) & 0xffff;

	if (!delta || qp->db_dead)
		return 0;
	uint32_t ndb = qp->sq_db_seen + delta;
	uint32_t oldest = qp->out_tail != qp->out_head ? rec_at(qp, qp->out_tail)->pc : qp->sq_pc;
	if (delta >= 0x8000 || ndb - oldest > qp->sq_wqe_cnt) {
		/* the record is unusable from now on: stop reading it until RESET, and flush
		 * only what was posted before it went wrong */
		if (!qp->bad) {
			if (delta >= 0x8000)
				qp_fault(qp, qp->sq_db_seen, "send doorbell record went backwards "
					 "(0x%x -> 0x%x)", qp->sq_db_seen & 0xffff, db16);
			else
				qp_fault(qp, qp->sq_pc, "send doorbell record 0x%x is past the ring "
					 "(oldest incomplete WQE 0x%x, wqe_cnt %u)", db16,
					 oldest & 0xffff, qp->sq_wqe_cnt);
		}
		qp->bad = 1;
		qp->db_dead = true;
		qp_set_err(qp);
		return -1;
	}
	TRACE("db qp 0x%x: dbrec[SND] 0x%04x", qp->qpn, db16);
	qp->sq_db_seen = ndb;
	if (!qp->sq_db_pending_since)
		qp->sq_db_pending_since = now;
	return 1;
}

/* BlueFlame half h: a new 8-byte doorbell or BlueFlame copy written to it (true), checked
 * against the ring, and how far the doorbells now cover the send queue. */
static bool watch_half(struct sim_qp *qp, int h, uint64_t now)
{
	uint8_t *half = qp->bf + h * SIM_BF_SIZE;
	uint64_t v = *(volatile uint64_t *)half;
	uint8_t *vb = (uint8_t *)&v;
	uint32_t idx, ds, len, end;
	bool bf;

	if (v == qp->bf_last[h]) {
		if (qp->bf_pend[h])
			bf_recheck(qp, h, now);
		return false;
	}
	qp->bf_last[h] = v;
	qp->bf_pend[h] = false;
	atomic_thread_fence(memory_order_acquire);
	idx = vb[1] << 8 | vb[2];
	ds = vb[7] & 0x3f;
	len = ALIGN_UP(ds * 16, 64);
	bf = false;
	if (!qp->sq_wqe_cnt || !ctrl_in_ring(qp, idx, vb)) {
		if (!qp->bad)
			qp_fault(qp, idx, "doorbell value %016llx is not the first 8 bytes of the "
				 "last WQE's ctrl segment", (unsigned long long)be64toh(v));
		doorbell_fault(qp, idx);
	} else if (len <= SIM_BF_SIZE) {
		int kind = classify_half(qp, h, half, idx, len);
		bf = kind == 1;
		if (kind == -2 && !sim_env.count_mmio) {
			if (!qp->bad)
				qp_fault(qp, idx, "BlueFlame bytes differ from the WQE in the queue");
			doorbell_fault(qp, idx);
		} else if (kind < 0 || (kind == 0 && sim_env.count_mmio)) {
			qp->bf_pend[h] = true;
			qp->bf_pend_v[h] = v;
			qp->bf_pend_idx[h] = idx;
			qp->bf_pend_len[h] = len;
			qp->bf_pend_since[h] = now;
		}
	}
	TRACE("db qp 0x%x: %s to half %d: %016llx (WQE 0x%x, DS %u)", qp->qpn,
	      bf ? "BlueFlame copy" : "doorbell", h, (unsigned long long)be64toh(v), idx, ds);
	if (!qp->bf_pend[h])
		memcpy(qp->bf_shadow[h], half, SIM_BF_SIZE);
	/* the doorbell covers the WQE it names */
	end = (idx + (ds + 3) / 4) & 0xffff;
	/* nearest 32-bit count to the 16-bit end; it may be ahead of the record we read
	 * (the record was read before the register), which is fine */
	uint32_t full = qp->sq_db_seen + (uint32_t)(int16_t)(end - (qp->sq_db_seen & 0xffff));
	if ((int32_t)(full - qp->sq_db_covered) > 0)
		qp->sq_db_covered = full;
	return true;
}

/* A doorbell record that moved with no doorbell or BlueFlame write covering it, for longer
 * than the grace time, is a fault. */
static void check_covered(struct sim_qp *qp, uint64_t now)
{
	if ((int32_t)(qp->sq_db_covered - qp->sq_db_seen) >= 0) {
		qp->sq_db_pending_since = 0;
	} else if (qp->sq_db_pending_since &&
		   (int64_t)(now - qp->sq_db_pending_since) > sim_env.db_grace_ms * 1000000ll &&
		   !mmio_progress(qp, &qp->sq_db_stores, &qp->sq_db_pending_since, now) &&
		   !doorbell_in_place(qp)) {
		if (!qp->bad)
			qp_fault(qp, qp->sq_db_covered, "doorbell record moved to 0x%x with no doorbell "
				 "or BlueFlame write", qp->sq_db_seen & 0xffff);
		qp->bad = 1;
		qp->sq_db_pending_since = 0;
		qp->sq_db_covered = qp->sq_db_seen;
		qp_set_err(qp);
	}
}

/* What the application wrote since the last look (1: there is something to do). */
int watch_doorbells(struct sim_qp *qp, uint64_t now)
{
	int work = watch_dbrec(qp, now);

	if (work < 0)
		return 1;
	for (int h = 0; h < 2; h++)
		if (watch_half(qp, h, now))
			work = 1;
	check_covered(qp, now);
	return work;
}
