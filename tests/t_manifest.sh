#!/usr/bin/env bash
# tests/MANIFEST is the one list of which test runs where, and nothing disagrees with it:
#  - it parses (known variants, no name twice in one variant) and every name has its source
#    (tests/NAME.c, or the source a rendezvous build NAME_get ... comes from; tests/NAME.sh;
#    sim/tests/NAME.c; examples/NAME.c);
#  - every test source has its line: tests/t_*.c (by name or a build of it, or a script that
#    drives it), tests/t_*.sh, sim/tests/t_*.c;
#  - `make all` builds exactly the test binaries it lists (make -n, nothing is built): none
#    missing, none that no line names (sim/tests/tests.mk keeps rvxsim's own list);
#  - docs/tests.md's table is tests/manifest.sh's table.
set -u
cd "$(dirname "$0")/.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
bad=0
fail() { echo "FAIL: $*"; bad=1; }

tests/manifest.sh runs >"$tmp/runs" || fail "tests/manifest.sh cannot read tests/MANIFEST"
awk '$1 ~ /^[a-z]/ && NF >= 3' tests/MANIFEST >"$tmp/rows"
awk '$1 ~ /^[a-z]/ && NF < 3 { print "FAIL: tests/MANIFEST: line " NR " has no description: " $0 }' \
  tests/MANIFEST | grep . && bad=1
cut -f1 "$tmp/runs" | sort | uniq -d | sed 's/^/FAIL: run twice: /' | grep . && bad=1

# every name has its source
rndv='_(get|put|am|pipeline)$'
while read -r name where _; do
  case ,$where, in
    *,script,*) [ -f "tests/$name.sh" ] || fail "$name: no tests/$name.sh" ;;
    *,sim,*) [ -f "sim/tests/$name.c" ] || fail "$name: no sim/tests/$name.c" ;;
    *) if [[ $name != t_* ]]; then
         [ -f "examples/$name.c" ] || fail "$name: no examples/$name.c"
       elif [ ! -f "tests/$name.c" ] && ! { [[ $name =~ $rndv ]] && [ -f "tests/${name%_*}.c" ]; }; then
         fail "$name: no tests/$name.c (nor the source of a rendezvous build)"
       fi ;;
  esac
done <"$tmp/rows"

# every source has its line
for f in tests/t_*.c; do
  n=$(basename "$f" .c)
  awk -v n="$n" '$1 == n || index($1, n "_") == 1' "$tmp/rows" | grep -q . ||
    fail "$f: no line in tests/MANIFEST (add one: name, variants, what it asserts)"
done
for f in tests/t_*.sh; do
  n=$(basename "$f" .sh)
  awk -v n="$n" '$1 == n && ("," $2 ",") ~ /,script,/' "$tmp/rows" | grep -q . ||
    fail "$f: no script line in tests/MANIFEST"
done
for f in sim/tests/t_*.c; do
  n=$(basename "$f" .c)
  awk -v n="$n" '$1 == n && ("," $2 ",") ~ /,sim,/' "$tmp/rows" | grep -q . ||
    fail "$f: no sim line in tests/MANIFEST"
done

# make builds what the manifest lists, no more, no less
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory -n -k -B all >"$tmp/make.out" 2>"$tmp/make.err" ||
  { fail "make -n all:"; grep -v '^make: Target .* not remade' "$tmp/make.err" | head -5 | sed 's/^/  | /'; }
grep -oE ' -o build/(tests(-[a-z-]+)?|sim/tests)/[^ ]+' "$tmp/make.out" | sed 's/^ -o //' | LC_ALL=C sort -u >"$tmp/built"
[ -s "$tmp/built" ] || fail "make -n all printed no test builds"
tests/manifest.sh bins | grep -v '^build/examples' >"$tmp/listed"
LC_ALL=C comm -13 "$tmp/listed" "$tmp/built" | sed 's/^/FAIL: built but in no line of tests\/MANIFEST: /' | grep . && bad=1
LC_ALL=C comm -23 "$tmp/listed" "$tmp/built" | sed 's/^/FAIL: in tests\/MANIFEST but make does not build it: /' | grep . && bad=1

# docs/tests.md shows the manifest
tests/manifest.sh table >"$tmp/table"
grep '^|' docs/tests.md | sed -n '/^| Test | Runs in |/,$p' >"$tmp/doc"
if ! diff -u "$tmp/table" "$tmp/doc" >"$tmp/diff"; then
  fail "docs/tests.md's table is not tests/MANIFEST's (tests/manifest.sh table prints it):"
  head -20 "$tmp/diff" | sed 's/^/  | /'
fi

n=$(wc -l <"$tmp/runs")
[ $bad -eq 0 ] && echo "ok: tests/MANIFEST: $(wc -l <"$tmp/rows") tests, $n runs; make builds $(wc -l <"$tmp/built") test binaries, each listed; docs/tests.md agrees"
exit $bad
