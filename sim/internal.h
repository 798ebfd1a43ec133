/* rvxsim: a software model of an mlx5 (ConnectX) RDMA adapter behind rdma-core's API.
 * Private declarations shared by the model's sources. */
#ifndef RVXSIM_INTERNAL_H
#define RVXSIM_INTERNAL_H

#define _GNU_SOURCE
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <pthread.h>
#include <sys/types.h>
#include <endian.h>
#include <infiniband/verbs.h>
#include <infiniband/mlx5dv.h>

#define SIM_EXPORT __attribute__((visibility("default")))
#define SIM_PRIV   __attribute__((visibility("default")))

/* Model constants: what a ConnectX-6 reports (or what libmlx5 derives from it). */
#define SIM_VENDOR_ID       0x02c9
#define SIM_PART_ID         4123
#define SIM_HW_VER          0
#define SIM_MAX_QP_WR       32768
#define SIM_MAX_SGE         30
#define SIM_MAX_CQE         4194303
#define SIM_MAX_SRQ_WR      32767
#define SIM_MAX_WQE_SIZE    1024     /* max_sq_desc_sz assumed by the model */
#define SIM_RC_SQ_OVERHEAD  192      /* libmlx5 sizes RC WQEs for a UMR WQE */
#define SIM_BF_SIZE         256      /* one half of a 512-byte bfreg */
#define SIM_MTU             4096     /* payload bytes per fabric packet */
#define SIM_MAX_RD_ATOMIC   16
#define SIM_MAX_OUTSTANDING 256      /* messages in flight per QP */
#define SIM_MAX_DEVICES     2

/* ---- logging, tracing, environment (trace.c) ---- */
struct sim_env {
	int trace;
	int num_devices;
	int link_eth;
	long kill_peer_after;    /* <0: off */
	long die_mid_push;       /* >0: exit in the middle of this process's Nth packet push */
	long delay_us;
	long reg_cost_ns_per_page;
	long force_rnr;
	long drop_read_resp;     /* RVXSIM_DROP_READ_RESP: READ/atomic response packets to lose */
	long drop_ack;           /* RVXSIM_DROP_ACK: ACKs to lose */
	long retry_timeout_ms;   /* cap of the transport retry timer */
	long db_grace_ms;        /* dbrec moved without MMIO doorbell */
	long spin_us;
	int count_mmio;          /* RVXSIM_COUNT_MMIO=1: doorbell writes counted exactly (mmio.c) */
	int strict;              /* RVXSIM_STRICT=1: stale reserved WQE bytes are faults (a lint) */
	char fabric_dir[256];
	uint8_t port_speed[SIM_MAX_DEVICES]; /* ibv_port_attr.active_speed (RVXSIM_PORT_SPEED) */
	uint8_t port_width[SIM_MAX_DEVICES]; /* ibv_port_attr.active_width */
	bool rdma_deny[SIM_MAX_DEVICES];     /* RVXSIM_RDMA_DENY: NAK every RDMA READ/WRITE arriving */
};
extern struct sim_env sim_env;
void sim_env_init(void);
/* Bytes moved by RDMA WRITE / READ WQEs that completed without error, per requester device;
 * written at exit to RVXSIM_STATS_FILE. */
void sim_stats_rdma(int dev, bool read, uint64_t bytes);
/* What this process holds of the adapter, for rvxsim_counters(): control verbs called (each one a
 * command to the kernel on hardware), and gauges of live objects with their peaks. MODEL_BYTES is
 * the heap the model holds for objects and per-peer state (QP, CQ and SRQ buffers, DCT initiator
 * state, the record of each peer inbox mapped), so that a tool can tell the application's memory from the model's. */
enum sim_obj { SIM_OBJ_QPS, SIM_OBJ_MR_BYTES, SIM_OBJ_CQES, SIM_OBJ_SRQ_WQES, SIM_OBJ_MODEL_BYTES,
	       SIM_OBJ_N };
void sim_count_verb(void);
/* A send WQE the engine took from one of this process's queues, and its message length: traffic
 * through the adapter, for a tool that checks what did (or did not) go through it. */
void sim_count_wqe(uint64_t bytes);
void sim_count_obj(enum sim_obj what, int64_t delta);
/* RVXSIM_COUNT_MMIO (mmio.c): a QP's UAR and doorbell-record pages from the write-protected
 * arena (0, EOPNOTSUPP where the mode cannot work, ENOMEM), given back, opened around the
 * model's own writes; rvxsim_counters' keys for it (nothing when the mode is off). */
struct sim_qp;
bool sim_mmio_available(void);
int sim_mmio_alloc(struct sim_qp *qp);
bool sim_mmio_owns(const void *p);
void sim_mmio_free(struct sim_qp *qp);
void sim_mmio_model_writes(struct sim_qp *qp, bool open);
int sim_mmio_counters(char *buf, size_t len);
/* rvxsim_counters' memory figures (verbs.c): the bytes of this process's work and completion
 * queues (QP, CQ and SRQ buffers: host memory that a provider allocates in the process on hardware
 * too), how much of them and of the registered memory is resident now (mincore), and how much
 * of the model's large per-QP arrays (records of messages in flight, work request ids, the UAR
 * page) is not. */
struct sim_resident { uint64_t queue_bytes, queue_rss, mr_rss, model_idle; };
void sim_resident(struct sim_resident *r);
/* CPU time of this process's engine threads so far: the model's, which a tool takes off the
 * process's when it measures what the application spent (rvxsim_counters' engine_cpu_ns). */
uint64_t sim_engine_cpu_ns(void);
/* Stores the application has made to the QP's counted pages so far (0 if they are not counted). */
uint32_t sim_mmio_stores(const struct sim_qp *qp);
void sim_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sim_trace(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define TRACE(...) do { if (sim_env.trace) sim_trace(__VA_ARGS__); } while (0)
void sim_unsupported(const char *verb);
/* Hardware ignores reserved WQE fields: true (after one warning line per process) unless
 * RVXSIM_STRICT=1 asks for them to be faults. */
bool sim_reserved_ignored(const char *what);
uint64_t sim_now_ns(void);

/* ---- objects ---- */
struct sim_ctx;

struct sim_mr {
	struct ibv_mr mr;
	_Atomic int *dm_refs;        /* a DM MR: its device memory's count of MRs (dm.c) */
	uint64_t iova;
	uintptr_t addr;
	size_t length;
	int access;
	struct sim_mr *next;
	bool imported;               /* ibv_import_mr's handle: not in the key table */
	bool implicit;               /* implicit ODP: addr 0, length SIZE_MAX (all of memory) */
	/* a memory window's entry (mw.c): mr.lkey/rkey its current key, iova/length/access the
	 * bound range and rights, mr.pd its PD */
	uint8_t mw_type;             /* 1 or 2; 0: a memory region */
	bool bound;
	uint32_t parent;             /* the bound range's memory region (its key) */
	uint32_t qpn;                /* type 2: the QP it is bound to */
};

/* ODP per transport (RC, and DC in mlx5dv_query_device): send, receive, RDMA write and read,
 * atomics, SRQ receives */
#define SIM_ODP_TRANSPORT_CAPS (IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | \
				IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ | \
				IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV)

/* The bytes a region counts in mr_bytes: an implicit ODP region's are none of its own. */
static inline size_t sim_mr_bytes(const struct sim_mr *m)
{
	return m->implicit ? 0 : m->length;
}

/* A memory window: its key table entry, and the handle the application holds. */
struct sim_mw {
	struct sim_mr k;
	struct ibv_mw mw;
};

struct sim_pd {
	struct ibv_pd pd;
	_Atomic int users;           /* MRs, QPs, SRQs, AHs and parent domains made in it */
	struct ibv_pd *prot;         /* a parent domain's or an imported PD's protection domain;
				      * NULL for a PD */
	bool imported;               /* ibv_import_pd's handle to another context's PD */
	struct sim_pd *next;         /* the adapter's PDs, for ibv_import_pd (under its lock) */
};

/* the protection domain a PD or parent domain stands for: what keys are checked against */
static inline struct ibv_pd *pd_prot(struct ibv_pd *pd)
{
	struct sim_pd *p = (struct sim_pd *)pd;
	return p->prot ? p->prot : pd;
}

static inline void pd_get(struct ibv_pd *pd) { atomic_fetch_add(&((struct sim_pd *)pd)->users, 1); }
static inline void pd_put(struct ibv_pd *pd) { atomic_fetch_sub(&((struct sim_pd *)pd)->users, 1); }

struct sim_ah {
	struct ibv_ah ah;
	struct ibv_ah_attr attr;
	uint8_t av[48];
};

struct sim_channel {
	struct ibv_comp_channel ch;
	int wfd;                     /* write end of the event pipe */
	pthread_mutex_t lock;
	struct ibv_cq **queue;       /* pending events (CQs), FIFO */
	unsigned qhead, qtail, qcap;
};

struct sim_cq {
	union {                      /* ibv_cq_ex begins with the fields of ibv_cq */
		struct ibv_cq cq;
		struct ibv_cq_ex cqx;
	};
	struct ibv_wc cur;           /* the entry ibv_start_poll/ibv_next_poll stand on */
	uint32_t cqn;
	uint8_t *buf;
	__be32 *dbrec;
	uint32_t cqe_cnt, cqe_size;
	void *uar;                   /* per-CQ 4 KiB "UAR page"; arm doorbell at +0x20 */
	void *uar_ptr;               /* what the MLX5_1.0 init_obj points at */
	bool ignore_overrun;
	/* engine side */
	uint32_t pi;                 /* CQEs produced */
	bool err;                    /* overrun happened */
	bool armed, arm_sol;
	uint32_t arm_sn;             /* last sn seen in an arm doorbell */
	/* software (ibv_poll_cq) side */
	uint32_t cons_index;
	bool direct;                 /* mlx5dv_init_obj gave its buffer out: its owner polls it */
	uint32_t sw_arm_sn;
	uint32_t empty_polls;
	pthread_spinlock_t poll_lock;
	struct sim_cq *next;
};

struct sim_xrcd;
struct sim_xrcd_dom;

struct sim_srq {
	struct ibv_srq srq;
	uint32_t srqn;
	/* an XRC SRQ (ibv_create_srq_ex, IBV_SRQT_XRC): its domain, the handle it was made
	 * through, and the CQ its receive completions go to (xrc.c); NULL for a basic SRQ */
	struct sim_xrcd_dom *xrcd;
	struct sim_xrcd *xh;
	struct sim_cq *cq;
	uint8_t *buf;
	__be32 *dbrec;
	uint32_t stride, wqe_cnt, max_gs;
	uint32_t limit;
	/* software side */
	uint32_t head, tail;
	uint16_t counter;
	uint64_t *wrid;
	pthread_spinlock_t lock;
	/* engine side */
	uint32_t hw_head;            /* next WQE the engine consumes */
	uint16_t hw_count;           /* WQEs consumed, compared with *dbrec */
	uint32_t db_traced;
	struct sim_srq *next;
};

/* One message in flight on the requester side. */
struct sq_rec {
	uint16_t idx;                /* ctrl WQE index */
	uint32_t pc;                 /* WQEBB counter of the WQE */
	uint8_t opcode, opmod;
	uint8_t signaled, done, syndrome, fm;
	uint32_t seq;
	uint32_t byte_cnt;
	uint32_t rdma_bytes;         /* RDMA WRITE/READ payload, counted when it retires clean */
	uint32_t rd_next;            /* READ: offset the next response must carry (in order only) */
	uint64_t sent_ns;
	uint64_t ready_ns;           /* RVXSIM_DELAY_US */
	/* READ / atomic results land here */
	uint32_t nsge;
	struct { uint64_t addr; uint32_t len; } sge[SIM_MAX_SGE];
};

enum { TX_IDLE = 0, TX_ACTIVE };

/* A DCI work request's target (mlx5dv_wr_set_dc_addr). */
struct sim_wr_dc {
	struct ibv_ah *ah;
	uint32_t dctn;
	uint64_t key;
};
struct sim_wr_batch;

struct sim_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qpx;        /* ibv_qp_to_qp_ex, when created with send_ops_flags */
	};
	struct mlx5dv_qp_ex dvqpx;       /* mlx5dv_qp_ex_from_ibv_qp_ex */
	struct sim_wr_batch *wrb;        /* ibv_wr_* staging (wr.c), or NULL */
	struct sim_wr_dc *wr_dc;
	uint8_t *wr_mem;
	struct sim_ctx *sc;
	uint32_t qpn;
	enum ibv_qp_type type;
	bool sq_sig_all;
	uint8_t *buf;
	size_t buf_size;
	__be32 *dbrec;
	uint8_t *uar;                /* 4 KiB page */
	uint8_t *bf;                 /* uar + 0x800: 2 * SIM_BF_SIZE bytes */
	uint32_t sq_wqe_cnt, rq_wqe_cnt, rq_stride;
	uint8_t *sq_buf, *rq_buf;
	uint32_t max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
	uint32_t max_wqe_bytes;      /* the WQE size the send queue was sized for */
	struct sim_cq *scq, *rcq;
	struct sim_srq *srq;
	int bad;                     /* the QP was faulted; further faults are not reported */
	bool poisoned;               /* a faulty doorbell named WQE poison_idx */
	bool db_dead;                /* the send doorbell record is ignored until RESET */
	uint16_t poison_idx;

	/* attributes (modify/query) */
	struct ibv_qp_attr attr;
	int state;

	/* software post/poll state (ibv_post_send, ibv_poll_cq) */
	pthread_spinlock_t sq_lock, rq_lock;
	uint32_t sw_sq_pi, sw_sq_tail;   /* WQEBB counters */
	uint32_t sw_bf_off;
	uint64_t *sq_wrid;               /* per WQEBB slot */
	uint16_t *sq_bbs;                /* WQEBBs of the WQE starting at a slot */
	uint8_t *sq_wc_op;               /* a UMR WQE's completion opcode (bind or local invalidate) */
	uint8_t next_fence;              /* the fence the WQE after a UMR carries (libmlx5) */
	uint32_t sw_rq_head, sw_rq_tail;
	uint64_t *rq_wrid;

	/* engine: send side */
	uint32_t sq_pc;              /* next WQE (WQEBB counter) to start */
	uint32_t sq_db_seen;         /* dbrec value last accepted */
	uint32_t sq_db_covered;      /* WQEBB counter covered by a seen MMIO doorbell */
	uint64_t sq_db_pending_since;
	uint8_t bf_shadow[2][SIM_BF_SIZE];
	uint64_t bf_last[2];
	bool bf_pend[2];             /* a BlueFlame copy to re-check (see bf_recheck) */
	uint64_t bf_pend_v[2], bf_pend_since[2];
	uint32_t bf_pend_idx[2], bf_pend_len[2];
	uint32_t bf_pend_stores[2], sq_db_stores;  /* RVXSIM_COUNT_MMIO: stores seen (doorbell.c) */
	struct sq_rec *out;          /* ring of SIM_MAX_OUTSTANDING */
	uint32_t out_head, out_tail; /* records [tail, head) in flight */
	uint32_t next_seq;           /* next message sequence number */
	int rnr_left;
	int retry_left;              /* transport retries left for the oldest message */
	uint64_t rnr_wait_until;
	uint32_t rnr_seq;
	bool rnr_waiting;
	bool seq_err_retry;          /* a go-back to seq_err_seq after an implied NAK is under way */
	uint32_t seq_err_seq;
	/* current message being packetised */
	int tx_state;
	uint8_t *tx_data;
	uint32_t tx_len, tx_off;
	uint32_t tx_rec;             /* index into out ring */
	uint8_t tx_hdr[128];         /* request header template */

	/* engine: receive side (responder) */
	uint32_t rq_ci;              /* receive WQEs consumed */
	uint32_t rq_db_traced;
	/* exp_seq .. rd_active: the responder state of one connection, kept together because a DCT
	 * keeps one copy per initiator and swaps it in (dc.c, SIM_RESP_FIRST/SIM_RESP_END) */
	uint32_t exp_seq;            /* next request sequence expected */
	uint32_t ack_pending;        /* 0 or seq+1 of last message to acknowledge */
	/* current multi-packet SEND / WRITE_IMM being received */
	bool rx_active;
	uint32_t rx_wqe;             /* RQ index or SRQ slot */
	uint32_t rx_off;
	int rx_synd;                 /* responder error latched for the message */
	uint32_t rx_seq;
	bool rx_has_wqe;
	bool rx_dead;                /* a responder error: drop requests until RESET */
#define ATOMIC_CACHE 16
	struct { uint32_t seq; bool valid; uint64_t old; } atom_cache[ATOMIC_CACHE];
	uint32_t atom_next;
	/* READ response in progress */
	uint32_t rd_seq, rd_off;
	bool rd_active;

	size_t model_bytes;          /* heap held for this QP (SIM_OBJ_MODEL_BYTES) */
	uint8_t dc_type;             /* 0, SIM_DCI or SIM_DCT */
	/* XRC: a target QP's domain and the handle it was made through; while the engine executes
	 * one of its requests, srq and rcq stand for the SRQ the request names (xrc.c) */
	struct sim_xrcd_dom *xrcd;
	struct sim_xrcd *xh;
	struct sim_dc *dc;           /* DC state (dc.c) */
	struct sim_qp *next;
};

struct sim_dev {
	struct ibv_device dev;
	int index;
};

struct fabric_inbox;

struct sim_ctx {
	struct verbs_context vctx;   /* extended context; vctx.context is the ibv_context */
	/* The adapter behind the context. Contexts of one device in one process share the first
	 * one's port, LID, GID, QPN space, objects and engine, as contexts of one device share the
	 * hardware: hw is that context (itself for the first); users counts the open contexts on
	 * it, and it is torn down when the last one closes. */
	struct sim_ctx *hw;
	int users;
	bool closed;
	void *nc_uar;                /* mlx5dv_devx_alloc_uar's non-cached UAR (one per context) */
	pid_t pid;                   /* the process whose adapter it is (a forked child has none) */
	struct sim_dev *dev;
	int index;
	uint16_t lid;
	uint64_t guid;
	union ibv_gid gid;
	pthread_mutex_t lock;        /* object lists; held by the engine while it works */
	struct sim_qp *qps;
	struct sim_cq *cqs;
	struct sim_srq *srqs;
	struct sim_mr *mrs;
	struct sim_mr **mr_tab;      /* index = key >> 8 */
	uint32_t mr_tab_size;
	uint32_t next_qpn, next_cqn, next_srqn, next_mkey;
	int async_wfd;
	/* engine */
	pthread_t thread;
	atomic_int stop;
	struct fabric_inbox *inbox;
	char inbox_path[320];
	int inbox_fd;
	uint64_t wqes_executed;
	bool peer_lost;              /* RVXSIM_KILL_PEER_AFTER fired */
	_Atomic uint64_t app_progress_ns; /* last engine pass run by an application thread */
	long forced_rnr;
	long dropped_read_resp;      /* RVXSIM_DROP_READ_RESP responses lost so far */
	long dropped_acks;           /* RVXSIM_DROP_ACK ACKs lost so far */
	uint32_t dropped_qpn, dropped_seq; /* the last one, not lost twice */
	struct remote_cache *remotes;
	_Atomic size_t dm_used;      /* device memory allocated (dm.c) */
	struct sim_dm *dms;          /* and its DMs, for ibv_import_dm (under lock) */
	struct sim_pd *pds;          /* its PDs, for ibv_import_pd (under lock) */
	struct sim_xrcd_dom *xrcds;  /* its XRC domains (xrc.c, under lock) */
};

/* the context's own record (its handle: ops, async fd) */
static inline struct sim_ctx *ctx_self(struct ibv_context *c)
{
	return (struct sim_ctx *)((char *)c - offsetof(struct sim_ctx, vctx.context));
}
/* the adapter the context opens (see sim_ctx.hw) */
static inline struct sim_ctx *to_sctx(struct ibv_context *c)
{
	return ctx_self(c)->hw;
}
static inline struct sim_qp *to_sqp(struct ibv_qp *q) { return (struct sim_qp *)q; }
static inline struct sim_cq *to_scq(struct ibv_cq *c) { return (struct sim_cq *)c; }
static inline struct sim_srq *to_ssrq(struct ibv_srq *s) { return (struct sim_srq *)s; }

/* ---- engine (engine.c, decode.c, requester.c, responder.c, doorbell.c; lookups: tables.c) */
int engine_start(struct sim_ctx *sc);
void engine_stop(struct sim_ctx *sc);
void engine_kick(struct sim_ctx *sc);
bool engine_state_gives_work(const struct sim_qp *qp, int next);
void engine_progress(struct sim_ctx *sc);
void engine_qp_reset(struct sim_qp *qp);
void engine_qp_to_err(struct sim_qp *qp);
void engine_write_cqe(struct sim_cq *cq, const uint8_t cqe[64], bool se);
struct sim_mr *sim_mr_lookup(struct sim_ctx *sc, uint32_t key);
struct sim_mr *sim_mr_index(struct sim_ctx *sc, uint32_t key);
struct sim_qp *sim_qp_lookup(struct sim_ctx *sc, uint32_t qpn);
int sim_odp_fault(uintptr_t addr, uint64_t len, bool write, const char **why);
void sim_async_event(struct sim_ctx *sc, enum ibv_event_type type, void *obj);

/* ---- fabric (fabric.c) ---- */
enum pkt_type {
	PKT_WRITE = 1, PKT_SEND, PKT_READ_REQ, PKT_ATOMIC,   /* requests */
	PKT_UD,                                              /* a datagram (ud.c) */
	PKT_ACK = 16, PKT_NAK, PKT_READ_RESP, PKT_ATOMIC_RESP, /* responses */
};
#define PKT_F_FIRST 1
#define PKT_F_LAST  2
#define PKT_F_IMM   4
#define PKT_F_SE    8
#define PKT_F_UC    16           /* a UC requester's packet (the BTH opcode's transport) */
#define PKT_F_INV   32           /* SEND with Invalidate: imm is the rkey to invalidate */
#define PKT_F_XRC   64           /* an XRC initiator's request: xrc_srqn is its XRCETH */

struct pkt {
	uint8_t type, flags, syndrome, opmod;
	uint16_t src_lid, dst_lid;
	uint32_t src_qpn, dst_qpn;
	uint32_t seq;
	uint32_t len;                /* payload bytes in this packet */
	uint32_t total;              /* message length */
	uint32_t off;                /* payload offset within the message */
	uint32_t rkey;
	uint32_t imm;                /* network order, as in the WQE */
	uint32_t rnr_timer;
	uint64_t raddr;
	uint64_t op[4];              /* atomic operands, host order: swap/add, compare, swap_mask, compare_mask */
	uint64_t dc_key;             /* DC: the WQE's access key, connection, SL and GRH bit */
	uint32_t dc_conn;
	uint8_t dc_sl, dc_grh;
	uint32_t xrc_srqn;           /* XRC: the SRQ the target delivers to */
	uint8_t data[];
};
#define PKT_HDR ((uint32_t)sizeof(struct pkt))

int fabric_open(struct sim_ctx *sc);
void fabric_close(struct sim_ctx *sc);
/* Queue one packet to lid's inbox; false when its ring is full (retry later). */
bool fabric_send(struct sim_ctx *sc, uint16_t lid, const struct pkt *p);
bool fabric_has_room(struct sim_ctx *sc, uint16_t lid, bool response);
/* Peek at the next incoming packet (requests or responses ring); NULL when empty. */
struct pkt *fabric_peek(struct sim_ctx *sc, bool response);
void fabric_pop(struct sim_ctx *sc, bool response);
bool fabric_peer_alive(struct sim_ctx *sc, uint16_t lid);
bool fabric_peer_stopped(struct sim_ctx *sc, uint16_t lid);
void fabric_forget_peer(struct sim_ctx *sc, uint16_t lid);
/* Engine sleep/wake through the inbox futex. */
void fabric_sleep(struct sim_ctx *sc, long ns);
void fabric_wake_self(struct sim_ctx *sc);
bool fabric_pending(struct sim_ctx *sc);

/* ---- Dynamically Connected transport (dc.c) ---- */
enum { SIM_DCI = 1, SIM_DCT = 2 };
#define SIM_RESP_FIRST exp_seq       /* first and last field of the per-connection responder state */
#define SIM_RESP_END   rd_active

/* A decoded address segment (struct mlx5_wqe_av): 16 bytes, or 48 with MLX5_EXTENDED_UD_AV. */
struct sim_av {
	uint64_t key;                /* DC access key (UD: Q_Key in the high word) */
	uint32_t dqpn;               /* remote QPN or DCT number, bits 23:0 */
	uint8_t len;                 /* 16 or 48 */
	bool ext, grh;
	uint8_t sl, rate, fl_mlid, sgid_index, tclass, hop_limit;
	uint16_t rlid;
	uint32_t flow_label;
	uint8_t rmac[6], rgid[16];
};
/* Parse the address segment at seg (room bytes left in the WQE). Returns its length, or 0 with
 * a reason in why when it does not fit. Shared by every datagram-addressed transport. */
uint32_t av_parse(const uint8_t *seg, uint32_t room, struct sim_av *av, char *why, size_t n);
uint16_t av_lid(const struct sim_av *av);     /* the LID the model routes the AV to */
void av_trace(const struct sim_av *av);

int dc_init(struct sim_qp *qp, int type, uint64_t key);
void dc_free(struct sim_qp *qp);
int dc_check_mask(struct sim_qp *qp, int cur, int next, int mask, char *why, size_t n);
void dc_modified(struct sim_qp *qp, int cur, int next);
bool dc_connect(struct sim_qp *qp, const struct sim_av *av);
void dc_hdr(struct sim_qp *qp, struct pkt *p);
bool dc_response_ok(struct sim_qp *qp, const struct pkt *p);
bool dc_request(struct sim_ctx *sc, struct sim_qp *dct, struct pkt *p);
int dc_dct_work(struct sim_ctx *sc, struct sim_qp *dct, uint64_t now);
bool dc_waits(const struct sim_qp *dct);     /* ACKs owed that did not fit yet */
/* responder.c: the responder's handling of one request packet (RC rules) */
bool engine_request(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p);

/* ---- XRC (xrc.c) ---- */
/* The XRC segment after an XRC initiator's ctrl segment (rdma-core's providers/mlx5/wqe.h has
 * it; mlx5dv.h does not): the SRQ number in its first word, the rest reserved. */
struct sim_xrc_seg {
	__be32 xrc_srqn;
	uint8_t rsvd[12];
};
/* The protection domain a QP's memory accesses are checked against: a target QP's is the PD
 * of the SRQ the request names (IBA XRC: the XRC SRQ's PD), every other QP's its own. */
static inline struct ibv_pd *qp_mem_pd(const struct sim_qp *qp)
{
	return qp->type == IBV_QPT_XRC_RECV && qp->srq ? qp->srq->srq.pd : qp->qp.pd;
}
struct sim_srq *sim_srq_lookup(struct sim_ctx *sc, uint32_t srqn);
struct ibv_qp *sim_create_xrc_tgt(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a);
/* qp.c: a target QP's object, with no queues */
struct ibv_qp *sim_qp_new_tgt(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *a);
void sim_xrcd_put(struct sim_xrcd *xh);
struct ibv_xrcd *sim_open_xrcd(struct ibv_context *ctx, struct ibv_xrcd_init_attr *a);
int sim_close_xrcd(struct ibv_xrcd *x);
struct ibv_srq *sim_create_srq_ex(struct ibv_context *ctx, struct ibv_srq_init_attr_ex *a);
/* responder.c's execution of a target QP's request through the SRQ it names; false as
 * handle_request */
bool xrc_request(struct sim_ctx *sc, struct sim_qp *qp, struct pkt *p);

/* ---- UD QPs (ud.c) ---- */
int sim_ud_check_mask(int cur, int next, int mask, char *why, size_t n);
void sim_ud_wr_dgram(const struct ibv_send_wr *wr, uint8_t *seg);
int sim_ud_sq_work(struct sim_qp *qp);
void sim_ud_receive(struct sim_qp *qp, const struct pkt *p);
/* responder.c's receive queue and engine.c's memory checks, shared with ud.c */
void *engine_mr_ptr(struct sim_qp *qp, uint32_t key, uint64_t addr, uint64_t len, int need,
		    const char **why);
bool engine_rq_peek(struct sim_qp *qp, uint8_t **segs, uint32_t *nsegs, uint32_t *index);
void engine_rq_consume(struct sim_qp *qp);
int engine_rq_check(struct sim_qp *qp, uint8_t *segs, uint32_t nsegs, uint32_t total, uint32_t idx);
void engine_rq_scatter(struct sim_qp *qp, uint8_t *segs, uint32_t nsegs, uint32_t off,
		       const uint8_t *data, uint32_t len);

/* ---- sysfs view (sysfs.c): the tree clients read through ibdev_path ---- */
void sim_sysfs_init(struct sim_dev *devs, int n);

/* ---- helpers ---- */
static inline uint32_t roundup_pow2(uint32_t v)
{
	uint32_t r = 1;
	while (r < v)
		r <<= 1;
	return r;
}
#define ALIGN_UP(x, a) (((x) + (a) - 1) / (a) * (a))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Private entry points for libmlx5.so.1 (exported at RVXSIM_PRIVATE). */
SIM_PRIV struct ibv_qp *rvxsim_priv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
					     uint32_t create_flags);
SIM_PRIV struct ibv_cq *rvxsim_priv_create_cq(struct ibv_context *ctx, int cqe,
					     struct ibv_comp_channel *ch, int vec,
					     uint32_t cqe_size, bool ignore_overrun);
SIM_PRIV struct ibv_cq_ex *rvxsim_priv_create_cq_ex(struct ibv_context *ctx,
						   struct ibv_cq_init_attr_ex *a, uint32_t cqe_size);
SIM_PRIV struct ibv_qp *rvxsim_priv_create_dc_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr,
						 int dc_type, uint64_t access_key);
SIM_PRIV bool rvxsim_priv_is_sim(struct ibv_context *ctx);
SIM_PRIV struct mlx5dv_devx_uar *rvxsim_priv_devx_alloc_uar(struct ibv_context *ctx, uint32_t flags);
SIM_PRIV void rvxsim_priv_devx_free_uar(struct mlx5dv_devx_uar *uar);
SIM_PRIV void rvxsim_priv_unsupported(const char *verb);


/* ---- device memory (dm.c) ---- */
#define SIM_DM_SIZE (128u << 10)     /* a ConnectX-6's MEMIC [inferred from mlx5_ib's max_memic_size] */
struct sim_dm {
	struct ibv_dm dm;
	uint8_t *buf;                /* what mlx5dv_init_obj maps: the model's "device memory" */
	size_t length;
	_Atomic int mrs;             /* DM MRs on it: free is EBUSY meanwhile */
	struct sim_dm *next;         /* the adapter's DMs (an imported one is on no list) */
	bool imported;               /* ibv_import_dm's handle to another context's DM */
};
struct ibv_dm *sim_alloc_dm(struct ibv_context *ctx, struct ibv_alloc_dm_attr *attr);
int sim_free_dm(struct ibv_dm *dm);
struct ibv_dm *sim_import_dm(struct ibv_context *ctx, uint32_t handle);
void sim_unimport_dm(struct ibv_dm *dm);
struct ibv_mr *sim_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm, uint64_t off, size_t len,
			     unsigned int access);
void *zalloc_aligned(size_t align, size_t size);

/* ---- the ibv_wr_* API (wr.c) ---- */
int sim_wr_init(struct sim_qp *qp, uint64_t send_ops_flags);
void sim_wr_free(struct sim_qp *qp);
/* the WQE builder of ibv_post_send; dc[i] addresses the i-th WR of a DCI */
int sim_post_send(struct sim_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad,
		  const struct sim_wr_dc *dc);
SIM_PRIV int rvxsim_priv_qp_enable_wr(struct ibv_qp *qp, uint64_t send_ops_flags);
SIM_PRIV struct mlx5dv_qp_ex *rvxsim_priv_qp_dv(struct ibv_qp_ex *qp);
SIM_PRIV int rvxsim_priv_env_cqe_size(void);

#endif
