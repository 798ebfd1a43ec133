#!/usr/bin/env bash
# The compile matrix: every example and test source (each a different configuration of rvx) with
# gcc and clang, as C11 and as C++17, at -O0 and -O2, with -Wall -Wextra -Werror; two builds at a
# time (MATRIX_JOBS, default the number of CPUs).
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
srcs=(examples/*.c tests/t_unit.c tests/t_tl_contract.c tests/t_am.c tests/t_bad_input.c)
# tag matching (RVX_TAG=1) under every rendezvous protocol, and the AM + tag build: "file:flags"
for p in GET PUT AM PIPELINE; do srcs+=("tests/t_tag.c:-DRVX_RNDV=RVX_RNDV_$p"); done
srcs+=(tests/t_tag_bad.c)
# dc_mlx5: the shared RMA test and the DCI pool test
srcs+=("tests/t_rma.c:-DRVX_TL=RVX_TL_DC_MLX5" tests/t_dc_pool.c)
# rc_mlx5 (AM + tags), and the pair (shm on the node, rc_mlx5 between nodes)
srcs+=("tests/t_tag_bad.c:-DRVX_TL=RVX_TL_RC_MLX5" "tests/t_tag.c:-DRVX_TL=RVX_TL_RC_MLX5 -DRVX_TL_INTRA=RVX_TL_SHM")
n=0
for cc in gcc clang; do
  case $cc in gcc) cxx=g++ ;; clang) cxx=clang++ ;; esac
  command -v $cc >/dev/null && command -v $cxx >/dev/null || { echo "FAIL: $cc/$cxx not installed (make deps)"; exit 1; }
  for lang in c11 c++17; do
    for opt in -O0 -O2; do
      for entry in "${srcs[@]}"; do
        src=${entry%%:*}; extra=""; [ "$src" != "$entry" ] && extra=${entry#*:}
        if [ $lang = c11 ]; then cmd="$cc -std=c11"; else cmd="$cxx -x c++ -std=c++17"; fi
        n=$((n + 1))
        echo "$cmd $opt -Wall -Wextra -Werror -Iinclude -Itests $extra -c $src -o $tmp/o$n.o"
      done
    done
  done
done >"$tmp/builds"
# one build: on failure, its command and the first lines of what the compiler said
build() { out=$($1 2>&1) || { echo "FAIL: ${1% -o *}"; echo "$out" | head -8; }; rm -f "${1##* }"; }
export -f build
xargs -P "${MATRIX_JOBS:-$(nproc)}" -d '\n' -I{} bash -c 'build "$1"' _ {} <"$tmp/builds" >"$tmp/out"
cat "$tmp/out"
fails=$(grep -c '^FAIL: ' "$tmp/out")
echo "$((n - fails)) of $n builds clean"
[ "$fails" -eq 0 ]
