#!/usr/bin/env bash
# rdma-core's own tests (tests/ of rdma-core at tag v44.0, the version of Debian's python3-pyverbs)
# run on rvxsim: `make peer-tests RDMA_CORE_TESTS=<dir>`. The project does not carry them; get them
# from a clone of rdma-core with `git archive v44.0 tests | tar -x -C <parent>`.
# Each test module runs alone (`run_tests.py --dev mlx5_0 -v tests.<module>`) under
# build/sim/rvxsim-env with Debian's /usr/bin/python3, and one line per module gives its counts.
# Exit status 1 if a module of the goal list has a failure or an error (or did not finish).
# PEER_MODULES="test_qp test_cq" runs only those; PEER_TIMEOUT (default 300 s) bounds a module.
set -u
cd "$(dirname "$0")/.."
dir=${1:-${RDMA_CORE_TESTS:-}}
[ -n "$dir" ] || { echo "usage: make peer-tests RDMA_CORE_TESTS=<rdma-core>/tests"; exit 2; }
dir=$(cd "$dir" && pwd) || exit 2
[ -f "$dir/run_tests.py" ] || { echo "$dir has no run_tests.py (rdma-core's tests/ directory)"; exit 2; }
[ -x build/sim/rvxsim-env ] || { echo "rvxsim not built (make sim)"; exit 2; }
py=/usr/bin/python3
$py -c 'import pyverbs' 2>/dev/null || { echo "SKIP: python3-pyverbs not installed (make deps)"; exit 77; }
goal=" test_device test_pd test_mr test_cq test_cqex test_cq_events test_qp test_qpex test_atomic
 test_addr test_parent_domain test_relaxed_ordering test_mlx5_dc test_mlx5_cq test_mlx5_raw_wqe
 test_mlx5_uar test_mlx5_query_port test_mlx5_huge_page "
goal=" $(echo $goal) "
mods=${PEER_MODULES:-$(cd "$dir" && ls test_*.py | sed 's/\.py$//')}
logs=build/peer-tests
mkdir -p "$logs"
export RVXSIM_FABRIC_DIR=$(mktemp -d)
trap 'rm -rf "$RVXSIM_FABRIC_DIR"' EXIT
bad=0
printf '%-26s %5s %5s %5s %5s %5s\n' module tests pass skip fail error
for m in $mods; do
  log=$logs/$m.log
  (cd "$dir" && timeout -k 5 "${PEER_TIMEOUT:-300}" "$OLDPWD/build/sim/rvxsim-env" $py run_tests.py \
     --dev mlx5_0 -v "tests.$m") >"$log" 2>&1
  rc=$?
  ran=$(sed -n 's/^Ran \([0-9]*\) tests\{0,1\} in .*/\1/p' "$log" | tail -1)
  res=$(grep -E '^(OK|FAILED)' "$log" | tail -1)
  num() { echo "$res" | sed -n "s/.*$1=\([0-9]*\).*/\1/p"; }
  f=$(num failures); e=$(num errors); s=$(num skipped)
  f=${f:-0} e=${e:-0} s=${s:-0}
  if [ -z "$ran" ]; then
    note="did not finish (exit $rc; $log)"; ran=1 e=1 s=0 f=0
  else
    note=""
  fi
  printf '%-26s %5s %5s %5s %5s %5s %s%s\n' "$m" "$ran" $((ran - s - f - e)) "$s" "$f" "$e" \
    "$([[ "$goal" == *" $m "* ]] && echo goal)" "${note:+ $note}"
  [[ "$goal" == *" $m "* ]] && [ $((f + e)) -gt 0 ] && bad=$((bad + 1))
done
echo "logs in $logs/"
[ $bad -eq 0 ]
