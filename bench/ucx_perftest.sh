#!/usr/bin/env bash
# ucx_perftest.sh - run UCX's own ucx_perftest over shared memory, server and
# client on this machine (loopback 127.0.0.1), and print one machine-readable
# line per test:
#
#   ucx <test> lat_us <x>        one-way latency, overall average (usec);
#                                ucx_perftest reports half the round trip
#   ucx <test> lat_p50_us <x>    same, median of the per-iteration samples
#   ucx <test> rate_mops <x>     message rate, millions of messages/s
#   ucx <test> bw_MBs <x>        rate tests: rate x message size, MB/s (10^6 bytes)
#   ucx <test> error <reason>    the test did not produce a result
#
# Usage (from the repo root):
#   bench/ucx_perftest.sh                 # all tests
#   bench/ucx_perftest.sh am_lat tag_lat  # a subset
#
# Environment:
#   UCX_LOG         raw ucx_perftest output (default build/bench/ucx_perftest.log)
#   UCX_LOG_APPEND  1 = append to UCX_LOG instead of truncating it
#   UCX_SHM_TLS     UCX_TLS value for the UCP tests (default posix,self)
#   UCX_LAT_ITERS   iterations of latency tests (default 100000)
#   UCX_BW_ITERS    iterations of rate tests (default 1000000)
#   UCX_MSG_SIZE    message size in bytes, ucx_perftest -s (default 8)
#
# Always exits 0: a failing test is reported with an "error" line.
set -u

ALL_TESTS="am_lat tag_lat ucp_put_lat ucp_put_bw tag_bw"
TESTS="${*:-$ALL_TESTS}"

UCX_LOG="${UCX_LOG:-build/bench/ucx_perftest.log}"
SHM_TLS="${UCX_SHM_TLS:-posix,self}"
LAT_ITERS="${UCX_LAT_ITERS:-100000}"
BW_ITERS="${UCX_BW_ITERS:-1000000}"
MSG_SIZE="${UCX_MSG_SIZE:-8}"
CLIENT_TIMEOUT=20   # seconds; one test normally takes well under 1 s
SERVER_TIMEOUT=30   # the server outlives the client a little, never more

PERFTEST="$(command -v ucx_perftest || true)"
if [ -z "$PERFTEST" ]; then
    echo "ucx_perftest.sh: ucx_perftest not found (install the ucx-utils package); skipping UCX tests" >&2
    for t in $TESTS; do echo "ucx $t error ucx_perftest not installed"; done
    exit 0
fi

mkdir -p "$(dirname "$UCX_LOG")"
[ "${UCX_LOG_APPEND:-0}" = 1 ] || : > "$UCX_LOG"

# Pin server to CPU 0 and client to CPU 1 (ucx_perftest -c) when there are
# at least two CPUs; otherwise leave placement to the scheduler.
if [ "$(nproc 2>/dev/null || echo 1)" -ge 2 ]; then
    SRV_CPU=(-c 0); CLI_CPU=(-c 1)
else
    SRV_CPU=(); CLI_CPU=()
    echo "ucx_perftest.sh: fewer than 2 CPUs, running unpinned" >&2
fi

SERVER_PID=""
CLIENT_PID=""
SRV_OUT="$(mktemp)"
CLI_OUT="$(mktemp)"

# Stop a still-running client/server (the `timeout` wrappers forward the
# signal to ucx_perftest) and remove temp files, whatever way the script ends.
# shellcheck disable=SC2317  # called from the EXIT trap
cleanup() {
    local pid
    for pid in $CLIENT_PID $SERVER_PID; do
        kill "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    done
    CLIENT_PID=""
    SERVER_PID=""
    rm -f "$SRV_OUT" "$CLI_OUT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

. tests/ports.sh # free_port, listening

# run_test NAME KIND ARGS...   (KIND = lat or rate; ARGS = ucx_perftest
# arguments common to server and client; "env VAR=..." may come first)
run_test() {
    local name="$1" kind="$2"; shift 2
    local port rc reason

    port="$(free_port)"
    [ "$port" != 0 ] || { echo "ucx $name error no free TCP port"; return; }

    {
        echo "=== $name: server: $* -p $port ${SRV_CPU[*]}"
        echo "=== $name: client: $* 127.0.0.1 -p $port ${CLI_CPU[*]}"
    } >> "$UCX_LOG"

    # Server: waits for one client on the port, runs the test, exits.
    # `timeout -k 2` bounds it even if it ignores SIGTERM.
    timeout -k 2 "$SERVER_TIMEOUT" "$@" -p "$port" "${SRV_CPU[@]}" > "$SRV_OUT" 2>&1 &
    SERVER_PID=$!

    # Wait (max ~5 s) until the server listens, so the client never races it.
    for _ in $(seq 1 50); do
        listening "$port" && break
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    if ! listening "$port"; then
        cat "$SRV_OUT" >> "$UCX_LOG"
        echo "ucx $name error server did not start listening on port $port"
        cleanup_server
        return
    fi

    # Client: connects over loopback and prints the results table.
    # Run in the background and `wait`, so that an INT/TERM to this script is
    # handled at once (cleanup stops both sides) instead of after the client.
    timeout -k 2 "$CLIENT_TIMEOUT" "$@" 127.0.0.1 -p "$port" "${CLI_CPU[@]}" > "$CLI_OUT" 2>&1 &
    CLIENT_PID=$!
    wait "$CLIENT_PID"
    rc=$?
    CLIENT_PID=""

    # Give the server a moment to finish on its own, then make sure it is gone.
    for _ in $(seq 1 30); do
        kill -0 "$SERVER_PID" 2>/dev/null || break
        sleep 0.1
    done
    cleanup_server

    {
        echo "--- $name: server output"; cat "$SRV_OUT"
        echo "--- $name: client output (exit $rc)"; cat "$CLI_OUT"
    } >> "$UCX_LOG"

    # Result row: "Final: iters lat_p50 lat_avg lat_overall bw_avg bw_overall
    #              rate_avg rate_overall" (latency in usec, rate in msg/s).
    local final
    final="$(grep '^Final:' "$CLI_OUT" | tail -n 1)"
    if [ "$rc" -ne 0 ] || [ -z "$final" ]; then
        if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
            reason="timed out after ${CLIENT_TIMEOUT}s"
        else
            # First UCX error/failure message, if any, else the exit code.
            # (the "[timestamp] [host:pid] file:line UCX ERROR" prefix is dropped)
            reason="$(grep -iE 'error|fail|unsupported|not supported' "$CLI_OUT" | head -n 1 |
                      sed -E 's/^\[[^]]*\] +\[[^]]*\] +[^ ]+ +UCX +[A-Z]+ +//' | tr -s ' ' | cut -c1-160)"
            [ -n "$reason" ] || reason="exit code $rc, no result line"
        fi
        echo "ucx $name error $reason"
        return
    fi
    if [ "$kind" = lat ]; then
        echo "$final" | awk -v n="$name" '{ printf "ucx %s lat_us %.3f\nucx %s lat_p50_us %.3f\n", n, $5, n, $3 }'
    else
        echo "$final" | awk -v n="$name" -v s="$MSG_SIZE" \
            '{ printf "ucx %s rate_mops %.2f\nucx %s bw_MBs %.1f\n", n, $9 / 1e6, n, $9 * s / 1e6 }'
    fi
}

cleanup_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
    fi
    SERVER_PID=""
}

LAT=(-n "$LAT_ITERS" -w $(( LAT_ITERS / 10 )) -s "$MSG_SIZE")
BW=(-n "$BW_ITERS" -w $(( BW_ITERS / 10 )) -s "$MSG_SIZE")

for t in $TESTS; do
    case "$t" in
        # UCT active-message ping-pong, short data layout, posix shared memory.
        am_lat)      run_test am_lat lat "$PERFTEST" -t am_lat -x posix -d memory "${LAT[@]}" ;;
        # UCP tests: UCX_TLS restricted to shared-memory + self transports.
        tag_lat)     run_test tag_lat lat env UCX_TLS="$SHM_TLS" "$PERFTEST" -t tag_lat "${LAT[@]}" ;;
        ucp_put_lat) run_test ucp_put_lat lat env UCX_TLS="$SHM_TLS" "$PERFTEST" -t ucp_put_lat "${LAT[@]}" ;;
        ucp_put_bw)  run_test ucp_put_bw rate env UCX_TLS="$SHM_TLS" "$PERFTEST" -t ucp_put_bw "${BW[@]}" ;;
        tag_bw)      run_test tag_bw rate env UCX_TLS="$SHM_TLS" "$PERFTEST" -t tag_bw "${BW[@]}" ;;
        *)           echo "ucx $t error unknown test (known: $ALL_TESTS)" ;;
    esac
done
exit 0
