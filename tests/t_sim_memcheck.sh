#!/usr/bin/env bash
# rvxsim under valgrind memcheck: programs that open devices, create and destroy every kind of
# object and move data run on the model with no invalid access and no definite leak, and the
# engine threads are gone when they exit (valgrind would report them otherwise).
set -u
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "FAIL: valgrind missing (make deps)"; exit 1; }
[ -e build/sim/libibverbs.so.1 ] || { echo "FAIL: rvxsim not built (make)"; exit 1; }
fails=0
for t in t_verbs_path t_wrap t_srq t_many_qps; do
  log=build/test-logs/memcheck_$t.log
  mkdir -p build/test-logs
  if LD_LIBRARY_PATH=build/sim timeout 600 valgrind -q --leak-check=full --errors-for-leak-kinds=definite \
       --error-exitcode=9 "build/sim/tests/$t" >"$log" 2>&1; then
    echo "ok: $t clean under memcheck"
  else
    echo "FAIL: $t under memcheck (log $log)"; grep -E "==[0-9]+==" "$log" | head -20; fails=$((fails + 1))
  fi
done
[ $fails -eq 0 ]
