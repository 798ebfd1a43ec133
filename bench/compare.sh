#!/usr/bin/env bash
# compare.sh - one-run comparison of rvx against the cache-line floor and UCX.
#
# In one go, ROUNDS rounds (default 3), each running back to back, so all
# three see the same machine state:
#   build/bench/floor_pingpong   cache-line ping-pong floor
#   build/bench/rvx_lat          rvx 8-byte AM one-way latency, put rate, atomic add latency
#   build/bench/tag_lat --quick  rvx 8-byte tag one-way latency and message rate
#   bench/ucx_perftest.sh        UCX: am_lat (UCT), tag_lat, ucp_put_lat,
#                                ucp_put_bw, tag_bw (UCP) over shared memory
# then the median of every number over the rounds, and the ratios.
#
# Output (machine readable, one "key value" per line; "#" lines are notes):
#   round <r> <tool line>               every result of every round
#   floor oneway_ns <x>                 medians, same keys as the tools print:
#   rvx am_lat_ns <x>                   (floor also one_line/two_lines and
#   rvx put_rate_mops <x>                rt_p50_ns/rt_p99_ns, ucx also
#   ucx <test> lat_us|rate_mops <x>      lat_p50_us)
#   ratio am_lat_vs_floor <x>           rvx AM one-way / floor one-way
#   ratio am_lat_vs_ucx_uct_am <x>      rvx AM one-way / UCX UCT am_lat one-way
#   ratio put_rate_vs_ucx <x>           rvx put rate / UCX ucp_put_bw rate
#   ratio tag_lat_vs_ucx <x>            rvx tag one-way / UCX UCP tag_lat one-way (8 bytes)
#   ratio tag_bw_vs_ucx <x>             rvx tag message rate / UCX UCP tag_bw rate (8 bytes)
#   ratio tag_lat_ucx_vs_floor <x>      UCX UCP tag_lat / floor (informational)
#   ratio am_lat_ucx_vs_floor <x>       UCX UCT am_lat / floor (informational)
#   ratio am_lat_vs_floor_two_lines <x> rvx AM / one-line-per-direction floor
#   ratio am_lat_vs_floor_rings <x>     rvx AM / the floor of a request-plus-reply protocol over
#                                       a ring per direction (floor_pingpong's rings layout)
#   ratio am_rt_p50_vs_floor_rings <x>  the same on the median single round trip (rvx am_rt_p50_ns
#                                       / floor rings rt_p50_ns): steadier on a loaded machine
#   floor pause ... / rvx pause ...     part "pause": floor_pingpong -p and rvx_lat with relax 1, a
#                                       pause in every empty pass of both sides' waits, as rvx's own
#                                       waits do (the rows above spin bare, as ucx_perftest does)
#   ratio am_lat_min_vs_floor_one_line_min <x>, am_lat_min_vs_floor_rings_min <x>: the fastest
#                                       blocks' (rvx am_lat_min_ns, floor <layout> oneway_min_ns)
#   ratio pause_am_lat_vs_floor <x>, pause_am_lat_vs_floor_two_lines <x>, pause_am_lat_vs_floor_rings
#                                       <x>, pause_am_rt_p50_vs_floor_rings <x>,
#                                       pause_am_lat_min_vs_floor_one_line_min <x>,
#                                       pause_am_lat_min_vs_floor_rings_min <x>: the same ratios,
#                                       both sides pausing
#   ratio pair_am_lat_vs_shm <x>        the pair build's on-node AM one-way (rvx pair_am_lat_ns,
#                                       build/bench/rvx_lat_pair: shm on the node + rc_mlx5, on
#                                       rvxsim, both ranks on one node) / the shm-only build's
#   goal pair_am_lat_vs_shm <= 1.05: <x>: met|NOT MET
#   ratio pair_put_rate_vs_shm <x>      the same for the put rate (informational)
# A ratio whose inputs are missing is printed as "ratio <name> n/a (...)".
# "# warning: <key> varied a..b over the rounds" flags a machine-state change.
# A tool that fails prints "round <r> <tool> error ..." and the rest goes on.
#
# Usage (from anywhere; paths are relative to the repo root):
#   bench/compare.sh
# Environment: ROUNDS (3), RVX_LAT (path of the rvx binary, default
#   build/bench/rvx_lat), RVX_LAT_ARGS and FLOOR_ARGS (extra arguments),
#   UCX_LOG (raw ucx_perftest output, default build/bench/ucx_perftest.log), RVX_LAT_PAIR (the pair
#   build, default build/bench/rvx_lat_pair; skipped when absent), COMPARE_PARTS (default all:
#   "floor rvx pause tag ucx pair"; e.g. COMPARE_PARTS="rvx pair" ROUNDS=9 for the pair ratio
#   alone), PAUSE_FLOOR_ARGS (default "-p") and PAUSE_RVX_LAT_ARGS (default "21 20000 10000000 1").
# rvx_lat and rvx_lat_pair run back to back in every round, in alternating order.
set -u

cd "$(dirname "$0")/.." || exit 1   # repo root, so relative paths hold

ROUNDS="${ROUNDS:-3}"
FLOOR_BIN=build/bench/floor_pingpong
RVX_BIN="${RVX_LAT:-build/bench/rvx_lat}"
UCX_SH=bench/ucx_perftest.sh
export UCX_LOG="${UCX_LOG:-build/bench/ucx_perftest.log}"
RUN_TIMEOUT=60   # seconds, bound for one floor or rvx_lat run

mkdir -p build/bench

# Build the floor if it is not there yet (same command as documented).
if [ ! -x "$FLOOR_BIN" ]; then
    echo "# building $FLOOR_BIN"
    gcc -O2 -o "$FLOOR_BIN" bench/floor_pingpong.c || echo "# could not build $FLOOR_BIN"
fi
want() { [[ " ${COMPARE_PARTS:-floor rvx pause tag ucx pair} " == *" $1 "* ]]; }
HAVE_FLOOR=0; [ -x "$FLOOR_BIN" ] && want floor && HAVE_FLOOR=1
HAVE_RVX=0;   [ -x "$RVX_BIN" ] && want rvx && HAVE_RVX=1
TAG_BIN="${TAG_LAT:-build/bench/tag_lat}"
HAVE_TAG=0;   [ -x "$TAG_BIN" ] && want tag && HAVE_TAG=1
PAIR_BIN="${RVX_LAT_PAIR:-build/bench/rvx_lat_pair}"
HAVE_PAIR=0;  [ -x "$PAIR_BIN" ] && want pair && HAVE_PAIR=1
[ "$HAVE_TAG" = 1 ] || ! want tag || echo "# $TAG_BIN is missing (build it first): skipping the rvx tag lines"
[ "$HAVE_RVX" = 1 ] || ! want rvx || echo "# $RVX_BIN is missing (build it first): skipping the rvx lines"
[ "$HAVE_PAIR" = 1 ] || ! want pair ||
    echo "# pair build not present ($PAIR_BIN is missing: it needs include/rvx/tl/pair.h): skipping the pair lines"

# value KEY... < text : print the field after the key words on the first
# line that starts with them (e.g. `value floor oneway_ns`).
value() {
    awk -v k="$*" 'index($0, k " ") == 1 { n = split(k, w, " "); print $(n + 1); exit }'
}

# ratio NAME NUM DEN [SCALE] : print NUM*SCALE/DEN, or n/a if an input is missing.
ratio() {
    local name="$1" num="$2" den="$3" scale="${4:-1}"
    if [ -z "$num" ] || [ -z "$den" ]; then
        echo "ratio $name n/a (missing input)"
        return
    fi
    awk -v n="$num" -v d="$den" -v s="$scale" -v name="$name" \
        'BEGIN { if (d + 0 == 0) print "ratio " name " n/a (zero denominator)";
                 else printf "ratio %s %.3f\n", name, n * s / d }'
}

RESULTS="$(mktemp)"            # every numeric result line of every round
trap 'rm -f "$RESULTS"' EXIT
: > "$UCX_LOG"                  # the UCX runs below append to a fresh log

# keep ROUND < text : echo the tool's result lines as "round <r> ...", and
# store those ending in a number for the medians.
keep() {
    grep -E '^(floor|rvx|ucx) ' | while IFS= read -r line; do
        echo "round $1 $line"
        # last field a plain number (e.g. 12, 0.125, 1e-3)?
        if echo "${line##* }" | grep -qE '^-?[0-9]+([.][0-9]*)?([eE][-+]?[0-9]+)?$'; then
            echo "$line" >> "$RESULTS"
        fi
    done
}

# run_pair ROUND: the pair build of rvx_lat (both ranks on node 0, so the ping-pong takes the shm
# path; its rc_mlx5 half runs on rvxsim), its keys renamed "rvx pair_<key>"
run_pair() {
    # shellcheck disable=SC2086
    out="$(LD_LIBRARY_PATH="$PWD/build/sim${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" RVX_NODE=0 \
           timeout -k 2 "$RUN_TIMEOUT" "$PAIR_BIN" ${RVX_LAT_ARGS:-})" ||
        echo "round $1 rvx error rvx_lat_pair exit code $?"
    [ "$1" = 1 ] && echo "$out" | grep -E '^# rvx ' | sed 's/^# /# rvx_lat_pair: /'
    echo "$out" | sed -E 's/^rvx ([a-z_]+ )/rvx pair_\1/' | keep "$1"
}

echo "# $ROUNDS rounds of floor_pingpong, rvx_lat, rvx_lat_pair, tag_lat, ucx_perftest.sh, back to back"
for r in $(seq 1 "$ROUNDS"); do
    if [ "$HAVE_FLOOR" = 1 ]; then
        # shellcheck disable=SC2086  # FLOOR_ARGS is a word list on purpose
        out="$(timeout -k 2 "$RUN_TIMEOUT" "$FLOOR_BIN" ${FLOOR_ARGS:-})" ||
            echo "round $r floor error exit code $?"
        # pinning/params are the same every round: show them once, as comments
        [ "$r" = 1 ] && echo "$out" | grep -E '^floor (pinning|warning|params|timer )' | sed 's/^/# /'
        echo "$out" | grep -vE '^floor (pinning|warning|params|timer )' | keep "$r"
    fi
    # the shm-only and the pair build of rvx_lat back to back, the pair one first in even rounds
    if [ "$HAVE_PAIR" = 1 ] && [ $((r % 2)) = 0 ]; then run_pair "$r"; fi
    if [ "$HAVE_RVX" = 1 ]; then
        # shellcheck disable=SC2086
        out="$(timeout -k 2 "$RUN_TIMEOUT" "$RVX_BIN" ${RVX_LAT_ARGS:-})" ||
            echo "round $r rvx error exit code $?"
        echo "$out" | keep "$r"
    fi
    if [ "$HAVE_PAIR" = 1 ] && [ $((r % 2)) = 1 ]; then run_pair "$r"; fi
    # the floor and the AM ping-pong again, both sides pausing in their waits: keys "floor pause
    # ..." and "rvx pause ..."
    if want pause && [ -x "$FLOOR_BIN" ] && [ -x "$RVX_BIN" ]; then
        # shellcheck disable=SC2086
        out="$(timeout -k 2 "$RUN_TIMEOUT" "$FLOOR_BIN" ${PAUSE_FLOOR_ARGS:--p})" ||
            echo "round $r floor error (pause) exit code $?"
        echo "$out" | grep -vE '^floor (pinning|warning|params|timer )' | sed 's/^floor /floor pause /' | keep "$r"
        # shellcheck disable=SC2086
        out="$(timeout -k 2 "$RUN_TIMEOUT" "$RVX_BIN" ${PAUSE_RVX_LAT_ARGS:-21 20000 10000000 1})" ||
            echo "round $r rvx error (pause) exit code $?"
        echo "$out" | grep -E '^rvx am_' | sed 's/^rvx /rvx pause /' | keep "$r"
    fi
    if [ "$HAVE_TAG" = 1 ]; then
        out="$(timeout -k 2 "$RUN_TIMEOUT" "$TAG_BIN" --quick)" || echo "round $r rvx error tag_lat exit code $?"
        [ "$r" = 1 ] && echo "$out" | grep -E '^# eager/rendezvous' | sed 's/^/# tag_lat: /'
        echo "$out" | keep "$r"
    fi
    want ucx && UCX_LOG_APPEND=1 "$UCX_SH" | keep "$r"
done

# Median per key ("key words" = all fields but the last, numeric one).
# mawk has no sort function, so sort(1) groups the keys and orders values.
echo "# results: medians over $ROUNDS rounds (raw UCX output: $UCX_LOG)"
MEDIANS="$(awk '{ v = $NF; sub(/ [^ ]+$/, ""); print $0 "\t" v }' "$RESULTS" |
    LC_ALL=C sort -t "$(printf '\t')" -k1,1 -k2,2g |
    awk -F '\t' 'function flush() { if (n) print key, (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) }
                 $1 != key { flush(); key = $1; n = 0 }
                 { a[++n] = $2 }
                 END { flush() }')"
echo "$MEDIANS"

# The host can move the two vCPUs/cores between "near" and "far" placements
# within seconds (floor 25-30 ns vs ~160 ns seen on a 2-vCPU VM). Warn when
# the rounds of a latency key disagree by more than 1.5x.
for key in "floor oneway_ns" "floor rings oneway_ns" "floor pause oneway_ns" "rvx pause am_lat_ns" "rvx am_lat_ns" "rvx pair_am_lat_ns" "rvx tag_lat_ns" "ucx am_lat lat_us" "ucx tag_lat lat_us"; do
    awk -v k="$key" 'index($0, k " ") == 1 && NF == split(k, w, " ") + 1 {
            v = $NF + 0; if (n == 0 || v < lo) lo = v; if (n == 0 || v > hi) hi = v; n++ }
         END { if (n > 1 && lo > 0 && hi > 1.5 * lo)
                   printf "# warning: %s varied %g..%g over the rounds (machine state change or odd run: rerun)\n", k, lo, hi }' "$RESULTS"
done

FLOOR="$(echo "$MEDIANS" | value floor oneway_ns)"
FLOOR2="$(echo "$MEDIANS" | value floor two_lines oneway_ns)"
AM="$(echo "$MEDIANS" | value rvx am_lat_ns)"
PUT="$(echo "$MEDIANS" | value rvx put_rate_mops)"
UAM="$(echo "$MEDIANS" | value ucx am_lat lat_us)"
UTAG="$(echo "$MEDIANS" | value ucx tag_lat lat_us)"
UPUT="$(echo "$MEDIANS" | value ucx ucp_put_bw rate_mops)"
TAG="$(echo "$MEDIANS" | value rvx tag_lat_ns)"
TAGBW="$(echo "$MEDIANS" | value rvx tag_bw_mops)"
UTAGBW="$(echo "$MEDIANS" | value ucx tag_bw rate_mops)"

# Latencies: rvx and floor in ns, UCX in us (scaled by 1000 where mixed).
ratio am_lat_vs_floor      "$AM"   "$FLOOR"
ratio am_lat_vs_ucx_uct_am "$AM"   "$UAM"   0.001
ratio put_rate_vs_ucx      "$PUT"  "$UPUT"
ratio tag_lat_vs_ucx       "$TAG"  "$UTAG"  0.001
ratio tag_bw_vs_ucx        "$TAGBW" "$UTAGBW"
ratio tag_lat_vs_am_lat    "$TAG"  "$AM"
ratio tag_lat_ucx_vs_floor "$UTAG" "$FLOOR" 1000
ratio am_lat_ucx_vs_floor  "$UAM"  "$FLOOR" 1000
ratio am_lat_vs_floor_two_lines "$AM" "$FLOOR2"
ratio am_lat_vs_floor_rings "$AM" "$(echo "$MEDIANS" | value floor rings oneway_ns)"
ratio am_rt_p50_vs_floor_rings "$(echo "$MEDIANS" | value rvx am_rt_p50_ns)" \
      "$(echo "$MEDIANS" | value floor rings rt_p50_ns)"
# the fastest block of each program, median over the rounds: on a loaded machine the blocks' median
# takes in the time a side was descheduled, the fastest block does not
ratio am_lat_min_vs_floor_one_line_min "$(echo "$MEDIANS" | value rvx am_lat_min_ns)" \
      "$(echo "$MEDIANS" | value floor one_line oneway_min_ns)"
ratio am_lat_min_vs_floor_rings_min "$(echo "$MEDIANS" | value rvx am_lat_min_ns)" \
      "$(echo "$MEDIANS" | value floor rings oneway_min_ns)"
PSAM="$(echo "$MEDIANS" | value rvx pause am_lat_ns)"
if [ -n "$PSAM" ]; then
    ratio pause_am_lat_vs_floor "$PSAM" "$(echo "$MEDIANS" | value floor pause oneway_ns)"
    ratio pause_am_lat_vs_floor_two_lines "$PSAM" "$(echo "$MEDIANS" | value floor pause two_lines oneway_ns)"
    ratio pause_am_lat_vs_floor_rings "$PSAM" "$(echo "$MEDIANS" | value floor pause rings oneway_ns)"
    ratio pause_am_rt_p50_vs_floor_rings "$(echo "$MEDIANS" | value rvx pause am_rt_p50_ns)" \
          "$(echo "$MEDIANS" | value floor pause rings rt_p50_ns)"
    ratio pause_am_lat_min_vs_floor_one_line_min "$(echo "$MEDIANS" | value rvx pause am_lat_min_ns)" \
          "$(echo "$MEDIANS" | value floor pause one_line oneway_min_ns)"
    ratio pause_am_lat_min_vs_floor_rings_min "$(echo "$MEDIANS" | value rvx pause am_lat_min_ns)" \
          "$(echo "$MEDIANS" | value floor pause rings oneway_min_ns)"
fi

# The pair build against the shm-only build, on one node: goal <= 1.05
PAM="$(echo "$MEDIANS" | value rvx pair_am_lat_ns)"
PPUT="$(echo "$MEDIANS" | value rvx pair_put_rate_mops)"
if [ "$HAVE_PAIR" = 1 ]; then
    line="$(ratio pair_am_lat_vs_shm "$PAM" "$AM")"
    echo "$line"
    echo "$line" | awk '$3 ~ /^[0-9.]+$/ { printf "goal pair_am_lat_vs_shm <= 1.05: %s: %s\n", $3, $3 <= 1.05 ? "met" : "NOT MET" }
                        $3 !~ /^[0-9.]+$/ { print "goal pair_am_lat_vs_shm <= 1.05: n/a" }'
    ratio pair_put_rate_vs_shm "$PPUT" "$PUT"
    # on-node atomics go through the NIC in the pair (atomic against off-node ones): their cost
    ratio pair_amo_lat_vs_shm "$(echo "$MEDIANS" | value rvx pair_amo_lat_ns)" \
          "$(echo "$MEDIANS" | value rvx amo_lat_ns)"
fi
exit 0
