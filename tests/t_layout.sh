#!/usr/bin/env bash
# docs/layout.md describes the tree as it is: every path in its tree block exists (a name ending
# in / is a directory), every header under include/rvx/ is listed by its path, and so is every
# top-level directory of the repository (build/ and what git ignores excepted: made, not kept).
set -u
cd "$(dirname "$0")/.."
doc=docs/layout.md
[ -f "$doc" ] || { echo "FAIL: $doc is missing"; exit 1; }
# the first fenced block; a line that does not start with a space names a path
paths=$(awk '/^```/ { if (on) exit; on = 1; next } on && /^[^ ]/ { print $1 }' "$doc")
[ -n "$paths" ] || { echo "FAIL: no tree block in $doc"; exit 1; }
bad=0
for p in $paths; do
  case $p in
    */) [ -d "${p%/}" ] || { echo "listed but not a directory: $p"; bad=$((bad + 1)); } ;;
    *)  [ -f "$p" ] || { echo "listed but not a file: $p"; bad=$((bad + 1)); } ;;
  esac
done
listed() { grep -qxF -- "$1" <<<"$paths"; }
nh=0
while IFS= read -r h; do
  nh=$((nh + 1))
  listed "$h" || { echo "header not in $doc: $h"; bad=$((bad + 1)); }
done < <(find include/rvx -name '*.h' | sort)
[ $nh -gt 10 ] || { echo "FAIL: found only $nh headers under include/rvx"; exit 1; }
while IFS= read -r d; do
  d=${d#./}
  [ "$d" = build ] || [ "$d" = .git ] && continue
  git check-ignore -q "$d" 2>/dev/null && continue  # made by a build or a tool, not part of the tree
  listed "$d/" || { echo "top-level directory not in $doc: $d/"; bad=$((bad + 1)); }
done < <(find . -mindepth 1 -maxdepth 1 -type d | sort)
# every directory under include/rvx that holds a header is listed too
while IFS= read -r d; do
  listed "$d/" || { echo "directory not in $doc: $d/"; bad=$((bad + 1)); }
done < <(find include/rvx -mindepth 1 -type d | sort)
[ $bad -eq 0 ] || { echo "FAIL: $doc and the tree differ in $bad place(s)"; exit 1; }
echo "ok: $doc lists $(wc -w <<<"$paths") paths, all present; all $nh headers and every top-level directory are in it"
