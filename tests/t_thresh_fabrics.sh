#!/usr/bin/env bash
# The compile-time threshold (RVX_RNDV_THRESH_BYTES) against rvx_thresh_compute() for every fabric
# header in include/rvx/fabric/ and every rendezvous protocol (rrc 0 for AM, 1 for GET, PUT and
# PIPELINE): tests/t_thresh.c is built once per combination and run with --build. Also: the value
# is folded into the code (no 128-bit division call even at -O0), it is a C++17 constant too, a
# pinned RVX_RNDV_THRESH wins, and a fabric outside the model's ranges is refused at compile time.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
CC=${CC:-cc}
fails=0 n=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

build_run() { # name, compiler and flags...
  local name=$1; shift
  n=$((n + 1))
  rm -f "$tmp/t"
  if ! out=$("$@" -O2 -Wall -Wextra -Werror -Iinclude -Itests tests/t_thresh.c -o "$tmp/t" 2>&1); then
    fail "$name: build: $*"; echo "$out" | head -8; return
  fi
  if ! out=$("$tmp/t" --build 2>&1); then fail "$name"; echo "$out" | head -8; return; fi
  echo "$name: $(echo "$out" | grep '^fabric')"
}

for h in include/rvx/fabric/*.h; do
  f=$(basename "$h" .h)
  for r in GET PUT AM PIPELINE; do
    build_run "$f/$r" "$CC" -std=c11 -DRVX_FABRIC="<rvx/fabric/$f.h>" -DRVX_RNDV=RVX_RNDV_$r
  done
  build_run "$f/GET c++17" g++ -x c++ -std=c++17 -DRVX_FABRIC="<rvx/fabric/$f.h>"
  # folded: the threshold is an immediate, no call (e.g. __divti3) even without optimization
  for o in -O0 -O2; do
    n=$((n + 1))
    printf '#include <rvx/proto/thresh.h>\nint rvx_t_big(size_t len) { return len >= RVX_RNDV_THRESH_BYTES; }\n' >"$tmp/f.c"
    if ! "$CC" -std=c11 $o -Iinclude -DRVX_FABRIC="<rvx/fabric/$f.h>" -S -o "$tmp/f.s" "$tmp/f.c" 2>"$tmp/err"; then
      fail "$f $o: does not compile"; head -5 "$tmp/err"
    elif grep -Eq '\b(call|bl|jmp)\b.*(div|mod)' "$tmp/f.s"; then
      fail "$f $o: the threshold is computed at run time"; grep -E 'call|div' "$tmp/f.s" | head -3
    fi
  done
done

# a pinned threshold wins over the model
build_run "pinned 12345" "$CC" -std=c11 -DRVX_RNDV_THRESH=12345
n=$((n + 1)); "$tmp/t" --build | grep -q 'RVX_RNDV_THRESH_BYTES 12345$' || fail "RVX_RNDV_THRESH=12345 not used"

# a fabric whose curves do not meet (d = 1, AM, one lane: same slope) gets the fallback
cat >"$tmp/flat.h" <<'EOF'
#define RVX_FAB_NAME "flat"
#define RVX_FAB_LATENCY_NS 100
#define RVX_FAB_OVERHEAD_NS 20
#define RVX_FAB_BW_MBS 8000
#define RVX_FAB_BCOPY_BW_MBS 5000
#define RVX_FAB_REG_OVERHEAD_NS 0
#define RVX_FAB_REG_GROWTH_NS_PER_KB 0
#define RVX_FAB_LANES 1
#define RVX_FAB_RNDV_PERF_DIFF_PCT 0
#define RVX_FAB_PUT_BCOPY_MAX 8192
EOF
build_run "flat/AM fallback 777" "$CC" -std=c11 -DRVX_FABRIC="\"$tmp/flat.h\"" -DRVX_RNDV=RVX_RNDV_AM \
  -DRVX_RNDV_THRESH_FALLBACK=777
n=$((n + 1)); "$tmp/t" --build | grep -q 'RVX_RNDV_THRESH_BYTES 777$' || fail "fallback 777 not used for a flat fabric"

# outside the ranges the 128-bit form is exact for: refused with a message
sed 's/RVX_FAB_LANES 1/RVX_FAB_LANES 65/' "$tmp/flat.h" >"$tmp/wide.h"
n=$((n + 1))
if out=$("$CC" -std=c11 -Iinclude -DRVX_FABRIC="\"$tmp/wide.h\"" -fsyntax-only -x c - <<<'#include <rvx/proto/thresh.h>' 2>&1); then
  fail "a fabric with 65 lanes compiled"
else
  echo "$out" | grep -q 'RVX_FAB_LANES must be at most 64' || { fail "65 lanes: wrong message"; echo "$out" | head -3; }
fi

n=$((n + 1))
if out=$("$CC" -std=c11 -Iinclude -DRVX_RNDV_THRESH_FALLBACK=0 -fsyntax-only -x c - <<<'#include <rvx/proto/thresh.h>' 2>&1); then
  fail "RVX_RNDV_THRESH_FALLBACK=0 compiled"
else
  echo "$out" | grep -q 'RVX_RNDV_THRESH_FALLBACK must be a positive' || { fail "fallback 0: wrong message"; echo "$out" | head -3; }
fi

# the tool prints the same thresholds as the test program, and draws a PNG when gnuplot is there
n=$((n + 1))
f=ib_hdr
if ! "$CC" -std=c11 -O2 -Wall -Wextra -Werror -Iinclude -DRVX_FABRIC="<rvx/fabric/$f.h>" \
     tools/rvxthresh.c -o "$tmp/rvxthresh" -lm 2>"$tmp/err"; then
  fail "rvxthresh does not build"; head -5 "$tmp/err"
else
  "$CC" -std=c11 -O2 -Iinclude -Itests -DRVX_FABRIC="<rvx/fabric/$f.h>" tests/t_thresh.c -o "$tmp/t"
  want=$("$tmp/t" --build | sed -n 's/.*rrc=0 \([0-9]*\), rrc=1 \([0-9]*\);.*/\1 \2/p')
  got=$("$tmp/rvxthresh" | awk '/threshold, AM/ {a=$(NF-1)} /threshold, RMA/ {r=$(NF-1)} END {print a, r}')
  [ -n "$want" ] && [ "$want" = "$got" ] || fail "rvxthresh says '$got', t_thresh says '$want'"
  if command -v gnuplot >/dev/null; then
    n=$((n + 1))
    "$tmp/rvxthresh" --png "$tmp/x.png" >/dev/null &&
      [ "$(head -c 8 "$tmp/x.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] || fail "rvxthresh --png"
  fi
fi

echo "$((n - fails)) of $n checks passed"
[ $fails -eq 0 ]
