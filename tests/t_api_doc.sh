#!/usr/bin/env bash
# The public API is listed in one place: every public rvx_ function, function-like macro and
# type defined under include/rvx/ appears in the top comment of include/rvx/rvx.h.
set -u
cd "$(dirname "$0")/.."
top=$(awk '{ print } /\*\// { exit }' include/rvx/rvx.h)
[ -n "$top" ] || { echo "FAIL: no top comment in include/rvx/rvx.h"; exit 1; }
# definitions: functions (static inline / RVX_INLINE ... rvx_x(), function-like macros
# (#define rvx_x(), typedefs (} rvx_x_t;)
names=$(grep -rhoE '^(static inline|RVX_INLINE)[^(]*[^_a-z0-9]rvx_[a-z0-9][a-z0-9_]*\(|^#define rvx_[a-z0-9][a-z0-9_]*\(|^\} rvx_[a-z0-9_]+_t;' include/rvx |
        grep -oE 'rvx_[a-z0-9][a-z0-9_]*' | grep -v '^rvx__' | sort -u)
n=$(wc -w <<<"$names")
[ "$n" -ge 60 ] || { echo "FAIL: found only $n public names; the pattern is broken"; exit 1; }
missing=0
for f in $names; do
  grep -qE "(^|[^_a-z0-9])$f([^_a-z0-9]|$)" <<<"$top" || { echo "not in rvx.h's API list: $f"; missing=$((missing + 1)); }
done
[ $missing -eq 0 ] || { echo "FAIL: $missing public name(s) missing from the top of include/rvx/rvx.h"; exit 1; }
echo "ok: all $n public rvx_ names are listed at the top of include/rvx/rvx.h"
