#!/usr/bin/env bash
# The bootstrap is chosen at build time: RVX_BOOT_LOCAL (default) and RVX_BOOT_PMIX build, each
# names itself in rvx_config_string(), and any other value is an #error that says what to use.
set -u
cd "$(dirname "$0")/.."
CC=${CC:-cc}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '#include <rvx/rvx.h>\n#include <stdio.h>\nint main(void) { puts(rvx_config_string()); return 0; }\n' > "$tmp/p.c"
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

out=$($CC -std=c11 -Iinclude -fsyntax-only -DRVX_BOOT=7 "$tmp/p.c" 2>&1) && fail "RVX_BOOT=7 built"
grep -qF "RVX_BOOT has an unknown value: define it as RVX_BOOT_LOCAL" <<<"$out" && echo "ok: RVX_BOOT=7 is refused with its message" \
  || fail "RVX_BOOT=7 without the message: $(head -3 <<<"$out")"
out=$($CC -std=c11 -Iinclude -fsyntax-only -DRVX_BOOT=RVX_BOOT_SLURM "$tmp/p.c" 2>&1) && fail "RVX_BOOT=RVX_BOOT_SLURM built"
grep -qF "RVX_BOOT has an unknown value" <<<"$out" && echo "ok: an unknown name is refused" || fail "unknown name: $out"

for boot in "" RVX_BOOT_LOCAL RVX_BOOT_PMIX; do
  flags=(-std=c11 -Wall -Wextra -Werror -Iinclude)
  want=local
  [ -n "$boot" ] && flags+=(-DRVX_BOOT=$boot)
  if [ "$boot" = RVX_BOOT_PMIX ]; then
    pkg-config --exists pmix || { fail "libpmix-dev is missing (make deps)"; continue; }
    want=pmix
  fi
  # shellcheck disable=SC2046
  if $CC "${flags[@]}" -o "$tmp/p" "$tmp/p.c" $([ "$want" = pmix ] && pkg-config --cflags --libs pmix) 2>"$tmp/err"; then
    s=$("$tmp/p")
    grep -q " boot=$want " <<<"$s" && echo "ok: ${boot:-default} builds and says boot=$want" || fail "${boot:-default}: config string $s"
  else
    fail "${boot:-default} does not build: $(head -3 "$tmp/err")"
  fi
done
# The PMIx bootstrap needs PMIx's header, which Debian keeps off the default path: without
# pkg-config's flags the build stops there, naming it.
out=$($CC -std=c11 -Iinclude -fsyntax-only -DRVX_BOOT=RVX_BOOT_PMIX "$tmp/p.c" 2>&1) \
  && fail "RVX_BOOT_PMIX built without PMIx's include path"
grep -q "pmix.h" <<<"$out" && echo "ok: RVX_BOOT_PMIX without PMIx's flags names pmix.h" || fail "no mention of pmix.h: $(head -3 <<<"$out")"
[ $fails -eq 0 ]
