# TCP ports for the servers scripts start (ucx_perftest, ibv_rc_pingpong): sourced by
# tests/ucx_lib.sh, tests/t_sim_debian_tools.sh, bench/compare_mlx5.sh and bench/ucx_perftest.sh;
# not run.

listening() { # port -> true once something listens on it (LISTEN = state 0A)
  local hex; hex=$(printf '%04X' "$1")
  grep -qs ":$hex [0-9A-F:]* 0A " /proc/net/tcp /proc/net/tcp6
}

port_used() { # port -> true if any socket has it as its local port (listening, connected, TIME_WAIT)
  local hex; hex=$(printf '%04X' "$1")
  grep -qs "^ *[0-9]*: [0-9A-F]*:$hex " /proc/net/tcp /proc/net/tcp6
}

# Below the kernel's ephemeral range, which another program's outgoing connection may take from it
# at any moment (Linux: 32768-60999), and in use by no socket now; what is left is a race with
# another program binding the same port meanwhile, which the caller's bind retry covers. 0: none.
free_port() {
  local p lo base=20000
  lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
  # at least 1,024 ports to choose from below the kernel's range, else Linux's default range
  [ "$lo" -gt $((base + 1024)) ] 2>/dev/null || lo=32768
  for _ in $(seq 50); do
    p=$((base + RANDOM % (lo - base)))
    port_used "$p" || { echo "$p"; return; }
  done
  echo 0
}
