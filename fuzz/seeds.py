#!/usr/bin/env python3
"""fuzz/seeds.py: the seed inputs of fuzz/corpus/<harness>/seed-*, as programs of fuzz/rx.c's
operations that drive each rendezvous protocol through its states (RTS, RTR/CTS/KEY, DATA,
ATS/FIN), eager messages of one and of several fragments, active messages and keys; on shm with
frames of our own loopback sends changed at the head of the ring, on rc_mlx5 with our own SENDs
looped back by the harness's adapter. Run from the repository root: python3 fuzz/seeds.py"""
import os, struct

RNDV = ["get", "put", "am", "pipeline"]
SEND, RECV, PROG, CANCEL, PROBE, AM, KEY = 2, 3, 4, 5, 6, 7, 8

def send(k, tag): return bytes([SEND, k, tag])
def recv(k, tag, m=1): return bytes([RECV, k, m, tag])
def prog(n=7): return bytes([PROG, n])
def tl(sub, *rest): return bytes([(sub << 4) | 9]) + bytes(rest)

def shm_seeds():
    s = {}
    for k in (8, 9, 10, 11):  # eager of several fragments, and the rendezvous sizes
        s["send_recv_%d" % k] = send(k, 5) + recv(11, 5) + prog() * 6
        s["recv_send_%d" % k] = recv(11, 6) + send(k, 6) + prog() * 6
        s["truncated_%d" % k] = send(k, 7) + recv(2, 7) + prog() * 6
        # change a byte of each frame as it reaches the head of each ring, between steps
        body = send(k, 8) + recv(11, 8)
        for i in range(8):
            body += tl(1, i & 1, i * 5, 0, 0x41) + prog(0)
        s["mutate_%d" % k] = body
        body = send(k, 9) + recv(11, 9)
        for i in range(6):
            body += tl(2, i & 1, i, 0x10, 0) + prog(0)
        s["relen_%d" % k] = body
    s["am"] = bytes([AM, 0x03, 0, 0]) + bytes([AM, 0x15, 0x40, 0]) + bytes([AM, 0x21, 0x10, 0, 8, 0]) + prog() * 3
    s["key"] = bytes([KEY, 0, 3, 0x20, 0, 0, 0, 0, 64, 0]) + bytes([KEY, 4, 0, 0, 0, 0, 0, 0, 64, 0])
    s["raw_header"] = send(2, 1) + tl(0, 0, 0, 0, 0, 0, 16, 0, 1, 0x40) + prog()
    s["probe_cancel"] = send(10, 3) + prog() + bytes([PROBE, 3, 1]) + recv(11, 4) + bytes([CANCEL, 0]) + prog()
    return s

def rc_seeds():
    s = {}
    credit = tl(2, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0)
    for k in (8, 9, 10, 11):
        body = credit + send(k, 5) + recv(11, 5)
        for i in range(8):
            body += tl(0) + tl(1, i, 0, 0, 0)
        s["loop_%d" % k] = body + tl(0) + prog()
        body = credit + recv(11, 6) + send(k, 6)
        for i in range(8):
            body += tl(0) + tl(1, 0x80 | i, 0x20, i * 3, 0)
        s["loop_mutated_%d" % k] = body
        s["fail_%d" % k] = credit + send(k, 7) + recv(11, 7) + tl(0) + tl(1, 0, 0, 0, 0) + tl(3, 0x22) + prog()
    s["resp_err"] = credit + tl(4, 0, 0, 0x15) + prog()
    s["am"] = credit + bytes([AM, 0x03, 0, 0]) + bytes([AM, 0x15, 0x40, 0]) + tl(0) + tl(1, 0, 0, 0, 0) + tl(1, 1, 0, 0, 0)
    s["key"] = credit + bytes([KEY, 0, 3, 0x20, 0, 0, 0, 0, 64, 0]) + tl(0)
    s["no_credit"] = send(9, 1) + send(2, 2) + tl(0) + tl(2, 0, 4) + prog() + tl(0)
    return s

def dc_seeds():
    # no credit word to give: the claims are fetch-and-adds on the control region, which the
    # harness's adapter executes; tl(2, which, ...) writes a control word as a peer would, tl(6)
    # sets the prefix of the input's frames
    s = {}
    for k in (8, 9, 10, 11):
        body = send(k, 5) + recv(11, 5)
        for i in range(10):
            body += tl(0) + tl(1, i, 0, 0, 0)
        s["loop_%d" % k] = body + tl(0) + prog()
        body = recv(11, 6) + send(k, 6)
        for i in range(10):
            body += tl(0) + tl(1, 0x80 | i, 0x20, i * 3, 0)
        s["loop_mutated_%d" % k] = body
        s["fail_%d" % k] = send(k, 7) + recv(11, 7) + tl(0) + tl(1, 0, 0, 0, 0) + tl(3, 1, 0x13) + prog()
    s["resp_err"] = tl(4, 0x15) + prog()
    s["am"] = bytes([AM, 0x03, 0, 0]) + bytes([AM, 0x15, 0x40, 0]) + tl(0) + tl(1, 0, 0, 0, 0) + tl(1, 1, 0, 0, 0)
    s["key"] = bytes([KEY, 0, 3, 0x20, 0, 0, 0, 0, 64, 0]) + tl(0)
    # a hostile peer's grants: an absurd pool, a report of more frames than we sent, then sends
    s["absurd_pool"] = tl(2, 0, 1) + struct.pack("<Q", 1 << 63) + send(2, 1) + send(9, 2) + tl(0) + prog()
    s["absurd_report"] = send(2, 1) + tl(0) + tl(2, 1, 1) + struct.pack("<Q", 0x7ffffff0) + send(2, 2) + tl(0) + prog()
    s["report_prefix"] = send(2, 1) + tl(0) + tl(6, 0, 1, 1, 0xff, 0xff, 0xff, 0x7f) + bytes([0, 0, 2, 0, 0, 0, 0]) + tl(0) + prog()
    s["stray_rank"] = tl(6, 1, 5, 0, 0, 0, 1, 0, 0, 0, 0) + bytes([0, 0, 2, 0, 0, 0, 0]) + prog()
    return s

def pair_seeds(net_credit=b""):
    # the pair's loopback endpoint is on the node (shm); tl(8, 1) moves it off the node (the
    # adapter's path), tl(8, 0) makes the input's frames arrive through the adapter; tl(0, op, ...)
    # is an adapter operation (dc_seeds' tl(op, ...)), tl(5..7, ...) shm's (shm_seeds' tl(0..2))
    s = {}
    def nic(op, *rest): return tl(0, op, *rest)
    # rc_mlx5's credits come from the credit word the peer writes (nic op 2), dc_mlx5's by claims
    off = tl(8, 1) + (nic(2, 1, *([0xff] * 6), 0, 0) if net_credit else b"")
    for k in (8, 9, 10, 11):
        s["shm_%d" % k] = send(k, 5) + recv(11, 5) + prog() * 6
        body = off + send(k, 6) + recv(11, 6)
        for i in range(10):
            body += nic(0) + nic(1, i, 0, 0, 0)
        s["net_%d" % k] = body + nic(0) + prog()
        body = send(k, 7) + recv(11, 7) + prog(1) + off
        for i in range(10):
            body += nic(0) + nic(1, i, 0, 0, 0) + prog(1)
        s["switch_%d" % k] = body
        body = send(k, 8) + recv(11, 8)
        for i in range(8):
            body += tl(6, i & 1, i * 5, 0, 0x41) + prog(0)
        s["shm_mutate_%d" % k] = body
    s["net_frames"] = tl(8, 0) + send(2, 1) + bytes([0, 0, 0x10, 0, 8, 0, 0]) + bytes(8) + prog()
    s["am_both"] = bytes([AM, 0x03, 0, 0]) + off + bytes([AM, 0x15, 0x40, 0]) + nic(0) + nic(1, 0, 0, 0, 0) + prog()
    s["key_both"] = bytes([KEY, 0, 3, 0x20, 0, 0, 0, 0, 64, 0]) + off + bytes([KEY, 4, 0, 0, 0, 0, 0, 0, 64, 0]) + nic(0)
    return s

def write(name, seeds):
    d = os.path.join("fuzz", "corpus", name)
    os.makedirs(d, exist_ok=True)
    for k, v in seeds.items():
        with open(os.path.join(d, "seed-" + k), "wb") as f:
            f.write(v)

for r in RNDV:
    write("rx_shm_" + r, shm_seeds())
    write("rx_rc_" + r, rc_seeds())
    write("rx_dc_" + r, dc_seeds())
    write("rx_pair_dc_" + r, pair_seeds())
    write("rx_pair_rc_" + r, pair_seeds(net_credit=b"rc"))
# wire: a valid key of ours (byte 0 = 2: changed nowhere), a key with its length stretched, an
# address record of this job for each process choice
key = {"ours": bytes([2]), "stretched": bytes([2, 16, 0xff, 17, 0xff]), "raw": bytes([0]) + bytes(40)}
write("wire_rc", key)
addr = dict(key)
for sel in range(0, 64, 3):
    addr["addr_%d" % sel] = bytes([1 | sel << 1]) + struct.pack("<QQiiii", 0x7276785348, 0, 0, 0, 1, 0)
write("wire_shm", addr)
# dc: a job of 1-8 ranks (byte 1: size - 1, bit 3 RoCE) with records of this shape: control
# region, DCT number, LID or GID's low half, GID's high half, magic, link layer
MLX5_MAGIC = 0x7276784d4c58
def dc_rec(dctn, lid=1, roce=0, magic=MLX5_MAGIC, hi=b"\xfe\x80" + bytes(6)):
    return struct.pack("<QII", 0x1000, 0x55, dctn) + struct.pack("<H", lid) + bytes(6) + hi + struct.pack("<QB", magic, roce) + bytes(7)
dc = dict(key)
dc["addr_one"] = bytes([1, 0]) + dc_rec(0x100)
dc["addr_four"] = bytes([1, 3]) + b"".join(dc_rec(0x100 + r) for r in range(4))
dc["addr_bad_magic"] = bytes([1, 1]) + dc_rec(0x100) + dc_rec(0x101, magic=1)
dc["addr_big_dctn"] = bytes([1, 1]) + dc_rec(0x100) + dc_rec(0x1000000)
dc["addr_roce_shared"] = bytes([1, 8 | 2]) + b"".join(dc_rec(0x100 + r, roce=1) for r in range(3))
dc["addr_roce_mixed"] = bytes([1, 8 | 2]) + b"".join(dc_rec(0x100 + r, roce=1, hi=bytes([r]) * 8) for r in range(3))
write("wire_dc", dc)
# the pair: node number and pad, shm's record (magic, mailbox length, pid, fd, slot, slots), then
# the network's (dc's record above; rc's: only the node check reads the records)
def pair_rec(node, slot, nslots, net):
    shm = struct.pack("<QQiiii", 0x7276785348, 0, 0, 0, nslots, slot)
    return struct.pack("<ii", node, 0) + shm + net
pair = dict(key)
pair["node_two"] = bytes([1, 1]) + pair_rec(0, 0, 1, dc_rec(0x100)) + pair_rec(1, 0, 1, dc_rec(0x101))
pair["node_clash"] = bytes([1, 2]) + pair_rec(0, 0, 1, dc_rec(0x100)) + pair_rec(0, 0, 1, dc_rec(0x101)) + pair_rec(1, 0, 1, dc_rec(0x102))
pair["node_slot"] = bytes([1, 1]) + pair_rec(0, 0, 1, dc_rec(0x100)) + pair_rec(0, 5, 1, dc_rec(0x101))
write("wire_pair_rc", pair)
write("wire_pair_dc", pair)
# sim_wqe: a NOP, an 8-byte inline RDMA WRITE, a SEND with a data segment (patched to a region)
def ctrl(op, ds, ce=8): return struct.pack(">IIBBBBI", op, 0x001234 << 8 | ds, 0, 0, 0, ce, 0)
sim = {
    "nop": bytes([3, 0, 0, 0, 0, 1, 0, 0, 0, 1]) + ctrl(0x00, 1) + bytes(48),
    "write8": bytes([3, 0, 0, 0, 0, 1, 0, 0, 0, 1]) + ctrl(0x08, 3) + struct.pack(">QII", 0x1000, 0x155a, 0)
              + struct.pack(">I", 8 | 0x80000000) + bytes(8) + bytes(4),
    "send_ptr": bytes([3, 0, 0, 0, 0, 1, 0, 0, 0, 3]) + ctrl(0x0a, 2) + struct.pack(">IIQ", 64, 0, 0) + bytes(32),
    "ud": bytes([3, 0, 0, 0, 0, 2, 0, 0, 0, 0x81]) + ctrl(0x0a, 5) + bytes(112),
}
write("sim_wqe", sim)
