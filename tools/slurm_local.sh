#!/usr/bin/env bash
# A one-machine Slurm cluster without systemd, all of it in one directory: munged with its own
# key, socket and pid file, slurmctld and slurmd (as root), one node that declares at least 4
# CPUs. munged wants every directory above its socket executable by all: where DIR's parents are
# not, the socket alone goes to a fresh directory under /tmp (named in DIR/munge.socket-dir).
#
#   tools/slurm_local.sh start DIR   start it (DIR is created afresh); then, in your shell:
#                                    export SLURM_CONF=DIR/slurm.conf   and srun/sbatch as usual
#   tools/slurm_local.sh stop DIR    stop the daemons by their pid files and remove DIR
#
# Needs root and Debian's slurm-wlm, slurm-wlm-basic-plugins (srun's mpi_pmix plugin), munge and
# libpmix-dev (the plugin opens libpmix.so). tests/t_slurm.sh starts and stops it around its runs.
# start returns 0 when the node is idle and a first step has run, else 1 with the daemons' last
# log lines, having stopped what it started. stop cancels the jobs left, then stops the daemons.
set -u

die() { echo "slurm_local: $*" >&2; exit 1; }

# A TCP port nobody listens on, from $1 up (/proc/net/tcp*: local address in column 2, its port
# in hex after the colon; state 0A is LISTEN)
free_port() {
  local p=$1 used h
  used=$(awk 'NR > 1 && $4 == "0A" { sub(".*:", "", $2); print $2 }' /proc/net/tcp /proc/net/tcp6 2>/dev/null |
         while read -r h; do echo $((16#$h)); done)
  while grep -qx "$p" <<<"$used"; do p=$((p + 1)); done
  echo "$p"
}

# munged refuses a socket whose directory, or any directory above it, is not executable by all
open_to_all() {
  local d=$1
  while [ "$d" != / ]; do
    [ "$(( 8#$(stat -c %a "$d") & 1 ))" -eq 1 ] || return 1
    d=$(dirname "$d")
  done
}

stop_pids() { # dir, daemon names: SIGTERM by pid file, SIGKILL after 10 s
  local dir=$1 f pid pids=() i
  shift
  for f in "$@"; do
    [ -s "$dir/$f.pid" ] || continue
    pid=$(cat "$dir/$f.pid")
    # a stale pid file may name another process by now
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$f" ] && kill "$pid" 2>/dev/null && pids+=("$pid")
  done
  for pid in "${pids[@]}"; do
    for i in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
}

stop() {
  local dir=$1 i
  [ -d "$dir" ] || return 0
  # jobs still running are cancelled while slurmctld can do it (their slurmstepd outlives slurmd)
  if [ -s "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
    SLURM_CONF=$dir/slurm.conf timeout 10 scancel --quiet --full --user=root 2>/dev/null
    for i in $(seq 50); do
      [ -z "$(SLURM_CONF=$dir/slurm.conf timeout 5 squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  # each daemon takes about 2 s to leave: the two Slurm daemons at once, then munged, which
  # authenticated their goodbyes
  stop_pids "$dir" slurmd slurmctld
  stop_pids "$dir" munged
  [ -s "$dir/munge.socket-dir" ] && case $(cat "$dir/munge.socket-dir") in
    /tmp/rvx-munge-*) rm -rf "$(cat "$dir/munge.socket-dir")" ;;
  esac
  rm -rf "$dir"
}

start() {
  local dir=$1 host cpus i state sock
  [ "$(id -u)" -eq 0 ] || die "start needs root (the daemons run as root here)"
  for f in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/srun /usr/sbin/munged /usr/sbin/mungekey; do
    [ -x $f ] || die "$f is missing (apt-get install slurm-wlm munge)"
  done
  stop "$dir"
  mkdir -p "$dir"/{munge,spool,state} || die "cannot create $dir"
  dir=$(cd "$dir" && pwd)
  chmod 755 "$dir" "$dir/munge"
  sock=$dir/munge
  if ! open_to_all "$sock"; then # e.g. a tree under a 0700 home: the socket goes under /tmp
    sock=$(mktemp -d /tmp/rvx-munge-XXXXXX) && chmod 755 "$sock" && echo "$sock" >"$dir/munge.socket-dir" ||
      die "cannot create a socket directory under /tmp"
  fi
  host=$(hostname -s)
  # srun -n 4 on a 2-CPU machine would wait forever: the node declares 4 (or more) CPUs, and
  # config_overrides keeps slurmd from draining it for having fewer
  cpus=$(nproc); [ "$cpus" -lt 4 ] && cpus=4
  cat >"$dir/slurm.conf" <<EOF
ClusterName=rvx
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$(free_port 16817)
SlurmdPort=$(free_port 16827)
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
TmpFS=$dir/spool
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=pmix
ReturnToService=2
KillWait=5
MinJobAge=60
SlurmdParameters=config_overrides
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES State=UP MaxTime=INFINITE
EOF
  export SLURM_CONF=$dir/slurm.conf
  mungekey --create --keyfile="$dir/munge/munge.key" 2>"$dir/munged.log" ||
    { stop "$dir"; die "mungekey failed: $(cat "$dir/munged.log" 2>/dev/null)"; }
  munged --socket="$sock/munge.sock" --key-file="$dir/munge/munge.key" \
         --log-file="$dir/munged.log" --pid-file="$dir/munged.pid" --seed-file="$dir/munge/seed" ||
    { tail -3 "$dir/munged.log" >&2; stop "$dir"; die "munged did not start"; }
  slurmctld -c || { tail -5 "$dir/slurmctld.log" >&2; stop "$dir"; die "slurmctld did not start"; }
  slurmd -c || { tail -5 "$dir/slurmd.log" >&2; stop "$dir"; die "slurmd did not start"; }
  for i in $(seq 150); do
    state=$(timeout 10 sinfo -h -o %T 2>/dev/null)
    [ "$state" = idle ] && break
    sleep 0.2
  done
  # the first step after slurmd starts loads the hardware topology (3-18 s seen): done here once
  [ "$state" = idle ] && timeout 120 srun -n 1 true && return 0
  echo "slurm_local: the node is not idle after 30 s or a first step failed (sinfo: ${state:-no answer})" >&2
  tail -5 "$dir/slurmctld.log" "$dir/slurmd.log" >&2
  stop "$dir"
  exit 1
}

case "${1:-} ${2:-}" in
  "start "?*) start "$2" ;;
  "stop "?*) stop "$2" ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac
