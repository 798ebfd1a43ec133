# Shared by the UCX tests (tests/t_ucx_*.sh): run Debian's unmodified UCX tools on rvxsim through
# build/sim/rvxsim-env. Sourced, not run.
ENV=build/sim/rvxsim-env
command -v ucx_perftest >/dev/null && command -v ucx_info >/dev/null ||
  { echo "skip: ucx-utils is not installed (make deps)"; exit 77; }
[ -x "$ENV" ] || { echo "skip: $ENV not built (make sim)"; exit 77; }
# the model as the hardware is: stale reserved bytes are ignored (UCX leaves some unwritten)
unset RVXSIM_STRICT
tmp=$(mktemp -d)
SRV=""
cleanup() { [ -n "$SRV" ] && kill "$SRV" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

. tests/ports.sh

# perftest NAME N ARGS...: server and client of one ucx_perftest on the model, N iterations; both
# must succeed within 60 s and the client must report N iterations. The client log is $tmp/NAME.
perftest() {
  local name=$1 n=$2; shift 2
  local port t0=$SECONDS rc src try
  for try in 1 2 3; do # a port taken between the choice and the bind: another port
    port=$(free_port)
    timeout -k 2 60 "$ENV" ucx_perftest "$@" -n "$n" -w 20 -s 8 -p "$port" >"$tmp/$name.srv" 2>&1 &
    SRV=$!
    for _ in $(seq 300); do listening "$port" && break; kill -0 $SRV 2>/dev/null || break; sleep 0.05; done
    UCX_LOG_LEVEL=info timeout -k 2 60 "$ENV" ucx_perftest 127.0.0.1 "$@" -n "$n" -w 20 -s 8 \
      -p "$port" >"$tmp/$name" 2>&1
    rc=$?
    wait $SRV; src=$?; SRV=""
    grep -qs "Address already in use" "$tmp/$name.srv" || break
    echo "note: $name: port $port was taken before the server bound it (try $try)"
  done
  if [ $rc -ne 0 ] || [ $src -ne 0 ]; then
    echo "FAIL: $name: client exit $rc, server exit $src"
    tail -n 20 "$tmp/$name" "$tmp/$name.srv"
    return 1
  fi
  if ! grep -Eq "^Final: +$n " "$tmp/$name"; then
    echo "FAIL: $name: no 'Final: $n' line"; tail -n 20 "$tmp/$name"; return 1
  fi
  echo "ok: $name: $(grep '^Final:' "$tmp/$name" | awk '{print "median " $3 " us, average " $4 " us"}') ($((SECONDS - t0)) s)"
}
