/* rvx/tl/shm.h: the shared-memory transport, for processes of one user on one machine.
 *
 * Memory. rvx_mem_alloc memory lives in a memfd (never named in a file system, mode 0600); a peer
 * maps it once, when it unpacks the rkey, through /proc/<pid>/fd/<fd>, so a put or a get is a plain
 * copy into or out of that mapping and an atomic is a CPU atomic on it. Memory registered with
 * rvx_mem_reg is ordinary process memory; peers reach it through cross-memory attach
 * (process_vm_writev/readv), which the kernel allows only where ptrace would be allowed. The rkey
 * carries the region's bounds: an access outside fails with RVX_ERR_REMOTE_ACCESS and touches
 * nothing, as a NIC would refuse it.
 *
 * Messages. Each worker owns a mailbox (one memfd): for every possible sender, two
 * single-producer/single-consumer rings of 64-byte slots, one for requests and one for replies.
 * A sender's rings sit at its slot: its rank here, where every rank of the job is a peer; in a
 * pair build (tl/pair.h) its index among the ranks of its node, so that the mailbox grows with
 * the node, not the job.
 * A frame is an 8-byte header {stamp:32, len:16, info:16} followed by `len` bytes, padded to whole
 * slots. The sender writes the body, then the header with one release store; the stamp is the
 * ring position + 1, so a slot left from an earlier lap never looks new. The receiver reads the
 * header with an acquire load, hands the body to the protocol, and publishes its position in the
 * ring's control line, which the sender reads only when its cached copy says the ring is full. No
 * locks and no system calls on this path. A frame never wraps: if it would cross the end of the
 * ring, a skip frame fills the rest and the frame starts at slot 0.
 *
 * Its files, each including only those above it (and decl.h):
 *   shm/decl.h   constants of the mailbox and rings, the types, the receive upcall, the one
 *                cold prototype used ahead of its file
 *   shm/mem.h    memfds and mapping a peer's; the context and registrations; regions and keys
 *   shm/ring.h   a mailbox's rings, the frame header; claim, publish and the zero-copy send
 *                (hot); the consumer and the wait for room (cold)
 *   shm/rma.h    put, get and atomics on a mapping (hot); cross-memory attach, refusals (cold)
 *   shm/iface.h  the interface, address, wire-up, endpoints, liveness, progress and flush; the
 *                hooks a pair (tl/pair.h) reads of shm */
#ifndef RVX_TL_SHM_H
#define RVX_TL_SHM_H

#include "shm/decl.h"
#include "shm/mem.h"
#include "shm/ring.h"
#include "shm/rma.h"
#include "shm/iface.h"

#endif /* RVX_TL_SHM_H */
