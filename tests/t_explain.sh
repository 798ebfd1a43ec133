#!/usr/bin/env bash
# make explain's annotation still covers the code: every purpose of the 8-byte put path has at
# least one instruction, the flush and progress paths show their CQE owner check, the CQ poll
# its consumer index, and almost nothing is "unclassified" (a re-cut of the transport files that the
# purpose table in tools/explain.sh no longer recognises fails here). The per-purpose counts
# must add up to each function's total.
set -u
cd "$(dirname "$0")/.."
bin=build/bench/explain_rc
[ -x $bin ] || { echo "FAIL: $bin not built (make)"; exit 1; }
out=$(tools/explain.sh $bin) || { echo "FAIL: tools/explain.sh failed"; echo "$out"; exit 1; }
table=$(awk '/^== instructions per purpose/ { on = 1; next } on && /^\(/ { exit } on' <<<"$out")
[ -n "$table" ] || { echo "FAIL: no summary table"; echo "$out" | tail -20; exit 1; }
echo "$table"

fails=0
# count <function> <purpose>: the table's cell (columns named in its header line)
count() {
  awk -v fn="$1" -v p="$2" '
    NR == 1 { ncol = NF - 1; for (i = 2; i <= NF; i++) if ($i == fn) col = i - 1; next }
    {
      name = $1; for (i = 2; i <= NF - ncol; i++) name = name " " $i
      if (name == p && col) { print $(NF - ncol + col); found = 1 }
    }
    END { if (!found) print 0 }' <<<"$table"
}
need() { # function purpose minimum
  local n; n=$(count "$1" "$2")
  if [ "$n" -lt "$3" ]; then echo "FAIL: $1: '$2' has $n instructions, expected at least $3"; fails=$((fails + 1)); fi
}
most() { # function purpose maximum
  local n; n=$(count "$1" "$2")
  if [ "$n" -gt "$3" ]; then echo "FAIL: $1: '$2' has $n instructions, at most $3 allowed"; fails=$((fails + 1)); fi
}

for p in "queue-full check" "moderation" "producer index" "ctrl segment" "raddr segment" \
         "inline data" "barrier" "doorbell record" "BlueFlame copy"; do
  need put8 "$p" 1
done
need flush "CQE owner check" 1
need flush "completion match" 1
need flush "nothing-to-do check" 1
need progress "CQE owner check" 1
need progress "nothing-to-do check" 1
for fn in put8 flush progress; do most $fn unclassified 2; done
if grep -q ' poll$' <<<"$(head -1 <<<"$table")"; then
  need poll "CQE owner check" 1
  need poll "consumer index" 1
  total=$(count poll total)
  most poll unclassified $((total / 10))
fi
# the groups add up to the totals
for fn in put8 flush progress; do
  sum=$(awk -v fn="$fn" 'NR == 1 { ncol = NF - 1; for (i = 2; i <= NF; i++) if ($i == fn) col = i - 1; next }
                        $1 != "total" && $0 !~ /^alignment padding/ { s += $(NF - ncol + col) }
                        END { print s + 0 }' <<<"$table")
  total=$(count $fn total)
  if [ "$sum" != "$total" ] || [ "$total" -eq 0 ]; then
    echo "FAIL: $fn: the purposes add up to $sum, the total is $total"; fails=$((fails + 1))
  fi
done
[ $fails -eq 0 ] && echo "ok: every purpose of the put path is annotated; nothing unclassified beyond the allowance"
[ $fails -eq 0 ]
