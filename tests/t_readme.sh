#!/usr/bin/env bash
# The documentation is true to the tree:
#  - README's program (its first C block) builds with -Wall -Wextra -Werror and runs on 3 ranks
#    over shm, and, built for rc_mlx5, on rvxsim;
#  - docs/life-of-a-put.md's program builds for rc_mlx5 and its run on rvxsim traces the WQEs,
#    doorbells and CQE the page decodes;
#  - every relative link in README.md and docs/*.md names a file that exists, and an anchor
#    (#name) names a heading of that file.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
first_c_block() { awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on' "$1"; }
CFLAGS="-std=c11 -O2 -Wall -Wextra -Werror -Iinclude"
RC="-DRVX_TL=RVX_TL_RC_MLX5"
sim=build/sim
[ -x build/bin/rvxrun ] || fail "build/bin/rvxrun is not built (make)"

# ---- README's program
first_c_block README.md > "$tmp/readme.c"
[ -s "$tmp/readme.c" ] || fail "no C block in README.md"
cc $CFLAGS -o "$tmp/readme" "$tmp/readme.c" || fail "README program does not build"
check_pongs() { # output, ranks
  local r
  for ((r = 0; r < $2; r++)); do
    grep -q "rank $r: pong from rank $(( (r + 1) % $2 ))" <<<"$1" || { echo "$1"; fail "rank $r output missing"; }
  done
}
out=$(build/bin/rvxrun -n 3 -t 60 "$tmp/readme" 2>&1) || { echo "$out"; fail "README program failed on shm"; }
check_pongs "$out" 3
echo "ok: the README program builds and runs on 3 ranks over shm"

have_sim=0
[ -e $sim/libibverbs.so.1 ] && [ -e $sim/libmlx5.so.1 ] && have_sim=1
if [ $have_sim = 1 ]; then
  cc $CFLAGS $RC -o "$tmp/readme_rc" "$tmp/readme.c" -libverbs -lmlx5 || fail "README program does not build for rc_mlx5"
  out=$(LD_LIBRARY_PATH=$sim build/bin/rvxrun -n 3 -t 120 "$tmp/readme_rc" 2>&1) ||
    { echo "$out"; fail "README program failed over rc_mlx5 on rvxsim"; }
  check_pongs "$out" 3
  echo "ok: the README program runs on 3 ranks over rc_mlx5 on rvxsim"
else
  echo "note: $sim not built, README's rc_mlx5 run and life-of-a-put's trace not checked"
fi

# ---- docs/life-of-a-put.md's program and the trace it decodes
doc=docs/life-of-a-put.md
first_c_block $doc > "$tmp/put.c"
[ -s "$tmp/put.c" ] || fail "no C block in $doc"
cc $CFLAGS $RC -o "$tmp/put" "$tmp/put.c" -libverbs -lmlx5 || fail "$doc's program does not build"
if [ $have_sim = 1 ]; then
  out=$(LD_LIBRARY_PATH=$sim RVXSIM_TRACE=1 build/bin/rvxrun -n 2 -t 120 "$tmp/put" 2>&1) ||
    { echo "$out"; fail "$doc's program failed on rvxsim"; }
  expect=(
    'rank 1 has 0x1122334455667788'
    'BlueFlame copy to half 0: 00000008[0-9a-f]{6}03 \(WQE 0x0, DS 3\)'
    'wqe qp 0x[0-9a-f]+ idx 0x0 RDMA_WRITE opmod 0x0 ds 3 fm_ce_se 0x00 imm 0x00000000'
    '^ *(rvxsim-trace [0-9]+: )? +inline len 8$'
    'BlueFlame copy to half 1: 00000100[0-9a-f]{6}01 \(WQE 0x1, DS 1\)'
    'wqe qp 0x[0-9a-f]+ idx 0x1 NOP opmod 0x0 ds 1 fm_ce_se 0x08 CE'
    'cqe cq 0x[0-9a-f]+ #0 REQ qpn 0x[0-9a-f]+ wqe_counter 0x1 '
  )
  for e in "${expect[@]}"; do
    grep -qE -- "$e" <<<"$out" || { echo "$out" | grep -v 'modify\|create qp'; fail "$doc: trace has no line matching: $e"; }
  done
  echo "ok: $doc's program runs on rvxsim and traces the WQEs, doorbells and CQE the page decodes"
fi

# ---- links
slug() { tr 'A-Z' 'a-z' <<<"$1" | sed -e 's/[^a-z0-9 _-]//g' -e 's/ /-/g'; }
bad=0 nlinks=0
for f in README.md docs/*.md; do
  dir=$(dirname "$f")
  while IFS= read -r link; do
    case $link in http://*|https://*|mailto:*) continue ;; esac
    nlinks=$((nlinks + 1))
    path=${link%%#*} anchor=
    [[ $link == *"#"* ]] && anchor=${link#*#}
    target=$f
    if [ -n "$path" ]; then
      target=$dir/$path
      [ -e "$target" ] || { echo "$f: link to a missing file: $link"; bad=$((bad + 1)); continue; }
    fi
    if [ -n "$anchor" ]; then
      found=0
      while IFS= read -r h; do
        [ "$(slug "$h")" = "$anchor" ] && { found=1; break; }
      done < <(sed -n 's/^#\{1,6\} \(.*\)$/\1/p' "$target")
      [ $found = 1 ] || { echo "$f: link to a missing heading: $link"; bad=$((bad + 1)); }
    fi
  done < <(grep -oE '\]\([^) ]+\)' "$f" | sed -e 's/^](//' -e 's/)$//')
done
[ $nlinks -gt 20 ] || fail "found only $nlinks links; the pattern is broken"
[ $bad -eq 0 ] || fail "$bad broken link(s) in README.md and docs/"
echo "ok: all $nlinks relative links in README.md and docs/ lead to existing files and headings"
