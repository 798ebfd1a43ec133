#!/usr/bin/env bash
# docs/launching.md as written, and a real Slurm. Every line of the page's code blocks runs from
# the top of the tree in the page's order: the rvxrun and mpirun lines, the PMIx builds, then its
# Slurm section, which starts a one-node cluster on this machine (tools/slurm_local.sh: munged,
# slurmctld and slurmd as root in build/slurm, no systemd), runs srun and the batch script with
# sbatch, and stops it. Before that stop, on the same cluster:
#   - ring and halo under `srun --mpi=pmix -n 4` on shm, rc_mlx5 and dc_mlx5 (rvxsim), data checked;
#   - the pair build's ring as one node (no byte through rvxsim) and as 2 emulated nodes
#     (RVX_NODE per rank: ranks 1 and 3 each write their 300 blocks through rvxsim);
#   - every rank of a PMIx build on one node under srun (Slurm's PMIx node id);
#   - a rank killed mid-run (tests/launch/peer_kill.c): with the PMIx build Slurm ends the step
#     with and without --kill-on-bad-exit (its PMIx plugin kills the step when a client is lost),
#     no survivor finishes and srun names every task's signal; the local-bootstrap build under
#     `srun --mpi=none` shows what --kill-on-bad-exit decides: without it every survivor reports
#     the dead rank and finishes its exchange, with it the survivors are ended;
#   - a PMIx build under `srun --mpi=none` fails and says how to start it.
# Skips (77), after the lines that need no Slurm, when a package is missing (naming it) or when
# not root; every command has a time limit, and the daemons are stopped on every exit. 40 to 70 s.
set -u
cd "$(dirname "$0")/.."
doc=docs/launching.md
out_dir=build/slurm-test
rm -rf "$out_dir"; mkdir -p "$out_dir"
fails=0 skip_reason=
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
# Slurm's variables from an enclosing job would send srun there; only SLURM_CONF is ours
unset $(compgen -e | grep -E '^(SLURM_|SBATCH_|SRUN_|SALLOC_)') 2>/dev/null

# run LIMIT command...: output in $out, status in $rc. In the background, so a SIGTERM to this
# script is handled at once (the trap stops the daemons) rather than after the command.
run() {
  local limit=$1; shift
  timeout -k 5 "$limit" "$@" >"$out_dir/cmd.out" 2>&1 </dev/null &
  wait $!; rc=$?
  out=$(cat "$out_dir/cmd.out")
}
show() { echo "$out" | tail -${1:-12} | sed 's/^/  | /'; }

cluster_dir=
stop_cluster() {
  [ -n "$cluster_dir" ] && [ -d "$cluster_dir" ] && tools/slurm_local.sh stop "$cluster_dir"
  cluster_dir=
}
trap stop_cluster EXIT
trap 'exit 143' TERM INT

for b in build/bin/rvxrun build/examples/ring build/examples/halo build/examples-pair/ring \
         build/examples/ring-pmix build/examples/halo-pmix build/pmix/peer_kill build/launch/peer_kill \
         build/sim/libibverbs.so.1; do
  [ -e "$b" ] || { echo "FAIL: $b is missing: build it first (make; the PMIx builds need libpmix-dev)"; exit 1; }
done

# ---- Can this machine run the Slurm part? Missing packages are installed as root (make deps).
slurm_missing() {
  local m=() arch
  arch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
  for f in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/srun /usr/bin/sbatch; do
    [ -x $f ] || { m+=(slurm-wlm); break; }
  done
  [ -e /usr/lib/$arch/slurm-wlm/mpi_pmix.so ] || m+=(slurm-wlm-basic-plugins)
  [ -x /usr/sbin/munged ] && [ -x /usr/sbin/mungekey ] || m+=(munge)
  [ -e /usr/lib/$arch/libpmix.so ] || m+=(libpmix-dev)
  echo "${m[*]}"
}
missing=$(slurm_missing)
if [ -n "$missing" ] && [ "$(id -u)" -eq 0 ]; then
  tools/deps.sh >/dev/null 2>&1
  missing=$(slurm_missing)
fi
if [ -n "$missing" ]; then
  skip_reason="Slurm part not run: missing Debian package(s) $missing (make deps, as root)"
elif [ "$(id -u)" -ne 0 ]; then
  skip_reason="Slurm part not run: starting slurmctld and slurmd here needs root"
fi

# ---- The page's code blocks, in order: a block starting with #! is the batch script the page
# names build/ring.sbatch; every other line is a command.
grep -qF '`build/ring.sbatch`' $doc || bad "$doc does not name its batch script build/ring.sbatch"
cmds=()
script=
while IFS= read -r line; do
  case "$line" in
    "@@script "*) script+="${line#@@script }"$'\n' ;;
    "@@cmd "*) cmds+=("${line#@@cmd }") ;;
  esac
done < <(awk '/^```sh$/ { on = 1; first = 1; next }
              on && /^```$/ { on = 0; next }
              on && first && /^#!/ { scr = 1 }
              on { first = 0; print (scr ? "@@script " : "@@cmd ") $0 }
              !on { scr = 0 }' $doc)
[ -n "$script" ] || bad "$doc has no batch script (a code block starting with #!)"
[ ${#cmds[@]} -ge 10 ] || bad "$doc: only ${#cmds[@]} command lines found"

ex_ok='every block correct on every rank|every cell matches the serial run'
# check description regex count LIMIT command...: exit 0, `count` lines matching, no FAIL
check() {
  local what=$1 want=$2 count=$3 limit=$4 got; shift 4
  run "$limit" "$@"
  got=$(grep -cE -- "$want" <<<"$out")
  if [ $rc -eq 0 ] && [ "$got" -eq "$count" ] && ! grep -q FAIL <<<"$out"; then ok "$what"
  else bad "$what (exit $rc, $got of $count lines matching \"$want\")"; show; fi
}
# the task numbers srun reports as ended by a signal ("srun: error: host: tasks 0-2: Killed")
tasks_signalled() { # srun's lines may share a line with a rank's output (both write to it): -o
  grep -oE 'srun: error: [^:]*: tasks? [0-9,-]+: (Killed|Terminated)' <<<"$out" |
    sed -E 's/.*: tasks? ([0-9,-]+): .*/\1/' | tr ',' '\n' |
    awk -F- '{ for (i = $1; i <= ($2 == "" ? $1 : $2); i++) print i }' | sort -n | tr '\n' ' '
}
pmix_cc() { # output, source, extra flags...
  local o=$1 src=$2; shift 2
  cc -std=c11 -O2 -Wall -Wextra -Werror -Iinclude -Itests -DRVX_BOOT=RVX_BOOT_PMIX "$@" -o "$o" "$src" \
     $(pkg-config --cflags --libs pmix) -libverbs -lmlx5 >"$out_dir/cc.log" 2>&1 ||
    { bad "$src does not build with $* (PMIx)"; sed 's/^/  | /' "$out_dir/cc.log" | head; return 1; }
}

# The checks that need the running cluster, run before the page's stop line.
slurm_checks() {
  local tl name src stats n
  local sim=(env -u RVX_NODE -u RVX_LOCAL_RANK -u RVX_LOCAL_SIZE LD_LIBRARY_PATH=build/sim)
  # ring and halo, 4 ranks, on each transport
  for tl in rc dc; do
    for name in ring halo; do
      pmix_cc $out_dir/$name-$tl examples/$name.c -DRVX_TL=RVX_TL_${tl^^}_MLX5 || continue
    done
  done
  for tl in shm rc dc; do
    for name in ring halo; do
      if [ $tl = shm ]; then src=build/examples/$name-pmix; else src=$out_dir/$name-$tl; fi
      [ -x $src ] || continue
      check "$name on $tl$([ $tl = shm ] || echo _mlx5), srun --mpi=pmix -n 4" \
        "^$name: rvx .*tl=${tl/shm/shm }.*boot=pmix|^(ring: 4 ranks, 100 rounds of 3 steps, 4096-byte blocks|halo: 4 ranks x 1000 cells, 200 steps): ($ex_ok)" \
        2 90 "${sim[@]}" srun --mpi=pmix -n 4 $src
    done
  done
  # the pair build as one node, then as 2 emulated nodes: what went through rvxsim, per process
  if pmix_cc $out_dir/ring-pair examples/ring.c -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_TL_INTRA=RVX_TL_SHM; then
    stats=$PWD/$out_dir/stats1
    check "pair ring as one node, srun --mpi=pmix -n 4" "^ring: 4 ranks, .*($ex_ok)" 1 90 \
      "${sim[@]}" RVXSIM_STATS_FILE=$stats srun --mpi=pmix -n 4 $out_dir/ring-pair
    if [ -s "$stats" ]; then bad "pair ring as one node moved data through rvxsim:"; sed 's/^/  | /' "$stats"
    else ok "pair ring as one node: no RDMA byte through rvxsim"; fi
    stats=$PWD/$out_dir/stats2
    check "pair ring as 2 emulated nodes (RVX_NODE per rank), srun --mpi=pmix -n 4" \
      "^ring: 4 ranks, .*($ex_ok)" 1 90 "${sim[@]}" RVXSIM_STATS_FILE=$stats srun --mpi=pmix -n 4 \
      sh -c "RVX_NODE=\$((SLURM_PROCID / 2)) RVX_LOCAL_RANK=\$((SLURM_PROCID % 2)) RVX_LOCAL_SIZE=2 exec $out_dir/ring-pair"
    # 100 rounds x 3 steps of 4096 bytes, written by the two ranks whose next rank is off-node
    n=$(awk '{ v = $4; sub("rdma_write_bytes=", "", v) } v + 0 >= 300 * 4096' "$stats" 2>/dev/null | wc -l)
    if [ "$n" -eq 2 ]; then ok "pair ring as 2 nodes: 2 ranks wrote their 300 blocks through rvxsim"
    else bad "pair ring as 2 nodes: $n processes wrote 300 blocks through rvxsim, expected 2"; sed 's/^/  | /' "$stats" 2>/dev/null; fi
  fi
  # the node of every rank comes from Slurm's PMIx server: one for all ranks of this machine
  if pmix_cc $out_dir/t_node tests/pair/t_node.c; then
    check "srun --mpi=pmix -n 3: one node for every rank" "nodes ok: 3 ranks, all on node" 1 60 \
      env -u RVX_NODE srun --mpi=pmix -n 3 $out_dir/t_node same
  fi

  # A rank killed mid-run. The PMIx build: Slurm's PMIx plugin ends the step whatever
  # --kill-on-bad-exit says; survivors would run 100000 rounds, so none may finish.
  local k t
  for k in "" --kill-on-bad-exit; do
    run 60 srun --mpi=pmix $k -n 4 build/pmix/peer_kill 3 100000 100
    t=$(tasks_signalled)
    if [ $rc -ne 0 ] && [ "$t" = "0 1 2 3 " ] && ! grep -q "peer_kill: rank .: ok" <<<"$out" &&
       grep -q "task 3: Killed" <<<"$out"; then
      ok "srun --mpi=pmix ${k:-(no --kill-on-bad-exit)}, rank 3 killed: the step ends, survivors 0-2 end by a signal (exit $rc)"
    else
      bad "srun --mpi=pmix ${k:-(no --kill-on-bad-exit)}, rank 3 killed (exit $rc; tasks ended by a signal: ${t:-none})"; show
    fi
  done
  # The local bootstrap under srun --mpi=none (one node, a shared RVX_BOOT_DIR): Slurm decides
  local d env_cmd='RVX_RANK=$SLURM_PROCID RVX_SIZE=$SLURM_NTASKS exec build/launch/peer_kill 3'
  d=$(mktemp -d -p "$PWD/$out_dir")
  run 60 env RVX_BOOT_DIR=$d srun --mpi=none -n 4 sh -c "$env_cmd"
  if [ $rc -eq 137 ] && [ "$(grep -cE "peer_kill: rank [0-2]: ok: rank 3, killed" <<<"$out")" -eq 3 ] &&
     [ "$(tasks_signalled)" = "3 " ]; then
    ok "srun --mpi=none (local bootstrap), rank 3 killed: survivors 0-2 each report it and finish; srun exits 137"
  else
    bad "srun --mpi=none (local bootstrap), rank 3 killed, survivors should finish (exit $rc)"; show
  fi
  d=$(mktemp -d -p "$PWD/$out_dir")
  run 60 env RVX_BOOT_DIR=$d srun --mpi=none --kill-on-bad-exit -n 4 sh -c "${env_cmd} 100000 100"
  t=$(tasks_signalled)
  if [ $rc -ne 0 ] && [ "$t" = "0 1 2 3 " ] && ! grep -q "peer_kill: rank .: ok" <<<"$out"; then
    ok "srun --mpi=none --kill-on-bad-exit, rank 3 killed: the step ends, survivors 0-2 end by a signal (exit $rc)"
  else
    bad "srun --mpi=none --kill-on-bad-exit, rank 3 killed (exit $rc; tasks ended by a signal: ${t:-none})"; show
  fi
  # a PMIx build started without Slurm's PMIx server
  run 60 srun --mpi=none -n 2 build/examples/ring-pmix
  if [ $rc -ne 0 ] && grep -q "started by a PMIx launcher" <<<"$out"; then
    ok "srun --mpi=none with a PMIx build fails and says how to start it (exit $rc)"
  else
    bad "srun --mpi=none with a PMIx build (exit $rc)"; show
  fi
}

slurm_up=0 stopped=0
for cmd in "${cmds[@]}"; do
  cmd=$(sed -E 's/[[:space:]]+# .*$//' <<<"$cmd") # a trailing comment
  [ -z "$cmd" ] && continue
  case "$cmd" in
    "tools/slurm_local.sh start "*)
      [ -n "$skip_reason" ] && { echo "note: $skip_reason"; break; }
      cluster_dir=${cmd#tools/slurm_local.sh start }
      run 200 bash -c "$cmd"
      [ $rc -eq 0 ] && [ -s "$cluster_dir/slurmd.pid" ] ||
        { bad "$cmd (exit $rc)"; show 20; break; }
      ok "$cmd: node idle, first step run"; slurm_up=1; continue ;;
    "export "*)
      eval "$cmd"; ok "$cmd"; continue ;;
    "tools/slurm_local.sh stop "*)
      slurm_checks
      pids=$(cat "$cluster_dir"/*.pid 2>/dev/null)
      run 60 bash -c "$cmd"
      left=$(for p in $pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
      if [ $rc -eq 0 ] && [ -z "$left" ] && [ ! -e "$cluster_dir" ]; then
        ok "$cmd: the daemons are gone, so is $cluster_dir"; cluster_dir=
      else
        bad "$cmd (exit $rc; still running: ${left:-none})"; show
      fi
      stopped=1; continue ;;
    "sbatch "*)
      rm -f build/ring-*.out
      printf '%s' "$script" >build/ring.sbatch
      run 120 bash -c "$cmd"
      if [ $rc -eq 0 ] && grep -q "Submitted batch job" <<<"$out"; then ok "$cmd"; else bad "$cmd (exit $rc)"; show; fi
      continue ;;
    "cat build/ring-"*)
      run 10 bash -c "$cmd"
      if [ $rc -eq 0 ] && grep -q "^ring: 4 ranks, 100 rounds .*every block correct" <<<"$out" &&
         grep -q "^halo: 4 ranks x 1000 cells, 200 steps: every cell matches" <<<"$out"; then
        ok "$cmd: the batch job ran ring and halo on 4 ranks"
      else
        bad "$cmd (exit $rc): the batch job's output"; show
      fi
      continue ;;
    "mpirun "*)
      command -v mpirun >/dev/null || { echo "note: not run (no mpirun; t_mpirun skips too): $cmd"; continue; } ;;
  esac
  case "$cmd" in *srun*) [ $slurm_up = 1 ] || continue ;; esac
  run 120 bash -c "$cmd"
  if [[ "$cmd" == cc\ * ]]; then
    [ $rc -eq 0 ] && ok "$cmd" || { bad "$cmd (exit $rc)"; show; }
  elif [ $rc -eq 0 ] && grep -qE "$ex_ok" <<<"$out" && ! grep -q FAIL <<<"$out"; then
    ok "$cmd"
  else
    bad "$cmd (exit $rc)"; show
  fi
done
[ $slurm_up = 1 ] && [ $stopped = 0 ] && bad "$doc's Slurm section never stops its cluster"
stop_cluster
[ $fails -ne 0 ] && exit 1
if [ -n "$skip_reason" ]; then echo "SKIP: $skip_reason"; exit 77; fi
[ $slurm_up = 1 ] || { echo "FAIL: $doc has no 'tools/slurm_local.sh start' line"; exit 1; }
exit 0
