# Sourced by the tests that start ranks with Open MPI's mpirun (tests/t_mpirun*.sh).
# mpirun_setup: find mpirun (install it with tools/deps.sh if it is missing and we may), or skip
# the test with the reason; then MPIRUN is the command line for ranks on this machine alone:
#   --oversubscribe     more ranks than cores (a 2-core CI machine runs 3 or 4)
#   --bind-to none      let the kernel place ranks that wait by sleeping; pinning two to a core
#                       would only slow them down
#   --mca plm isolated  no remote daemons, so no ssh/rsh is looked for (containers)
#   --allow-run-as-root CI runs as root
mpirun_setup() {
  local m
  m=$(command -v mpirun.openmpi || true)
  if [ -z "$m" ] && [ "$(id -u)" -eq 0 ]; then
    tools/deps.sh >/dev/null 2>&1
    m=$(command -v mpirun.openmpi || true)
  fi
  if [ -z "$m" ]; then
    echo "SKIP: Open MPI's mpirun is not installed and cannot be installed here (as root: apt-get install openmpi-bin)"
    exit 77
  fi
  MPIRUN=("$m" --oversubscribe --bind-to none --mca plm isolated)
  [ "$(id -u)" -eq 0 ] && MPIRUN+=(--allow-run-as-root)
  local b
  for b in "$@"; do
    [ -x "$b" ] || { echo "FAIL: $b is missing: build it first (make all; needs libpmix-dev)"; exit 1; }
  done
}

# mpirun_check description expected-regex count command... : the command's output must contain
# the regex on `count` lines, no line with FAIL, and the command must exit 0 within
# MPIRUN_LIMIT seconds (default 30).
mpirun_fails=0
mpirun_check() {
  local what=$1 want=$2 count=$3; shift 3
  local out rc got
  out=$(timeout -k 5 "${MPIRUN_LIMIT:-30}" "$@" 2>&1); rc=$?
  got=$(grep -cE -- "$want" <<<"$out")
  if [ $rc -ne 0 ] || [ "$got" -ne "$count" ] || grep -q FAIL <<<"$out"; then
    echo "FAIL: $what (exit $rc, $got of $count lines matching \"$want\")"
    echo "$out" | tail -15 | sed 's/^/  | /'
    mpirun_fails=$((mpirun_fails + 1))
  else
    echo "ok: $what"
  fi
}
