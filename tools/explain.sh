#!/usr/bin/env bash
# tools/explain.sh: the machine code of rc_mlx5's put, flush and progress paths, each instruction
# annotated with the source line it comes from and grouped by what it is for (ctrl segment, raddr
# segment, inline data, WQE store, producer index, doorbell record, barrier, BlueFlame copy, CQE owner check,
# consumer index, moderation, queue-full check, ...). For teaching: where the instructions of an
# 8-byte put go. `make explain` builds build/bench/explain_rc (bench/explain_rc.c: noinline
# wrappers, -O2 -g) and runs this on it.
#
# How: objdump -d -l --inlines gives, per instruction, the chain of source lines it was inlined
# through. The lines of the transport's headers (include/rvx/tl/: rc_mlx5.h, rc/, mlx5/) in that
# chain (innermost first; then other rvx headers) are matched against the table below; the first pattern that matches a line's text
# names the purpose. A line that serves two purposes counts under the first. A line that only
# returns is weak: if a line further out names a purpose, that one wins (so the instructions of a
# small helper count for what its caller uses it for).
#
# Usage: tools/explain.sh [binary]      (default build/bench/explain_rc)
# Prints the groups per function, then a table of instructions per purpose and function.
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
_mm_setzero_si128|memset\(	inline data
ep->c~|->ifc~|&w->iface|~rvx__tl_progress~|~rvx__tl_ep_flush~|~rvx_progress~|~rvx_ep_flush_nb~	connection lookup
pi_limit|->room~|RVX__RC_NEED|wait_room	queue-full check
sig_left|RVX__MLX5_CE|mark_sig|rvx__mlx5_moderate\(|set_fence|->fence	moderation
_barrier\(|rvx_wc_start|rvx_wc_flush	barrier
op_own|cqe_ready|cqe_req_ok|cq->(owner|cnt|buf|shift|mask)|OWNER_BIT|OP_INVALID|REQ_OK_MASK|MLX5_CQE_INVALID|MLX5_CQE_REQ~|rvx__mlx5_cqe\(	CQE owner check
cq->dbrec|cq->ci|cq\.ci|cq_update_ci	consumer index
dbrec	doorbell record
~reg~|bf->|->bf~|~bf~|flip	BlueFlame copy
rvx__mlx5_post_bb|bb_store\(wqe	WQE store
ctrl_w8|ctrl_word|ctrl_lo|rvx__mlx5_set_ctrl\(|q\[0\] =|opmod|MLX5_OPCODE|qpn8	ctrl segment
raddr|rkey|q\[1\] =|wqe \+ 16	raddr segment
INLINE_SEG|q\[[23]\] =|_mm_setzero_si128|wqe \+ (32|48)|rvx__mlx5_set_inline|~src~	inline data
->ci == |ci == pi|!ifc->outstanding|!ifc->nlive|def_head	nothing-to-do check
rvx__rc_retire|->ci =|->ci\+\+|ops\[|b_tail|bounce|outstanding|sig_out|o->sig|o->nbb|~start~|~end~	retire completed WQEs
->pi~|~pi~|sq->buf|sq->mask|rvx__mlx5_slot|~wqe =	producer index
nranks|idle|conns\[|wflush|r->status	worker flush
qpn|wqe_counter|last_sig|sop_drop|nops|flush_head|in_rx	completion match
opcode|syndrome|_ERR|RESP|rvx__rc_fail|failed|qpt_|QPT_HELLO|~who~|nrec|rx_frame|unknown|rvx__log|deliver|~n = 0|~n\+\+|continue	completion dispatch
_slow\(	out-of-line path
return	return value
RULES
)
export EXPLAIN_RULES
# Display order (the path an operation takes), then the rest.
order="queue-full check|moderation|producer index|ctrl segment|raddr segment|inline data|WQE store|barrier|doorbell record|BlueFlame copy|nothing-to-do check|connection lookup|CQE owner check|completion match|consumer index|retire completed WQEs|completion dispatch|worker flush|out-of-line path|return value|call and return|alignment padding|unclassified"

drain=$(nm "$bin" 2>/dev/null | awk '$3 ~ /^rvx__rc_drain/ { print $3; exit }')
fns=("put8 rvx_explain_put8 rvx_put(ep, &v, 8, raddr, rkey): an 8-byte put"
     "flush rvx_explain_flush rvx_ep_flush_nb(ep, req): flush, the completion present or nothing outstanding"
     "progress rvx_explain_progress rvx_progress(w): progress with nothing to do")
[ -n "$drain" ] && fns+=("poll $drain rvx__rc_drain: the out-of-line CQ poll that progress calls when a CQE is there")

counts=$(mktemp)
trap 'rm -f "$counts"' EXIT
for f in "${fns[@]}"; do
  read -r name sym desc <<<"$f"
  cold=$(objdump -d --no-show-raw-insn --disassemble="$sym.cold" "$bin" 2>/dev/null | grep -cE '^ +[0-9a-f]+:')
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
      if (setloc($0, 0)) { nf = 1; inblock = 1 }
      next
    }
    /^inlined by / {
      s = $0; sub(/^inlined by /, "", s); sub(/ \([A-Za-z0-9_.]+\)$/, "", s)
      if (!inblock) nf = 1                    # the same innermost line, its chain again
      if (setloc(s, nf)) nf++
      inblock = 1
      next
    }
    /^ +[0-9a-f]+:\t/ {
      inblock = 0
      addr = $1; sub(/:$/, "", addr)
      insn = $0; sub(/^ +[0-9a-f]+:\t/, "", insn); gsub(/\t/, " ", insn); insn = trim(insn)
      purpose = ""; text = ""; where = ""; weak = ""
      if (insn ~ /^(nop|xchg +%ax,%ax|cs nopw|data16)/) purpose = "alignment padding"
      # frames of the transport headers (include/rvx/tl/) first, innermost first; then the other rvx headers
      for (pass = 1; pass <= 2 && purpose == ""; pass++)
        for (i = 0; i < nf && purpose == ""; i++) {
          if (pass == 1 && F[i] !~ /rvx\/tl\//) continue
          if (pass == 2 && (F[i] !~ /include\/rvx\// || F[i] ~ /rvx\/tl\/|sys\/compiler\.h$/)) continue
          t = trim(srcline(F[i], L[i])); p = classify(t)
          if (p == "") continue
          if (p in WEAK) { if (weak == "") { weak = p; wt = t; ww = base(F[i]) ":" L[i] } continue }
          purpose = p; text = t; where = base(F[i]) ":" L[i]
        }
      if (purpose == "" && weak != "") { purpose = weak; text = wt; where = ww }
      if (purpose == "" && nf > 0 && F[0] ~ /explain_rc\.c$/) {
        purpose = "call and return"; where = base(F[0]) ":" L[0]; text = trim(srcline(F[0], L[0]))
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
done

# The table: instructions per purpose and function.
echo
echo "== instructions per purpose"
awk -F'\t' -v order="$order" '
  { C[$2, $1] = $3; if (!($1 in seen)) { seen[$1] = 1; fn[++nfn] = $1 } }
  END {
    no = split(order, ORD, "|"); ORD[++no] = "total"
    printf("%-24s", "purpose"); for (j = 1; j <= nfn; j++) printf(" %9s", fn[j]); printf("\n")
    for (o = 1; o <= no; o++) {
      p = ORD[o]; any = 0
      for (j = 1; j <= nfn; j++) if ((p, fn[j]) in C) any = 1
      if (!any) continue
      printf("%-24s", p)
      for (j = 1; j <= nfn; j++) printf(" %9d", ((p, fn[j]) in C) ? C[p, fn[j]] : 0)
      printf("\n")
    }
  }' "$counts"
echo "(alignment padding is never executed and is not in the totals; a line serving two purposes"
echo " counts under the first in the table of tools/explain.sh)"
