#!/usr/bin/env bash
# Reads tests/MANIFEST (which test runs in which variant) for the Makefile, tests/run.sh,
# tests/t_manifest.sh and docs/tests.md:
#   tests/manifest.sh names VARIANT...  the names that run in (or are built for) any VARIANT
#                                       (V@N counts as V), one per line
#   tests/manifest.sh runs              one line per run, in run order, tab-separated: the run's
#                                       name, the file it needs, then the command
#   tests/manifest.sh bins              every file under build/ that the runs (and pair-compile) need
#   tests/manifest.sh table             docs/tests.md's table
set -u
cd "$(dirname "$0")/.."
rows() { awk '$1 ~ /^[a-z]/ && NF >= 3' tests/MANIFEST; }

case ${1:-} in
names)
  shift
  rows | awk -v want=" $* " '{
    n = split($2, v, ",")
    for (i = 1; i <= n; i++) { sub(/@.*/, "", v[i]); if (index(want, " " v[i] " ")) { print $1; break } } }' ;;
runs | bins)
  # shm, scripts, rc, dc, the pair suites, sim: each in name order, the pair suites in the
  # manifest's order (the ring example after each suite's tests)
  rows | awk -v mode="$1" '
    function emit(group, key, name, file, cmd) { printf "%d\t%s\t%s\t%s\t%s\n", group, key, name, file, cmd }
    {
      n = split($2, v, ",")
      for (i = 1; i <= n; i++) {
        var = v[i]; ranks = ""
        if (var ~ /@/) { ranks = var; sub(/.*@/, "", ranks); sub(/@.*/, "", var) }
        sim = "LD_LIBRARY_PATH=build/sim"; nm = $1; row = sprintf("%04d%02d", NR, i)
        if (var == "shm")         emit(1, nm, nm, "build/tests/" nm, "build/tests/" nm)
        else if (var == "script") emit(2, nm, nm, "tests/" nm ".sh", "bash tests/" nm ".sh")
        else if (var == "rc")     emit(3, nm, "rc/" nm, "build/tests-rc/" nm, "env " sim " build/tests-rc/" nm)
        else if (var == "dc")     emit(4, nm, "dc/" nm, "build/tests-dc/" nm, "env " sim " build/tests-dc/" nm)
        else if (var == "dc-fixed")
          emit(4, nm "_fixed", "dc/" nm "_fixed", "build/tests-dc/" nm "_fixed", "env " sim " build/tests-dc/" nm "_fixed")
        else if (var == "pair-compile") { if (mode == "bins") emit(9, nm, "-", "build/tests-pair/" nm, "-") }
        else if (var == "sim")
          emit(10, nm, "sim/" nm, "build/sim/tests/" nm, "env -u RVXSIM_STRICT " sim " build/sim/tests/" nm)
        else if (var ~ /^pair(1|-dc)?$/) {
          group = (var == "pair-dc") ? 7 : 5
          dir = (var == "pair-dc") ? "tests-pair-dc" : "tests-pair"
          nodes = (var == "pair1") ? 1 : 2
          if (nm !~ /^t_/)               # an example, on N ranks as 2 emulated nodes
            emit(group + 1, row, var "/" nm "_" ranks "_on_2_nodes", "build/examples-" var "/" nm, \
                 "env " sim " build/bin/rvxrun -t 120 -n " ranks " --nodes 2 build/examples-" var "/" nm)
          else if (ranks != "")
            emit(group, row, var "/" nm "_" ranks "_on_2_nodes", "build/" dir "/" nm, \
                 "env RVX_TEST_RANKS=" ranks " RVXRUN_NODES=2 " sim " build/" dir "/" nm)
          else
            emit(group, row, var "/" nm, "build/" dir "/" nm, "env RVXRUN_NODES=" nodes " " sim " build/" dir "/" nm)
        } else { print "tests/MANIFEST: " nm ": unknown variant " v[i] > "/dev/stderr"; bad = 1 }
      }
    }
    END { exit bad }' | LC_ALL=C sort -t "$(printf '\t')" -k1,1n -k2,2 |
  if [ "$1" = runs ]; then grep -v "^9	" | cut -f3-; else cut -f4 | grep '^build/' | LC_ALL=C sort -u; fi ;;
table)
  echo "| Test | Runs in | What it asserts |"
  echo "|---|---|---|"
  rows | awk '{ d = $0; sub(/^[^ ]+ +[^ ]+ +/, "", d); v = $2; gsub(/,/, ", ", v)
                printf "| `%s` | %s | %s |\n", $1, v, d }' ;;
*)
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
