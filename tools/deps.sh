#!/usr/bin/env bash
# Install the Debian packages rvx needs, if any is missing. Called by make run/test/bench.
# --check: install nothing, exit 1 if anything is missing (the Makefile's parallel default).
# As root it runs apt-get; otherwise it prints the one command to run.
set -u
# package : a file or command that shows it is installed
need=(
  "gcc:/usr/bin/gcc"
  "g++:/usr/bin/g++"
  "clang:/usr/bin/clang"
  "make:/usr/bin/make"
  "binutils:/usr/bin/objdump"
  "pkg-config:/usr/bin/pkg-config"
  "libibverbs-dev:/usr/include/infiniband/mlx5dv.h"
  "ibverbs-utils:/usr/bin/ibv_rc_pingpong"
  "valgrind:/usr/bin/valgrind"
  "ucx-utils:/usr/bin/ucx_perftest"
  "libucx-dev:/usr/include/uct/api/uct.h"
  "hyperfine:/usr/bin/hyperfine"
  "gnuplot-nox:/usr/bin/gnuplot"
  "libclang-rt-14-dev:/usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.asan-x86_64.a"
  "libpmix-dev:/usr/lib/x86_64-linux-gnu/pkgconfig/pmix.pc"
  "openmpi-bin:/usr/bin/mpirun.openmpi"
  # a one-machine Slurm for tests/t_slurm.sh; srun's PMIx plugin opens libpmix.so (libpmix-dev)
  "slurm-wlm:/usr/sbin/slurmd"
  "slurm-wlm-basic-plugins:/usr/lib/x86_64-linux-gnu/slurm-wlm/mpi_pmix.so"
  "munge:/usr/sbin/munged"
  "perftest:/usr/bin/ib_write_lat"
  "python3-pyverbs:/usr/lib/python3/dist-packages/pyverbs/__init__.py"
)
missing=()
for item in "${need[@]}"; do
  pkg=${item%%:*}; path=${item#*:}
  [ -e "$path" ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
[ "${1:-}" = --check ] && exit 1 # only asked whether anything is missing
if [ "$(id -u)" -ne 0 ]; then
  echo "rvx needs these Debian packages: ${missing[*]}"
  echo "install them with:  sudo apt-get install -y ${missing[*]}"
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
  || { echo "deps: apt-get install ${missing[*]} failed"; exit 1; }
