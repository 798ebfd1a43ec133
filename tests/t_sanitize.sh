#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer (with leak checking) over the tests that exercise
# the library's code paths, built with clang; any report fails the test.
set -u
cd "$(dirname "$0")/.."
out=build/tests-asan
mkdir -p "$out"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:exitcode=66
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=67
fails=0
for t in t_unit t_rma t_atomics t_am t_flush t_bad_input t_peer_exit t_tag t_tag_bad t_tag_peer_death t_tag_ep_destroy; do
  if ! clang -std=c11 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
       -fno-sanitize-recover=all -Wall -Wextra -Werror -Iinclude -o "$out/$t" "tests/$t.c"; then
    echo "FAIL: $t does not build with sanitizers"; fails=$((fails + 1)); continue
  fi
  log="$out/$t.log"
  if timeout 300 "$out/$t" >"$log" 2>&1; then
    echo "ok: $t"
  else
    echo "FAIL: $t under sanitizers (log $log):"; grep -E "ERROR|runtime error|SUMMARY|FAIL" "$log" | head -10
    fails=$((fails + 1))
  fi
done
# multi-lane rendezvous over rc_mlx5 on rvxsim (two devices): striping, and a failing lane
if [ -e build/sim/libibverbs.so.1 ]; then
  for p in GET PUT PIPELINE; do
    t=t_lanes_$p
    if ! clang -std=c11 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
         -fno-sanitize-recover=all -Wall -Wextra -Werror -Iinclude -DRVX_RNDV=RVX_RNDV_$p \
         -o "$out/$t" tests/t_lanes.c -libverbs -lmlx5; then
      echo "FAIL: $t does not build with sanitizers"; fails=$((fails + 1)); continue
    fi
    for m in sweep fail; do
      log="$out/$t.$m.log"
      deny=; [ $m = fail ] && deny=mlx5_1
      if env LD_LIBRARY_PATH=build/sim RVXSIM_NUM_DEVICES=2 RVXSIM_RDMA_DENY=$deny \
           timeout 300 "$out/$t" $m >"$log" 2>&1; then
        echo "ok: $t $m"
      else
        echo "FAIL: $t $m under sanitizers (log $log):"; grep -E "ERROR|runtime error|SUMMARY|FAIL" "$log" | head -10
        fails=$((fails + 1))
      fi
    done
  done
fi
# rc_mlx5 on rvxsim: endpoint teardown with rendezvous transfers in flight (tag ops are poisoned
# while pooled, so a completion into a released op is reported)
if [ -e build/sim/libibverbs.so.1 ]; then
  for p in GET PUT; do
    t=t_tag_ep_destroy; bin="$out/rc_${t}_$p"
    if ! clang -std=c11 -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all \
         -Wall -Wextra -Werror -Iinclude -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_RNDV=RVX_RNDV_$p -o "$bin" "tests/$t.c" \
         -libverbs -lmlx5; then
      echo "FAIL: rc $t ($p) does not build with sanitizers"; fails=$((fails + 1)); continue
    fi
    if LD_LIBRARY_PATH=build/sim timeout 300 "$bin" >"$bin.log" 2>&1; then
      echo "ok: rc $t ($p)"
    else
      echo "FAIL: rc $t ($p) under sanitizers (log $bin.log):"; grep -E "ERROR|runtime error|SUMMARY|FAIL" "$bin.log" | head -10
      fails=$((fails + 1))
    fi
  done
fi
[ $fails -eq 0 ]
