#!/usr/bin/env bash
# Every impossible configuration is an #error that says what to change: compile each one and
# check that it fails with its message (and that the valid neighbours compile).
set -u
cd "$(dirname "$0")/.."
CC=${CC:-cc}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '#include <rvx/rvx.h>\nint main(void) { return 0; }\n' > "$tmp/plain.c"
printf '#define RVX_AM_HANDLERS(X) X(A, a)\n#include <rvx/rvx.h>\nstatic void a(rvx_am_token_t *t, const uint64_t *g, unsigned n, void *p, size_t l) { (void)t; (void)g; (void)n; (void)p; (void)l; }\nint main(void) { return 0; }\n' > "$tmp/am.c"
fails=0

expect_error() { # file, message fragment, flags...
  local f=$1 msg=$2; shift 2
  if out=$($CC -std=c11 -Iinclude -fsyntax-only "$@" "$tmp/$f" 2>&1); then
    echo "FAIL: built with $* (expected: $msg)"; fails=$((fails + 1))
  elif ! grep -qF -- "$msg" <<<"$out"; then
    echo "FAIL: $* failed without the message '$msg':"; echo "$out" | head -5; fails=$((fails + 1))
  else
    echo "ok: $* -> $msg"
  fi
}
expect_ok() { # file, flags...
  local f=$1; shift
  if ! out=$($CC -std=c11 -Iinclude -Wall -Wextra -Werror -fsyntax-only "$@" "$tmp/$f" 2>&1); then
    echo "FAIL: valid configuration $* did not build:"; echo "$out" | head -5; fails=$((fails + 1))
  else
    echo "ok: $* builds"
  fi
}

expect_error plain.c "RVX_TL has an unknown value" -DRVX_TL=9
expect_error plain.c "RVX_MLX5_DOORBELL must be" -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_MLX5_DOORBELL=3
expect_error plain.c "RVX_MLX5_SIG_EVERY must be between" -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_MLX5_SIG_EVERY=1000
expect_error plain.c "RVX_MLX5_FRAME is smaller" -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_MLX5_FRAME=1024
expect_error plain.c "RVX_MLX5_BOUNCE_SEG must hold 4 x RVX_PUT_BCOPY_MAX" -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_MLX5_BOUNCE_SEG=16384
expect_error plain.c "RVX_MLX5_BOUNCE_SEG must hold" -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_MLX5_BOUNCE_BYTES=65536
expect_error plain.c "RVX_MLX5_SRQ_DEPTH must be between" -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_MLX5_SRQ_DEPTH=8
expect_error am.c "RVX_DC_AM_CREDITS must be at least 2" -DRVX_TL=RVX_TL_DC_MLX5 -DRVX_DC_AM_CREDITS=1
expect_error am.c "RVX_DC_AM_CREDITS must be at least 2" -DRVX_TL=RVX_TL_DC_MLX5 -DRVX_DC_RX_DEPTH=8
expect_error plain.c "RVX_DC_NUM_DCI must be between 1 and 64" -DRVX_TL=RVX_TL_DC_MLX5 -DRVX_DC_NUM_DCI=0
expect_error plain.c "a quarter of RVX_DC_BOUNCE_BYTES" -DRVX_TL=RVX_TL_DC_MLX5 -DRVX_DC_BOUNCE_BYTES=16384
expect_error plain.c "RVX_RNDV has an unknown value" -DRVX_RNDV=7
expect_error plain.c "RVX_RNDV_THRESH must be a positive" -DRVX_RNDV_THRESH=0
expect_error plain.c "RVX_AM=1 needs a handler table" -DRVX_AM=1
expect_error am.c "RVX_AM_HANDLERS is defined but RVX_AM=0" -DRVX_AM=0
expect_error plain.c "RVX_TAG must be 0 or 1" -DRVX_TAG=2
expect_error plain.c "RVX_TAG_SHORT_MAX must be between 0 and 64" -DRVX_TAG=1 -DRVX_TAG_SHORT_MAX=65
expect_error plain.c "RVX_PIPE_EAGER must be between 0 and RVX_AM_MAX_MEDIUM - 24" -DRVX_TAG=1 -DRVX_PIPE_EAGER=5000
expect_error plain.c "RVX_PIPE_BOUNCE_BUFS must be between 1 and 64" -DRVX_TAG=1 -DRVX_PIPE_BOUNCE_BUFS=0
expect_error plain.c "RVX_AM_MAX_ARGS must be between 0 and 15" -DRVX_AM_MAX_ARGS=16
expect_error plain.c "RVX_AM_MAX_MEDIUM must be at least 512" -DRVX_AM_MAX_MEDIUM=100
expect_error plain.c "does not fit the shared-memory ring" -DRVX_AM_MAX_MEDIUM=9000
expect_error plain.c "RVX_SHM_RING_SLOTS must be a power of two" -DRVX_SHM_RING_SLOTS=100
expect_error plain.c "RVX_LANES must be between 1 and 8" -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_LANES=0
expect_error plain.c "RVX_LANES must be between 1 and 8" -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_LANES=9
expect_error plain.c "RVX_LANES > 1 needs RVX_TL=RVX_TL_RC_MLX5" -DRVX_LANES=2
expect_error plain.c "RVX_LANE_STRIPE_MIN must be at least 4096" -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_LANES=2 -DRVX_LANE_STRIPE_MIN=100
expect_error plain.c "RVX_SHM_RING_SLOTS must be a power of two" -DRVX_SHM_RING_SLOTS=2048
expect_error plain.c "RVX_PUT_SHORT_MAX must not exceed RVX_PUT_BCOPY_MAX" -DRVX_PUT_SHORT_MAX=64 -DRVX_PUT_BCOPY_MAX=32
expect_error plain.c "exceeds what the transport can send inline" -DRVX_PUT_SHORT_MAX=128
expect_error plain.c "the fabric header must define" '-DRVX_FABRIC=<stddef.h>'
# the header must come first, or GNU/POSIX declarations are missing
printf '#include <stdio.h>\n#include <rvx/rvx.h>\nint main(void) { return 0; }\n' > "$tmp/late.c"
expect_error late.c "include <rvx/rvx.h> before system headers"

expect_ok plain.c
expect_ok am.c
expect_ok plain.c -DRVX_TAG=1
expect_ok am.c -DRVX_TL=RVX_TL_RC_MLX5
expect_ok plain.c -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_MLX5_DOORBELL=RVX_MLX5_DB_8B
expect_ok plain.c -DRVX_TL=RVX_TL_DC_MLX5
expect_ok plain.c -DRVX_TL=RVX_TL_DC_MLX5 -DRVX_DC_NUM_DCI=1 -DRVX_MLX5_DOORBELL=RVX_MLX5_DB_8B
expect_ok am.c -DRVX_TL=RVX_TL_DC_MLX5 -DRVX_TAG=1 -DRVX_LANES=2
expect_ok am.c -DRVX_TAG=1 -DRVX_RNDV=RVX_RNDV_PIPELINE
expect_ok plain.c -DRVX_RNDV=RVX_RNDV_PIPELINE -DRVX_RNDV_THRESH=65536
expect_ok plain.c '-DRVX_FABRIC=<rvx/fabric/ib_hdr.h>'
expect_ok am.c -DRVX_SHM_RING_SLOTS=1024 -DRVX_AM_MAX_MEDIUM=16000
expect_ok late.c -D_GNU_SOURCE
expect_ok am.c -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_LANES=2 -DRVX_TAG=1
expect_ok plain.c -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_LANES=8 -DRVX_TAG=1 -DRVX_RNDV=RVX_RNDV_PUT
[ $fails -eq 0 ] && echo "all configuration checks behave" && exit 0
exit 1
