#!/usr/bin/env bash
# tools/explain.sh: the machine code of an mlx5 transport's hot paths (rc_mlx5 or dc_mlx5: an
# 8-byte put, a batch of 16, flush, progress, a blocking 8-byte get, a blocking fetching add),
# each instruction annotated with the source line it comes from and grouped by what it is for
# (ctrl segment, address vector, raddr segment, inline data, WQE store, producer index, doorbell
# record, barrier, BlueFlame copy, batch state load/sync, fetch slot, CQE wait, completion match,
# answer copy, ...). For teaching: where the instructions of an operation go. `make explain`
# builds build/bench/explain_rc and explain_dc (bench/explain.c: noinline wrappers, -O2 -g) and
# runs this on each.
#
# How: objdump -d -l --inlines gives, per instruction, the chain of source lines it was inlined
# through. The lines of the transport's headers (include/rvx/tl/: rc_mlx5.h, dc_mlx5.h, rc/, dc/,
# mlx5/) in that chain (innermost first; then other rvx headers) are matched against the table
# below; the first pattern that matches a line's text names the purpose. A line that serves two
# purposes counts under the first. A line that only returns is weak: if a line further out names
# a purpose, that one wins (so the instructions of a small helper count for what its caller uses
# it for). Where objdump repeats a chain without its innermost line, that line is the last one
# seen with the same chain. push and pop, and moves of the stack pointer, are register saves
# whatever their line.
#
# The functions are the rvx_explain_* the binary has (nm), then the CQ poll progress calls
# out of line; each function's .cold part (what the compiler moved out of line: unlikely
# branches, and paths that call a cold function) is counted with it and classified after.
#
# Usage: tools/explain.sh [binary]      (default build/bench/explain_rc)
# Prints the groups per function and per .cold part, then a table of instructions per purpose and
# function, and one for the .cold parts.
set -u
cd "$(dirname "$0")/.."
bin=${1:-build/bench/explain_rc}
[ -x "$bin" ] || { echo "explain: $bin is not built (make explain)"; exit 1; }
command -v objdump >/dev/null || { echo "explain: objdump missing (make deps installs binutils)"; exit 1; }

# Purpose table: an extended regular expression on the source line's text, a tab, the purpose.
# First match wins, so the order matters. ~ stands for a word boundary.
EXPLAIN_RULES=$(cat <<'RULES'
^[{}]$	call and return
return rvx__tl_[a-z0-9_]+\(	return value
q\[[23]\] = _mm_setzero_si128|memset\(	inline data
~z = _mm_setzero_si128|bb\[[01]\]\.q\[	WQE store
~c = _mm_set_epi64x	ctrl segment
_gen\(	out-of-line path
rvx__mlx5_cq_await|fetch_ifc\)\((ep|q)\)->cq	CQE wait
tx\.head == RVX__MLX5_REC_NIL|tx\.flush_head|fetch_quiet|return !ep->(c->)?ifc->wflush|\(uintptr_t\)ifc->wflush|bs->lim - |b_head == d->b_tail|!c->failed &&|fetch_ok\(	fetch-path check
CQW_MASK|rvx__mlx5_cqw|next_op_own - 7|qpn8 << 24|~end = q->sq\.pi|~pi = end - nbb	completion match
sq_retired|last_sig_pi = end|sq\.ci = end|!q->sq\.hold	retire completed WQEs
memcpy\(dst, (slot|RVX__MLX5_NET\(fetch_slot\))	answer copy
fetch_slot|fs->dseg|_mm_cvtsi32_si128\(\(int\)rvx_htobe32\(len\)\)|bs->buf|bs->head|b_head|RVX__RC_BOUNCE_SEG|RVX_DC_BOUNCE_BYTES|chunk_lkey|\(uintptr_t\)slot	fetch slot
atomic\[|operands\[	atomic segment
ep->c~|->ifc~|ep->dci~|&w->iface|~rvx__tl_progress~|~rvx__tl_ep_flush~|~rvx_progress~|~rvx_ep_flush_nb~	connection lookup
b->(ep|q|buf|mask|fast|ctrl_w8) = |b->pi = [a-z]+->sq\.pi|_batch_reload|_batch_begin|\(ep_q\)|(~|_)q_fast	batch state load
rvx__mlx5_batch_sync|_batch_sync|batch_written|b->pi - b->q->sq\.pi|_batch_end\(	batch state sync
pi_limit|->room~|RVX__RC_NEED|wait_room|sq_room_for|sq_restop|pi - b->fast	limit check
sig_pi|RVX__MLX5_CE|mark_sig|rvx__mlx5_moderate\(|set_fence|->fence	moderation
_barrier\(|rvx_wc_start|rvx_wc_flush	barrier
cq->ci~|RVX_LIKELY\(ci & cq->mask\)|next_op_own \+=|cq_advance|cq_step|cq->owner = !!|&rvx__mlx5_cqe\(cq, ci\)	consumer index
op_own|cqe_ready|cqe_req_ok|cq->(owner|cnt|buf|shift|mask)|OWNER_BIT|OP_INVALID|REQ_OK_MASK|MLX5_CQE_INVALID|MLX5_CQE_REQ~|rvx__mlx5_cqe\(	CQE owner check
cq->dbrec|cq->ci|cq\.ci|cq_update_ci	consumer index
\*\(volatile uint64_t \*\)\(void \*\)reg = 	doorbell write
dbrec	doorbell record
~reg~|bf->|->bf~|~bf~|flip	BlueFlame copy
rvx__mlx5_post_bb|bb_store\(	WQE store
av_lo|key_be|RVX__DC_KEY|ep_av|~av~|dqp_dct|av_ds	address vector
ctrl_w8|ctrl_word|ctrl_lo|rvx__mlx5_set_ctrl\(|q\[0\] =|opmod|MLX5_OPCODE|qpn8|~ds = RVX__MLX5_DS|~nbb = RVX__MLX5_NBB	ctrl segment
raddr|rkey|q\[1\] =|wqe \+ 16	raddr segment
INLINE_SEG|q\[[23]\] =|_mm_setzero_si128|wqe \+ (32|48)|rvx__mlx5_set_inline|~src~	inline data
->ci == |ci == pi|sq\.ci == [a-z>.-]*sq\.pi|!ifc->outstanding|!ifc->nlive|def_head	nothing-to-do check
rvx__rc_retire|_req_ok\(|->ci =|->ci\+\+|ops\[|b_tail|bounce|outstanding|sig_out|o->sig|o->nbb|~start~|~end~	retire completed WQEs
->pi~|~pi~|sq->buf|sq->mask|rvx__mlx5_slot|~wqe =	producer index
nranks|idle|conns\[|wflush|r->status	worker flush
rvx__log\(|_req_err\(|srq_done|^if \(!d\)	completion dispatch
qpn|wqe_counter|last_sig|sop_drop|nops|flush_head|in_rx	completion match
opcode|syndrome|_ERR|RESP|rvx__rc_fail|failed|qpt_|QPT_HELLO|~who~|nrec|rx_frame|unknown|rvx__log|deliver|~n = 0|~n\+\+|continue	completion dispatch
_slow\(	out-of-line path
return	return value
RULES
)
export EXPLAIN_RULES
# Display order (the path an operation takes), then the rest.
order="connection lookup|batch state load|limit check|fetch-path check|moderation|producer index|ctrl segment|address vector|raddr segment|inline data|atomic segment|fetch slot|WQE store|barrier|doorbell record|BlueFlame copy|doorbell write|batch state sync|nothing-to-do check|CQE wait|CQE owner check|completion match|consumer index|retire completed WQEs|answer copy|completion dispatch|worker flush|out-of-line path|return value|register saves|call and return|loop of the wrapper|alignment padding|unclassified"

# The functions: the rvx_explain_* wrappers the binary has, in the order below (others after
# them), then the out-of-line CQ poll that progress calls when a CQE is there.
desc_put8="rvx_put(ep, &v, 8, raddr, rkey): an 8-byte put"
desc_batch16="rvx_batch_begin, 16 x rvx_batch_put of 8 bytes, rvx_batch_end: 16 puts, one doorbell"
desc_flush="rvx_ep_flush_nb(ep, req): flush, the completion present or nothing outstanding"
desc_progress="rvx_progress(w): progress with nothing to do"
desc_get8="rvx_get(ep, dst, 8, raddr, rkey, NULL): a blocking 8-byte get (READ, wait, copy)"
desc_amo_fadd8="rvx_atomic64(ep, RVX_AMO_ADD, 1, 0, raddr, rkey, &old, NULL): a blocking fetching add"
syms=$(nm "$bin" 2>/dev/null | awk '$2 ~ /^[Tt]$/ && $3 ~ /^rvx_explain_[a-z0-9_]+$/ { sub(/^rvx_explain_/, "", $3); print $3 }')
fns=()
for name in put8 batch16 flush progress get8 amo_fadd8 $(sort <<<"$syms"); do
  grep -qx "$name" <<<"$syms" || continue
  syms=$(grep -vx "$name" <<<"$syms")
  d=desc_$name
  fns+=("$name rvx_explain_$name ${!d:-rvx_explain_$name}")
done
[ ${#fns[@]} -gt 0 ] || { echo "explain: no rvx_explain_* function in $bin"; exit 1; }
drain=$(nm "$bin" 2>/dev/null | awk '$3 ~ /^rvx__(rc|dc)_drain/ { print $3; exit }')
if [ -n "$drain" ]; then   # a drain that is one jump to the poll (dc_mlx5): the poll itself
  poll=$(objdump -d --no-show-raw-insn --disassemble="$drain" "$bin" 2>/dev/null |
         awk '/^ +[0-9a-f]+:/ { n++; if ($2 == "jmp") t = $4 } END { if (n == 1) print t }' | tr -d '<>')
  [ -n "$poll" ] && drain=$poll
  fns+=("poll $drain ${drain%%.*}: the out-of-line CQ poll that progress calls when a CQE is there")
fi
echo "explain: $bin ($(strings -a "$bin" | grep -m1 -o 'tl=[a-z0-9_]*'))"

counts=$(mktemp)
coldcounts=$(mktemp)
trap 'rm -f "$counts" "$coldcounts"' EXIT
# explain_fn name symbol description cold-count counts-file: the groups of one function, its
# counts appended to the file
explain_fn() {
  local name=$1 sym=$2 desc=$3 cold=$4 counts=$5
  objdump -d -l --inlines --no-show-raw-insn --disassemble="$sym" "$bin" 2>/dev/null |
  awk -v name="$name" -v sym="$sym" -v desc="$desc" -v cold="$cold" -v order="$order" \
      -v counts="$counts" '
    function srcline(file, n,    l, k) {
      if (!(file in loaded)) {
        loaded[file] = 1; k = 0
        while ((getline l < file) > 0) { k++; SRC[file, k] = l }
        close(file)
      }
      return ((file, n) in SRC) ? SRC[file, n] : ""
    }
    function base(p) { sub(/.*\//, "", p); return p }
    function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
    function setloc(s, i,    p) {          # "path:line [(discriminator n)]" -> frame i
      sub(/ \(discriminator [0-9]+\)$/, "", s)
      p = match(s, /:[0-9]+$/)
      if (!p) return 0
      F[i] = substr(s, 1, p - 1); L[i] = substr(s, p + 1) + 0
      return 1
    }
    function classify(text,    i) {
      for (i = 1; i <= nr; i++) if (text ~ RX[i]) return PU[i]
      return ""
    }
    BEGIN {
      nr = split(ENVIRON["EXPLAIN_RULES"], rl, "\n")
      for (i = 1; i <= nr; i++) {
        split(rl[i], kv, "\t"); PU[i] = kv[2]; RX[i] = kv[1]
        gsub(/~/, "(^|$|[^A-Za-z0-9_])", RX[i])
      }
      WEAK["return value"] = 1
      no = split(order, ORD, "|")
      nf = 0; inblock = 0; total = 0
    }
    /^[0-9a-f]+ <.*>:$/ { next }
    /^[A-Za-z_][A-Za-z0-9_.]*\(\):$/ { next }
    /^\// {                                   # innermost location
      if (setloc($0, 0)) { nf = 1; inblock = 1; hdr = 1 }
      next
    }
    /^inlined by / {
      s = $0; sub(/^inlined by /, "", s); sub(/ \([A-Za-z0-9_.]+\)$/, "", s)
      if (!inblock) { nf = 1; hdr = 0 }       # a chain without its innermost line
      if (setloc(s, nf)) nf++
      inblock = 1
      next
    }
    /^ +[0-9a-f]+:\t/ {
      if (inblock) {                          # objdump printed a location for this one
        key = ""; for (i = 1; i < nf; i++) key = key F[i] ":" L[i] ";"
        if (hdr) LAST[key] = F[0] SUBSEP L[0]
        else if (key in LAST) { split(LAST[key], fl, SUBSEP); F[0] = fl[1]; L[0] = fl[2] + 0 }
        else { F[0] = ""; L[0] = 0 }
      }
      inblock = 0
      addr = $1; sub(/:$/, "", addr)
      insn = $0; sub(/^ +[0-9a-f]+:\t/, "", insn); gsub(/\t/, " ", insn); insn = trim(insn)
      purpose = ""; text = ""; where = ""; weak = ""
      if (insn ~ /^(nop|xchg +%ax,%ax|cs nopw|data16)/) purpose = "alignment padding"
      else if (insn ~ /^(push|pop) / || insn ~ /^(sub|add) +\$0x[0-9a-f]+,%rsp$/) purpose = "register saves"
      # frames of the transport headers (include/rvx/tl/) first, innermost first; then the other rvx headers
      for (pass = 1; pass <= 2 && purpose == ""; pass++)
        for (i = 0; i < nf && purpose == ""; i++) {
          if (pass == 1 && F[i] !~ /rvx\/tl\//) continue
          if (pass == 2 && (F[i] !~ /include\/rvx\// || F[i] ~ /rvx\/tl\/|sys\/compiler\.h$/)) continue
          if (F[i] == "") continue
          t = trim(srcline(F[i], L[i])); p = classify(t)
          if (p == "") continue
          if (p in WEAK) { if (weak == "") { weak = p; wt = t; ww = base(F[i]) ":" L[i] } continue }
          purpose = p; text = t; where = base(F[i]) ":" L[i]
        }
      if (purpose == "" && weak != "") { purpose = weak; text = wt; where = ww }
      if (purpose == "" && nf > 0 && F[0] ~ /bench\/(explain\.c|batch16\.h)$/) {  # lines of the wrapper itself
        where = base(F[0]) ":" L[0]; text = trim(srcline(F[0], L[0]))
        purpose = text ~ /^\*old = / ? "answer copy" : text ~ /^for |rvx_batch_put|st != RVX_OK/ ? "loop of the wrapper" : "call and return"
      }
      if (purpose == "") {
        purpose = "unclassified"
        for (i = 0; i < nf; i++) if (F[i] ~ /include\/rvx\//) { where = base(F[i]) ":" L[i]; text = trim(srcline(F[i], L[i])); break }
        if (where == "" && nf > 0) where = base(F[0]) ":" L[0]
      }
      if (length(text) > 64) text = substr(text, 1, 61) "..."
      n[purpose]++
      G[purpose, n[purpose]] = sprintf("  %6s  %-36s %-16s %s", addr, insn, where, text)
      if (purpose != "alignment padding") total++
      next
    }
    END {
      printf("\n== %s: %s\n   %s: %d instructions", name, desc, sym, total)
      if (cold > 0) printf(" (+ %d in %s.cold, out of line)", cold, sym)
      printf("\n")
      for (o = 1; o <= no; o++) {
        p = ORD[o]
        if (!(p in n)) continue
        printf("\n-- %s: %d\n", p, n[p])
        for (k = 1; k <= n[p]; k++) print G[p, k]
        print name "\t" p "\t" n[p] >> counts
      }
      print name "\ttotal\t" total >> counts
    }'
}

for f in "${fns[@]}"; do
  read -r name sym desc <<<"$f"
  cold=$(objdump -d --no-show-raw-insn --disassemble="$sym.cold" "$bin" 2>/dev/null | grep -cE '^ +[0-9a-f]+:')
  explain_fn "$name" "$sym" "$desc" "$cold" "$counts"
done
# The out-of-line parts (.cold): the branches the compiler judged unlikely, and the whole of a
# path that calls a cold function (the fetches' wait) when nothing else is left in line.
for f in "${fns[@]}"; do
  read -r name sym desc <<<"$f"
  nm "$bin" | grep -q " $sym\.cold$" || continue
  explain_fn "$name.cold" "$sym.cold" "the out-of-line part of $sym" 0 "$coldcounts"
done

# The tables: instructions per purpose and function.
table() {
  awk -F'\t' -v order="$order" '
    { C[$2, $1] = $3; if (!($1 in seen)) { seen[$1] = 1; fn[++nfn] = $1 } }
    END {
      no = split(order, ORD, "|"); ORD[++no] = "total"
      for (j = 1; j <= nfn; j++) W[j] = length(fn[j]) > 9 ? length(fn[j]) : 9
      printf("%-24s", "purpose"); for (j = 1; j <= nfn; j++) printf(" %*s", W[j], fn[j]); printf("\n")
      for (o = 1; o <= no; o++) {
        p = ORD[o]; any = 0
        for (j = 1; j <= nfn; j++) if ((p, fn[j]) in C) any = 1
        if (!any) continue
        printf("%-24s", p)
        for (j = 1; j <= nfn; j++) printf(" %*d", W[j], ((p, fn[j]) in C) ? C[p, fn[j]] : 0)
        printf("\n")
      }
    }' "$1"
}
echo
echo "== instructions per purpose"
table "$counts"
echo "(alignment padding is never executed and is not in the totals; a line serving two purposes"
echo " counts under the first in the table of tools/explain.sh)"
if [ -s "$coldcounts" ]; then
  echo
  echo "== instructions per purpose, out-of-line parts (.cold)"
  table "$coldcounts"
fi
