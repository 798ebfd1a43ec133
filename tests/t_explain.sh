#!/usr/bin/env bash
# make explain's annotation still covers the code, on rc_mlx5 (build/bench/explain_rc) and
# dc_mlx5 (build/bench/explain_dc): every purpose of the 8-byte put path has at least one
# instruction (dc's address vector too), the flush and progress paths show their checks, the CQ
# poll its CQE owner check and consumer index; the batch of 16 loads and syncs its copy of the
# queue's state, stores WQEs and rings once (doorbell record and doorbell write); the blocking get
# and fetching add (in line or in their .cold part) check the fetch path, use the fetch slot, wait
# for the CQE, match it and copy the answer; and almost nothing is "unclassified" (a re-cut of the
# transport files that the purpose table in tools/explain.sh no longer recognises fails here).
# The per-purpose counts must add up to each function's total, in both tables. Each binary also
# runs on rvxsim when it is built: the code explained must be code that works.
set -u
cd "$(dirname "$0")/.."
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# cell <table> <function> <purpose>: the table's cell (columns named in its header line), 0 if none
cell() {
  awk -v fn="$2" -v p="$3" '
    NR == 1 { ncol = NF - 1; for (i = 2; i <= NF; i++) if ($i == fn) col = i - 1; next }
    {
      name = $1; for (i = 2; i <= NF - ncol; i++) name = name " " $i
      if (name == p && col) { print $(NF - ncol + col); found = 1 }
    }
    END { if (!found) print 0 }' <<<"$1"
}
# has <table> <function>: the function has a column
has() { head -1 <<<"$1" | tr -s ' ' '\n' | grep -qx "$2"; }

check() { # binary transport
  local bin=$1 tl=$2 out table cold fn p n total sum both
  [ -x "$bin" ] || { fail "$bin not built (make $bin)"; return; }
  if [ -e build/sim/libibverbs.so.1 ]; then
    env LD_LIBRARY_PATH=build/sim RVXSIM_STRICT=1 timeout 600 "$bin" >/dev/null
    case $? in 0) ;; 77) echo "note: $bin found no device";; *) fail "$bin: its own run failed";; esac
  fi
  out=$(tools/explain.sh "$bin") || { fail "tools/explain.sh $bin failed"; echo "$out" | tail -20; return; }
  table=$(awk '/^== instructions per purpose$/ { on = 1; next } on && /^\(/ { exit } on' <<<"$out")
  cold=$(awk '/^== instructions per purpose, out-of-line parts/ { on = 1; next } on && !NF { exit } on' <<<"$out")
  [ -n "$table" ] || { fail "$tl: no summary table"; echo "$out" | tail -20; return; }
  echo "== $tl"
  echo "$table"
  [ -n "$cold" ] && { echo "-- .cold parts"; echo "$cold"; }

  need() { # function purpose minimum: in the function's own code
    n=$(cell "$table" "$1" "$2")
    [ "$n" -ge "$3" ] || fail "$tl $1: '$2' has $n instructions, expected at least $3"
  }
  need_any() { # function purpose minimum: in the function or its .cold part
    n=$(( $(cell "$table" "$1" "$2") + $(cell "$cold" "$1.cold" "$2") ))
    [ "$n" -ge "$3" ] || fail "$tl $1 (with .cold): '$2' has $n instructions, expected at least $3"
  }
  most() { # table function purpose maximum
    n=$(cell "$1" "$2" "$3")
    [ "$n" -le "$4" ] || fail "$tl $2: '$3' has $n instructions, at most $4 allowed"
  }

  for fn in put8 batch16 flush progress get8 amo_fadd8; do
    has "$table" $fn || fail "$tl: no column for $fn (rvx_explain_$fn missing?)"
  done
  for p in "limit check" "producer index" "ctrl segment" "raddr segment" \
           "inline data" "barrier" "doorbell record" "BlueFlame copy"; do
    need put8 "$p" 1
  done
  [ "$tl" = dc ] && need put8 "address vector" 1
  need flush "nothing-to-do check" 1
  if [ "$tl" = rc ]; then  # rc's flush finds the last signaled WQE's CQE in line; dc's goes out of line
    need flush "CQE owner check" 1
    need flush "completion match" 1
  fi
  need progress "CQE owner check" 1
  need progress "nothing-to-do check" 1
  for fn in put8 flush progress; do most "$table" $fn unclassified 2; done

  for p in "batch state load" "batch state sync" "ctrl segment" "raddr segment" "inline data" \
           "doorbell record" "doorbell write"; do
    need batch16 "$p" 1
  done
  need batch16 "WQE store" 4   # one WQEBB is four 16-byte stores
  [ "$tl" = dc ] && need batch16 "address vector" 1

  for fn in get8 amo_fadd8; do
    for p in "fetch-path check" "fetch slot" "CQE wait" "completion match" "consumer index" \
             "answer copy" "doorbell record"; do
      need_any $fn "$p" 1
    done
    [ "$tl" = dc ] && need_any $fn "address vector" 1
  done

  if has "$table" poll; then
    need poll "CQE owner check" 1
    need poll "consumer index" 1
    most "$table" poll unclassified $(( $(cell "$table" poll total) / 10 ))
  fi
  # the new functions (and every .cold part): at most 5% unclassified
  for fn in batch16 get8 amo_fadd8; do
    most "$table" $fn unclassified $(( $(cell "$table" $fn total) / 20 ))
  done
  for fn in $(head -1 <<<"$cold" | cut -c25-); do
    most "$cold" $fn unclassified $(( $(cell "$cold" $fn total) / 20 ))
  done

  # the groups add up to the totals, in both tables
  for both in table cold; do
    local t=${!both}
    [ -n "$t" ] || continue
    for fn in $(head -1 <<<"$t" | cut -c25-); do
      sum=$(awk -v fn="$fn" 'NR == 1 { ncol = NF - 1; for (i = 2; i <= NF; i++) if ($i == fn) col = i - 1; next }
                             $1 != "total" && $0 !~ /^alignment padding/ { s += $(NF - ncol + col) }
                             END { print s + 0 }' <<<"$t")
      total=$(cell "$t" "$fn" total)
      if [ "$sum" != "$total" ] || [ "$total" -eq 0 ]; then
        fail "$tl $fn: the purposes add up to $sum, the total is $total"
      fi
    done
  done
}

check build/bench/explain_rc rc
check build/bench/explain_dc dc
[ $fails -eq 0 ] && echo "ok: every purpose of the put, batch and fetch paths is annotated on rc_mlx5 and dc_mlx5; nothing unclassified beyond the allowance"
[ $fails -eq 0 ]
