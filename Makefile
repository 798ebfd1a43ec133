# rvx: header-only RDMA / shared-memory transport kit.
#
#   make run       build and run the demo on the default transport (shared memory), then rvxsim
#   make test      build and run every test; ends with "N passed, N failed, N skipped"
#   make test-loaded  the same beside CPU hogs (LOADED_RUNS=3 for three runs in a row)
#   make bench     instruction counts, latency/rate against UCX, whole-program timings
#   make icount    instruction counts per operation (callgrind)
#   make compare   latency and message rate beside UCX's ucx_perftest and a cache-line floor
#   make compare-mlx5  instructions per call beside UCX's own rc_mlx5 and dc_mlx5, all on rvxsim
#   make curves    tag latency and bandwidth against size beside ucx_perftest: bench/tag_*.png
#   make thresh    eager/rendezvous threshold of every fabric header: table and bench/thresh_*.png
#   make explain   machine code of rc_mlx5's and dc_mlx5's put, batch, flush, progress, get and
#                  fetching add, annotated and grouped by purpose
#   make scale     per-process cost against the job's size, rc_mlx5 and dc_mlx5 on rvxsim: fit, projection
#                  to 16,384 ranks, bench/RESULTS.md table and bench/scale.png (SCALE_N, SCALE_TL)
#   make install PREFIX=/usr/local   headers (<rvx/rvx.h>, <shmem.h>), rvx.pc, rvxrun and rvxshcc
#   make compare-shmem  OpenSHMEM's instructions per call beside rvx's own (docs/openshmem.md)
#   make deps      install the Debian packages the project needs (run, test and bench call it)

# Build in parallel by default, one job per CPU (a -j on the command line wins), once the
# packages are there: a build must not race `deps` installing its compiler. run, test, bench,
# test-loaded and hwcheck install first, then build in a sub-make, which is parallel.
NPROC := $(shell nproc)
ifeq ($(MAKELEVEL)$(filter -j%,$(MAKEFLAGS)),0)
ifeq ($(shell tools/deps.sh --check >/dev/null 2>&1 && echo yes),yes)
MAKEFLAGS += -j$(NPROC)
endif
endif
# the sub-make's jobs: the parent's jobserver, or a -j of its own when the parent built serially
SUBMAKE_J = $(if $(filter -j%,$(MAKEFLAGS)),,-j$(NPROC))

CC      ?= cc
PREFIX  ?= /usr/local
B       := build
CFLAGS  ?= -O2 -g
WARN    := -Wall -Wextra -Werror
CPPFLAGS_RVX := -Iinclude

HEADERS := $(shell find include -name '*.h')
EXAMPLES := hello_put pingpong atomic_counter ring halo
EXAMPLE_BINS := $(addprefix $(B)/examples/,$(EXAMPLES))
# the same examples built for rc_mlx5 (run on rvxsim here, on a ConnectX where there is one)
EXAMPLE_RC_BINS := $(addprefix $(B)/examples-rc/,hello_put pingpong atomic_counter ring halo)
# Which test is built for which variant comes from tests/MANIFEST (tests/manifest.sh reads it;
# docs/tests.md shows it): the lists below are its names, the rules build them.
manifest = $(shell tests/manifest.sh names $(1))
TEST_BINS := $(addprefix $(B)/tests/,$(call manifest,shm))
BENCH_BINS := $(B)/bench/icount_rc $(B)/bench/icount_rc_db $(B)/bench/icount_shm $(B)/bench/icount_am_rt $(B)/bench/rvx_lat $(B)/bench/floor_pingpong $(B)/bench/icount_tag \
              $(B)/bench/tag_lat $(B)/bench/rndv_pipeline $(B)/bench/rndv_pipeline_get \
              $(B)/bench/rndv_pipeline_rc $(B)/bench/rndv_pipeline_get_rc $(B)/bench/rndv_pipeline_put_rc \
              $(B)/bench/tag_lat_eager $(B)/bench/tag_lat_rndv $(B)/bench/icount_tag_rc $(B)/bench/icount_dc \
              $(B)/bench/icount_tag_dc $(B)/bench/scale_rc $(B)/bench/scale_dc $(B)/bench/wait_lat_rc
# Pair-build benchmarks (shm on the node, rc_mlx5 between nodes), once the pair transport exists:
# make icount's pair rows and make compare's on-node AM latency against the shm-only build.
PAIR_BENCH_DEFS := -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_TL_INTRA=RVX_TL_SHM
PAIR_BENCH_BINS := $(if $(wildcard include/rvx/tl/pair.h),$(B)/bench/icount_pair $(B)/bench/icount_tag_pair $(B)/bench/rvx_lat_pair)
BENCH_BINS += $(PAIR_BENCH_BINS)
RVXRUN := $(B)/bin/rvxrun
# rc_mlx5 builds: the tests that mean the same on both transports, from the same sources, plus the
# rc-only tests (tests/t_rc_*.c); run on rvxsim (LD_LIBRARY_PATH=build/sim) or a real adapter.
# The manifest's variant names say which: shm, rc, dc, dc-fixed, pair, pair1, pair-dc, and
# pair-compile (built for the pair, not run).
RC_LIBS := -libverbs -lmlx5
RC_DEFS := -DRVX_TL=RVX_TL_RC_MLX5
RC_TEST_BINS := $(addprefix $(B)/tests-rc/,$(call manifest,rc))
# dc_mlx5 builds: the shared tests rc_mlx5 runs, plus the dc-only tests (tests/t_dc_*.c); run on
# rvxsim as dc/<name>.
DC_DEFS := -DRVX_TL=RVX_TL_DC_MLX5
DC_TEST_BINS := $(addprefix $(B)/tests-dc/,$(call manifest,dc))
# pair builds (tl/pair.h): shared memory between ranks of one node, rc_mlx5 between nodes; the
# examples and the tests rc_mlx5 shares with shm, from the same sources, run on rvxsim with ranks
# placed on emulated nodes (RVX_NODE)
PAIR_DEFS := -DRVX_TL=RVX_TL_RC_MLX5 -DRVX_TL_INTRA=RVX_TL_SHM
EXAMPLE_PAIR_BINS := $(addprefix $(B)/examples-pair/,$(EXAMPLES))
PAIR_TEST_BINS := $(addprefix $(B)/tests-pair/,$(filter t_%,$(call manifest,pair pair1 pair-compile)))
# PMIx builds (RVX_BOOT_PMIX) for mpirun/srun: examples as NAME-pmix, launcher tests in build/pmix;
# tests/launch/ holds programs run by a launcher script (tests/t_*.sh), built for both bootstraps.
PMIX_BINS := $(B)/examples/ring-pmix $(B)/examples/halo-pmix $(B)/pmix/t_boot \
             $(B)/pmix/t_finalize_gone $(B)/pmix/peer_kill
LAUNCH_BINS := $(B)/launch/peer_kill

.PHONY: peer-tests all deps run test test-loaded bench icount compare compare-mlx5 curves install clean examples tests hwcheck explain scale
.DEFAULT_GOAL := all

all: $(RVXRUN) $(EXAMPLE_BINS) $(EXAMPLE_RC_BINS) $(EXAMPLE_PAIR_BINS) $(TEST_BINS) $(RC_TEST_BINS) $(DC_TEST_BINS) $(PAIR_TEST_BINS) $(BENCH_BINS) $(PMIX_BINS) $(LAUNCH_BINS) $(if $(wildcard sim/sim.mk),sim sim-tests)

# The rvxsim model (its own makefile fragment; it shares no code with include/).
-include sim/sim.mk

deps:
	@tools/deps.sh

$(B)/bin/rvxrun: tools/rvxrun.c
	@mkdir -p $(@D)
	$(CC) $(CFLAGS) $(WARN) -o $@ $<

$(B)/examples/%: examples/%.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -o $@ $<

$(B)/tests/%: tests/%.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -o $@ $<

$(B)/examples-rc/%: examples/%.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(RC_DEFS) -o $@ $< $(RC_LIBS)

$(B)/tests-rc/%: tests/%.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(RC_DEFS) -o $@ $< $(RC_LIBS)

$(B)/tests-dc/%: tests/%.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(DC_DEFS) -o $@ $< $(RC_LIBS)

$(B)/examples-pair/%: examples/%.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(PAIR_DEFS) -o $@ $< $(RC_LIBS)

$(B)/tests-pair/%: tests/%.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(PAIR_DEFS) -o $@ $< $(RC_LIBS)

# ---- tag matching: the tag tests once per rendezvous protocol, from the same source
TAG_RNDV := get put am pipeline
RNDV_get := GET
RNDV_put := PUT
RNDV_am := AM
RNDV_pipeline := PIPELINE
$(addprefix $(B)/tests/t_tag_,$(TAG_RNDV)): $(B)/tests/t_tag_%: tests/t_tag.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_RNDV=RVX_RNDV_$(RNDV_$*) -o $@ $<
$(addprefix $(B)/tests/t_tag_peer_death_,$(TAG_RNDV)): $(B)/tests/t_tag_peer_death_%: tests/t_tag_peer_death.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_RNDV=RVX_RNDV_$(RNDV_$*) -o $@ $<
$(addprefix $(B)/tests/t_tag_ep_destroy_,$(TAG_RNDV)): $(B)/tests/t_tag_ep_destroy_%: tests/t_tag_ep_destroy.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_RNDV=RVX_RNDV_$(RNDV_$*) -o $@ $<

# the tag tests over an mlx5 build on rvxsim (rc_mlx5, dc_mlx5, the pair): the same sources, one
# binary per rendezvous protocol (those the manifest names are built). $(1): the build folder,
# $(2): its transport flags.
TAG_SOURCES := t_tag t_tag_peer_death t_tag_ep_destroy
define TAG_MLX5_VARIANTS
$$(foreach s,$$(TAG_SOURCES),$$(eval $$(call TAG_MLX5_RULE,$(1),$(2),$$(s))))
endef
define TAG_MLX5_RULE
$$(addprefix $$(B)/$(1)/$(3)_,$$(TAG_RNDV)): $$(B)/$(1)/$(3)_%: tests/$(3).c tests/testlib.h tests/placement.h $$(HEADERS)
	@mkdir -p $$(@D)
	$$(CC) -std=c11 $$(CFLAGS) $$(WARN) $$(CPPFLAGS_RVX) $(2) -DRVX_RNDV=RVX_RNDV_$$(RNDV_$$*) -o $$@ $$< $$(RC_LIBS)
endef
$(eval $(call TAG_MLX5_VARIANTS,tests-rc,$$(RC_DEFS)))
$(eval $(call TAG_MLX5_VARIANTS,tests-dc,$$(DC_DEFS)))
$(eval $(call TAG_MLX5_VARIANTS,tests-pair,$$(PAIR_DEFS)))

# the pair with dc_mlx5 between nodes: the ring example and the shared tests that carry the data
# (RMA, atomics, AMs, tags with GET rendezvous, flush), run by tests/run.sh as pair-dc/<name>
PAIR_DC_DEFS := -DRVX_TL=RVX_TL_DC_MLX5 -DRVX_TL_INTRA=RVX_TL_SHM
PAIR_DC_BINS := $(B)/examples-pair-dc/ring $(addprefix $(B)/tests-pair-dc/,$(filter t_%,$(call manifest,pair-dc)))
all tests: $(PAIR_DC_BINS)
$(B)/examples-pair-dc/%: examples/%.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(PAIR_DC_DEFS) -o $@ $< $(RC_LIBS)
$(B)/tests-pair-dc/%: tests/%.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(PAIR_DC_DEFS) -o $@ $< $(RC_LIBS)
$(eval $(call TAG_MLX5_RULE,tests-pair-dc,$$(PAIR_DC_DEFS),t_tag))

# dc_mlx5 with the fixed endpoint-to-DCI mapping (RVX_DC_DCI_POLICY): the pool, error and AM
# tests again, as dc/<name>_fixed
DC_FIXED_BINS := $(addprefix $(B)/tests-dc/,$(addsuffix _fixed,$(call manifest,dc-fixed)))
all tests: $(DC_FIXED_BINS)
$(DC_FIXED_BINS): $(B)/tests-dc/%_fixed: tests/%.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(DC_DEFS) -DRVX_DC_DCI_POLICY=RVX_DC_DCI_FIXED -o $@ $< $(RC_LIBS)

# multi-lane rendezvous (RVX_LANES=2) over rc_mlx5, run by tests/t_lanes.sh on rvxsim with two devices
LANES_RNDV := get put pipeline
LANES_BINS := $(addprefix $(B)/lanes/t_lanes_,$(LANES_RNDV))
all tests: $(LANES_BINS)
$(LANES_BINS): $(B)/lanes/t_lanes_%: tests/t_lanes.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_RNDV=RVX_RNDV_$(RNDV_$*) -o $@ $< $(RC_LIBS)
LANES_DEATH_BINS := $(addprefix $(B)/lanes/t_tag_peer_death_,$(LANES_RNDV))
all tests: $(LANES_DEATH_BINS)
$(LANES_DEATH_BINS): $(B)/lanes/t_tag_peer_death_%: tests/t_tag_peer_death.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(RC_DEFS) -DRVX_LANES=2 -DRVX_RNDV=RVX_RNDV_$(RNDV_$*) \
	  -DRVX_RNDV_THRESH=32768 -o $@ $< $(RC_LIBS)
# the same over dc_mlx5
LANES_DC_BINS := $(addprefix $(B)/lanes/t_lanes_dc_,$(LANES_RNDV)) $(B)/lanes/t_tag_peer_death_dc_get
all tests: $(LANES_DC_BINS)
$(addprefix $(B)/lanes/t_lanes_dc_,$(LANES_RNDV)): $(B)/lanes/t_lanes_dc_%: tests/t_lanes.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(DC_DEFS) -DRVX_RNDV=RVX_RNDV_$(RNDV_$*) -o $@ $< $(RC_LIBS)
$(B)/lanes/t_tag_peer_death_dc_get: tests/t_tag_peer_death.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(DC_DEFS) -DRVX_LANES=2 -DRVX_RNDV=RVX_RNDV_GET \
	  -DRVX_RNDV_THRESH=32768 -o $@ $< $(RC_LIBS)

# ---- PMIx builds: the flags are read when a rule runs, after `make deps` installed libpmix-dev
PMIX_FLAGS = $(shell pkg-config --cflags --libs pmix 2>/dev/null)
# mpirun on this machine alone: no remote daemons, more ranks than cores, root allowed (containers)
MPIRUN_LOCAL = mpirun.openmpi --oversubscribe --bind-to none --mca plm isolated \
               $(if $(filter 0,$(shell id -u)),--allow-run-as-root)
PMIX_CHECK = @pkg-config --exists pmix || { echo "$@: PMIx builds need libpmix-dev (make deps)"; exit 1; }

$(B)/examples/%-pmix: examples/%.c $(HEADERS)
	@mkdir -p $(@D)
	$(PMIX_CHECK)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_BOOT=RVX_BOOT_PMIX -o $@ $< $(PMIX_FLAGS)

$(B)/pmix/%: tests/%.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(PMIX_CHECK)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_BOOT=RVX_BOOT_PMIX -o $@ $< $(PMIX_FLAGS)

$(B)/pmix/%: tests/launch/%.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(PMIX_CHECK)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -Itests -DRVX_BOOT=RVX_BOOT_PMIX -o $@ $< $(PMIX_FLAGS)

$(B)/launch/%: tests/launch/%.c tests/testlib.h tests/placement.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -Itests -o $@ $<
# ---- end of PMIx builds

$(B)/bench/icount_rc: bench/icount_rc.c bench/bench_common.h bench/batch16.h bench/floor_fetch.h bench/icount_fetch.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -o $@ $< $(RC_LIBS)

$(B)/bench/icount_dc: bench/icount_dc.c bench/bench_common.h bench/batch16.h bench/floor_fetch.h bench/icount_fetch.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -o $@ $< $(RC_LIBS)

$(B)/bench/icount_tag_rc: bench/icount_tag.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(RC_DEFS) -o $@ $< $(RC_LIBS)

$(B)/bench/icount_tag_dc: bench/icount_tag.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(DC_DEFS) -o $@ $< $(RC_LIBS)

$(B)/bench/icount_rc_db: bench/icount_rc.c bench/bench_common.h bench/batch16.h bench/icount_fetch.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_MLX5_DOORBELL=RVX_MLX5_DB_8B -o $@ $< $(RC_LIBS)

$(B)/bench/icount_pair: bench/icount_pair.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(PAIR_BENCH_DEFS) -o $@ $< $(RC_LIBS)

$(B)/bench/icount_tag_pair: bench/icount_pair.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(PAIR_BENCH_DEFS) -DRVX_TAG=1 -o $@ $< $(RC_LIBS)

$(B)/bench/wait_lat_rc: bench/wait_lat.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(RC_DEFS) -o $@ $< $(RC_LIBS)

# rvx_lat as a pair build: its two ranks share a node, so the AM ping-pong takes the shm path
$(B)/bench/rvx_lat_pair: bench/rvx_lat.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(PAIR_BENCH_DEFS) -o $@ $< $(RC_LIBS)

$(B)/bench/%: bench/%.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -o $@ $<

# the PIPELINE-vs-GET comparison: the same source with RVX_RNDV_GET
$(B)/bench/rndv_pipeline_get: bench/rndv_pipeline.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_RNDV=RVX_RNDV_GET -o $@ $<

# ... and both over rc_mlx5, for rvxsim with a registration cost (bench/rndv_sim.sh), with PUT (one
# RDMA WRITE after the CTS) as the one-transfer reference
$(B)/bench/rndv_pipeline_rc: bench/rndv_pipeline.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(RC_DEFS) -o $@ $< $(RC_LIBS)
$(B)/bench/rndv_pipeline_get_rc: bench/rndv_pipeline.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(RC_DEFS) -DRVX_RNDV=RVX_RNDV_GET -o $@ $< $(RC_LIBS)
$(B)/bench/rndv_pipeline_put_rc: bench/rndv_pipeline.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) $(RC_DEFS) -DRVX_RNDV=RVX_RNDV_PUT -o $@ $< $(RC_LIBS)

# make fit-shm: the measurements include/rvx/fabric/shm_local.h is fitted to: tag_lat with the
# switch pinned above 4 MiB (all eager) and at 1 byte (all rendezvous GET), and the constants the
# fit gives (bench/fit_shm.sh)
$(B)/bench/tag_lat_eager: bench/tag_lat.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_RNDV_THRESH=1099511627776 -o $@ $<
$(B)/bench/tag_lat_rndv: bench/tag_lat.c bench/bench_common.h bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_RNDV_THRESH=1 -o $@ $<
.PHONY: fit-shm
fit-shm: $(B)/bench/tag_lat_eager $(B)/bench/tag_lat_rndv $(B)/bin/rvxthresh $(RVXRUN)
	@bench/fit_shm.sh

# make curves: tag latency and bandwidth against size over shm beside ucx_perftest, medians of
# rounds, as bench/tag_curves.dat, bench/tag_lat.png and bench/tag_bw.png (bench/curves.sh)
curves: deps $(B)/bench/tag_lat $(RVXRUN)
	@bench/curves.sh

# ---- eager/rendezvous threshold tool (proto/thresh.h): build/bin/rvxthresh for the default
# fabric; `make thresh` builds it once per fabric header and draws bench/thresh_<fabric>.png.
FABRICS := $(basename $(notdir $(wildcard include/rvx/fabric/*.h)))
.PHONY: thresh
all: $(B)/bin/rvxthresh

$(B)/bin/rvxthresh: tools/rvxthresh.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -o $@ $< -lm

$(B)/thresh/rvxthresh_%: tools/rvxthresh.c $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=c11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) '-DRVX_FABRIC=<rvx/fabric/$*.h>' -o $@ $< -lm

bench/thresh_%.png: $(B)/thresh/rvxthresh_%
	$< --png $@ > $(B)/thresh/$*.txt

thresh: deps $(addprefix bench/thresh_,$(addsuffix .png,$(FABRICS)))
	@for f in $(FABRICS); do echo "== $$f"; sed -n 3,5p $(B)/thresh/$$f.txt; done
# ---- end of threshold tool

# ---- make scale: bench/scale.c per transport, as an application builds it (active messages and
# tags) where the transport carries them, else its RMA-only build (said so in the output); run by
# bench/scale.sh at growing N on rvxsim. A run limited by SCALE_N or SCALE_TL prints its lines and
# leaves bench/RESULTS.md and bench/scale.png alone.
SCALE_TL_rc := RVX_TL_RC_MLX5
SCALE_TL_dc := RVX_TL_DC_MLX5
.PHONY: scale
$(B)/bench/scale_rc $(B)/bench/scale_dc: $(B)/bench/scale_%: bench/scale.c bench/scale_maps.h $(HEADERS)
	@mkdir -p $(@D)
	@msg=1; $(CC) -std=gnu11 -E $(CPPFLAGS_RVX) -DRVX_TL=$(SCALE_TL_$*) -DSCALE_MSG=1 $< >/dev/null 2>&1 || \
	  { msg=0; echo "scale_$*: $(SCALE_TL_$*) carries no messages in this release: RMA-only build"; }; \
	  echo "$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_TL=$(SCALE_TL_$*) -DSCALE_MSG=$$msg -o $@ $< $(RC_LIBS)"; \
	  $(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_TL=$(SCALE_TL_$*) -DSCALE_MSG=$$msg -o $@ $< $(RC_LIBS)

# the same program with the PMIx bootstrap, for the wire-up's CPU under mpirun and srun
$(B)/bench/scale_rc-pmix $(B)/bench/scale_dc-pmix: $(B)/bench/scale_%-pmix: bench/scale.c bench/scale_maps.h $(HEADERS)
	@mkdir -p $(@D)
	$(PMIX_CHECK)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_TL=$(SCALE_TL_$*) -DSCALE_MSG=1 \
	  -DRVX_BOOT=RVX_BOOT_PMIX -o $@ $< $(RC_LIBS) $(PMIX_FLAGS)

# UCX's own figures on the same model (bench/scale_ucx.sh): the system's UCX, with rvx's shm
# build as the out-of-band bootstrap only
$(B)/bench/scale_ucx: bench/scale_ucx.c bench/scale_maps.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 $(CFLAGS) $(WARN) $(CPPFLAGS_RVX) -DRVX_TL=RVX_TL_SHM -o $@ $< -lucp -luct -lucs -ldl

scale: deps sim $(RVXRUN) $(B)/bench/scale_rc $(B)/bench/scale_dc $(B)/bench/scale_dc-pmix $(B)/bench/scale_ucx
	@$(if $(SCALE_N),SCALE_N="$(SCALE_N)") $(if $(SCALE_TL),SCALE_TL="$(SCALE_TL)") \
	  $(if $(SCALE_LAUNCH),SCALE_LAUNCH="$(SCALE_LAUNCH)") SCALE_MPIRUN="$(MPIRUN_LOCAL)" \
	  SCALE_RESULTS=$(if $(SCALE_N)$(SCALE_TL)$(SCALE_LAUNCH),0,1) bench/scale.sh
# ---- end of make scale

# ---- make explain: the disassembly of the put, batch, flush, progress, get and fetching-add
# wrappers of rc_mlx5 and dc_mlx5 (one source, bench/explain.c, built for each), each instruction
# annotated with its source line and grouped by purpose (tools/explain.sh). Always -O2 -g: the
# annotation reads the line tables of the optimised code.
all: $(B)/bench/explain_rc $(B)/bench/explain_dc
$(B)/bench/explain_rc: bench/explain.c bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(WARN) $(CPPFLAGS_RVX) $(RC_DEFS) -o $@ $< $(RC_LIBS)

$(B)/bench/explain_dc: bench/explain.c bench/batch16.h $(HEADERS)
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g $(WARN) $(CPPFLAGS_RVX) $(DC_DEFS) -o $@ $< $(RC_LIBS)

explain: $(B)/bench/explain_rc $(B)/bench/explain_dc
	@tools/explain.sh $(B)/bench/explain_rc
	@tools/explain.sh $(B)/bench/explain_dc
# ---- end of make explain

examples: $(RVXRUN) $(EXAMPLE_BINS)
tests: $(RVXRUN) $(TEST_BINS) $(RC_TEST_BINS) $(DC_TEST_BINS) $(PAIR_TEST_BINS)

run: deps
	@$(MAKE) --no-print-directory $(SUBMAKE_J) all
	@echo "== hello_put: one-sided puts around a ring of 3 ranks"
	$(RVXRUN) -n 3 -t 60 $(B)/examples/hello_put
	@echo "== atomic_counter: 4 ranks add to one counter on rank 0"
	$(RVXRUN) -n 4 -t 60 $(B)/examples/atomic_counter 20000
	@echo "== pingpong: 8-byte active-message ping-pong between 2 ranks"
	$(RVXRUN) -n 2 -t 60 $(B)/examples/pingpong 200000
	@echo "== ring: ring allgather over 4 ranks (a put and an active message per step), data checked"
	$(RVXRUN) -n 4 -t 60 $(B)/examples/ring
	@echo "== halo: 1-D halo exchange over 4 ranks, checked against a serial run"
	$(RVXRUN) -n 4 -t 60 $(B)/examples/halo
	@echo "== ring again, started by Open MPI's mpirun: the PMIx build of the same source"
	$(MPIRUN_LOCAL) -np 4 $(B)/examples/ring-pmix
	@echo "== rvxsim: the software ConnectX that stands in for rdma-core (no adapter here)"
	LD_LIBRARY_PATH=$(B)/sim $(B)/sim/rvxsim_devinfo
	@echo "== rc_mlx5 on rvxsim: the same examples built for the mlx5 transport (WQEs, doorbells, CQEs)"
	LD_LIBRARY_PATH=$(B)/sim $(RVXRUN) -n 3 -t 60 $(B)/examples-rc/hello_put
	LD_LIBRARY_PATH=$(B)/sim $(RVXRUN) -n 4 -t 60 $(B)/examples-rc/atomic_counter 2000
	LD_LIBRARY_PATH=$(B)/sim $(RVXRUN) -n 4 -t 60 $(B)/examples-rc/ring
	LD_LIBRARY_PATH=$(B)/sim $(RVXRUN) -n 2 -t 60 $(B)/examples-rc/pingpong 2000
	@echo "== rvxsim: WQEs through the model's engine, and a verbs SEND ping-pong between 2 processes"
	@$(MAKE) -s sim-bench

test: deps
	@$(MAKE) --no-print-directory $(SUBMAKE_J) all
	@tests/run.sh
	$(if $(RDMA_CORE_TESTS),@tools/peer-tests.sh $(RDMA_CORE_TESTS))

# rdma-core's own tests on rvxsim, one line of counts per module (docs/rvxsim.md): RDMA_CORE_TESTS
# is the tests/ directory of rdma-core at tag v44.0 (not carried here; git archive v44.0 tests)
peer-tests: deps sim
	@tools/peer-tests.sh $(RDMA_CORE_TESTS)

# The suite beside CPU hogs (twice the CPUs), LOADED_RUNS times in a row: what load breaks
test-loaded: deps
	@$(MAKE) --no-print-directory $(SUBMAKE_J) all
	@tools/test-loaded.sh

# The rc_mlx5 tests on a real adapter (system rdma-core, no rvxsim); exit 77 where there is none.
hwcheck: deps
	@$(MAKE) --no-print-directory $(SUBMAKE_J) all
	@tools/hwcheck.sh

icount: deps $(B)/bench/icount_shm $(B)/bench/icount_tag $(B)/bench/icount_rc $(B)/bench/icount_rc_db $(B)/bench/icount_tag_rc $(B)/bench/icount_dc $(B)/bench/icount_tag_dc sim
icount: $(RVXRUN) $(filter %/icount_pair %/icount_tag_pair,$(PAIR_BENCH_BINS))
	@bench/icount.sh

compare: deps $(B)/bench/rvx_lat $(B)/bench/floor_pingpong $(B)/bench/tag_lat
compare: $(filter %/rvx_lat_pair,$(PAIR_BENCH_BINS)) $(if $(PAIR_BENCH_BINS),sim)
	@bench/compare.sh

# rvx beside UCX's own rc_mlx5 and dc_mlx5 on rvxsim, instructions per call (bench/compare_mlx5.sh).
# icount_ucx exports its mlx5dv_init_obj, which UCX then calls first (bench/ucx_watch.h).
$(B)/bench/icount_ucx: bench/icount_ucx.c bench/ucx_watch.h
	@mkdir -p $(@D)
	$(CC) -std=gnu11 -O2 -g -Wall -Wextra -Wl,--export-dynamic-symbol=mlx5dv_init_obj -o $@ $< -lucp -luct -lucs

compare-mlx5: deps sim $(B)/bench/icount_shm $(B)/bench/icount_rc $(B)/bench/icount_tag_rc $(B)/bench/icount_dc $(B)/bench/icount_tag_dc $(B)/bench/icount_ucx
	@bench/compare_mlx5.sh

bench: deps
	@$(MAKE) --no-print-directory $(SUBMAKE_J) all
	@bench/run.sh

install: $(RVXRUN)
	install -d $(DESTDIR)$(PREFIX)/include/rvx $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	cd include && find rvx -type d -exec install -d $(DESTDIR)$(PREFIX)/include/{} \;
	cd include && find rvx -name '*.h' -exec install -m 0644 {} $(DESTDIR)$(PREFIX)/include/{} \;
	install -m 0644 include/shmem.h $(DESTDIR)$(PREFIX)/include/shmem.h
	install -m 0755 $(RVXRUN) $(DESTDIR)$(PREFIX)/bin/rvxrun
	install -m 0755 tools/rvxshcc $(DESTDIR)$(PREFIX)/bin/rvxshcc
	sed -e 's|@PREFIX@|$(PREFIX)|g' rvx.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/rvx.pc

clean:
	rm -rf $(B)

# ---- OpenSHMEM (include/shmem.h over the public API; docs/openshmem.md): the wrapper, and the
# programs of tests/shmem/ built by it once per transport (build/shmem-<tl>/), which
# tests/t_shmem.sh runs: shm on 4 PEs, rc, dc and the pair on rvxsim
RVXSHCC := $(B)/bin/rvxshcc
SHMEM_TLS := shm rc dc pair
SHMEM_TESTS := $(notdir $(basename $(wildcard tests/shmem/*.c)))
SHMEM_BINS := $(foreach t,$(SHMEM_TLS),$(addprefix $(B)/shmem-$(t)/,$(SHMEM_TESTS)))
.PHONY: shmem compare-shmem
$(RVXSHCC): tools/rvxshcc
	@mkdir -p $(@D)
	install -m 0755 $< $@
define SHMEM_RULE
$(B)/shmem-$(1)/%: tests/shmem/%.c tests/placement.h $(HEADERS) $(RVXSHCC)
	@mkdir -p $$(@D)
	$(RVXSHCC) --tl=$(1) -std=c11 $(CFLAGS) $(WARN) -o $$@ $$<
endef
$(foreach t,$(SHMEM_TLS),$(eval $(call SHMEM_RULE,$(t))))
shmem: $(RVXRUN) $(RVXSHCC) $(SHMEM_BINS)
all tests: shmem
# instructions per OpenSHMEM call beside rvx's own (bench/compare_shmem.sh)
SHMEM_ICOUNT := $(addprefix $(B)/bench/icount_shmem_,shm rc dc)
$(B)/bench/icount_shmem_%: bench/icount_shmem.c $(HEADERS) $(RVXSHCC)
	@mkdir -p $(@D)
	$(RVXSHCC) --tl=$* -std=gnu11 -O2 -g $(WARN) -o $@ $<
all: $(SHMEM_ICOUNT)
compare-shmem: deps sim $(SHMEM_ICOUNT)
	@bench/compare_shmem.sh
# ---- end of OpenSHMEM

# ---- fuzzing (fuzz/): libFuzzer harnesses with AddressSanitizer and UndefinedBehaviorSanitizer
# for everything that comes from outside the process: frames from a peer (fuzz/rx.c, per
# transport and rendezvous protocol: shm, rc_mlx5, dc_mlx5 (fuzz/rx_dc.h) and both pairs),
# packed keys and worker addresses (fuzz/wire.c, every transport and pair) and what an
# application writes into a send queue of rvxsim (fuzz/sim_wqe.c). Each runs in one process with
# a cheap reset per input. `make fuzz` runs each for FUZZ_S seconds (two at a time, at nice
# FUZZ_NICE) on its corpus in fuzz/corpus/<harness>/ and writes build/fuzz/<harness>.log; `make
# test` replays every corpus and runs each harness for a few seconds (tests/t_fuzz.sh). clang
# comes from make deps.
FUZZ_CC     ?= clang
FUZZ_FLAGS  := -std=gnu11 -g -O2 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
               -fno-omit-frame-pointer -Wall -Wextra -Werror -Wno-unused-function
FUZZ_S      ?= 600
FUZZ_NICE   ?= 19
# the receive-path harnesses run every protocol on kilobytes: a rendezvous switch at 20 KiB (the
# model's is 64 KiB on shm and 729 KiB on rc_mlx5) keeps eager messages of several frames, and
# pipeline sizes scaled with it keep several bounce fragments and chunks per message, while what
# an input allocates stays small enough to come from ASan's size-class allocator, not mmap
FUZZ_RX_DEFS := -DRVX_RNDV_THRESH=20480 -DRVX_PIPE_FRAG=4096 -DRVX_PIPE_BOUNCE=8192 -DRVX_PIPE_CHUNK=16384
FUZZ_RX     := $(foreach t,shm rc dc pair_rc pair_dc,$(addprefix $(B)/fuzz/rx_$(t)_,$(TAG_RNDV)))
FUZZ_WIRE   := $(addprefix $(B)/fuzz/wire_,shm rc dc pair_rc pair_dc)
FUZZ_BINS   := $(FUZZ_RX) $(FUZZ_WIRE) $(B)/fuzz/sim_wqe
FUZZ_NAMES  := $(notdir $(FUZZ_BINS))
.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BINS)
all tests: fuzz-build

$(addprefix $(B)/fuzz/rx_shm_,$(TAG_RNDV)): $(B)/fuzz/rx_shm_%: fuzz/rx.c $(HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(CPPFLAGS_RVX) $(FUZZ_RX_DEFS) -DRVX_RNDV=RVX_RNDV_$(RNDV_$*) -o $@ $<
$(addprefix $(B)/fuzz/rx_rc_,$(TAG_RNDV)): $(B)/fuzz/rx_rc_%: fuzz/rx.c $(HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(CPPFLAGS_RVX) $(RC_DEFS) $(FUZZ_RX_DEFS) -DRVX_FUZZ_BACKOFF_HOOK=fuzz_nic_hook \
	  -DRVX_RNDV=RVX_RNDV_$(RNDV_$*) -o $@ $< $(RC_LIBS)
$(addprefix $(B)/fuzz/rx_dc_,$(TAG_RNDV)): $(B)/fuzz/rx_dc_%: fuzz/rx.c fuzz/rx_dc.h $(HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(CPPFLAGS_RVX) $(DC_DEFS) $(FUZZ_RX_DEFS) -DRVX_FUZZ_BACKOFF_HOOK=fuzz_nic_hook \
	  -DRVX_RNDV=RVX_RNDV_$(RNDV_$*) -o $@ $< $(RC_LIBS) -ldl
$(addprefix $(B)/fuzz/rx_pair_rc_,$(TAG_RNDV)): $(B)/fuzz/rx_pair_rc_%: fuzz/rx.c $(HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(CPPFLAGS_RVX) $(PAIR_DEFS) $(FUZZ_RX_DEFS) -DRVX_FUZZ_BACKOFF_HOOK=fuzz_nic_hook \
	  -DRVX_RNDV=RVX_RNDV_$(RNDV_$*) -o $@ $< $(RC_LIBS)
$(addprefix $(B)/fuzz/rx_pair_dc_,$(TAG_RNDV)): $(B)/fuzz/rx_pair_dc_%: fuzz/rx.c fuzz/rx_dc.h $(HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(CPPFLAGS_RVX) $(PAIR_DC_DEFS) $(FUZZ_RX_DEFS) -DRVX_FUZZ_BACKOFF_HOOK=fuzz_nic_hook \
	  -DRVX_RNDV=RVX_RNDV_$(RNDV_$*) -o $@ $< $(RC_LIBS) -ldl
$(B)/fuzz/wire_shm: fuzz/wire.c $(HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(CPPFLAGS_RVX) -o $@ $<
$(B)/fuzz/wire_rc: fuzz/wire.c $(HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(CPPFLAGS_RVX) $(RC_DEFS) -o $@ $< $(RC_LIBS)
$(B)/fuzz/wire_dc: fuzz/wire.c $(HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(CPPFLAGS_RVX) $(DC_DEFS) -o $@ $< $(RC_LIBS)
$(B)/fuzz/wire_pair_rc: fuzz/wire.c $(HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(CPPFLAGS_RVX) $(PAIR_DEFS) -o $@ $< $(RC_LIBS)
$(B)/fuzz/wire_pair_dc: fuzz/wire.c $(HEADERS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_FLAGS) $(CPPFLAGS_RVX) $(PAIR_DC_DEFS) -o $@ $< $(RC_LIBS)
# rvxsim's WQE decoder, built from its sources with the harness (the model itself is not changed)
# (engine.c and ud.c are included by the harness, which reaches their static functions)
SIM_FUZZ_SRCS := $(filter-out sim/engine.c sim/ud.c,$(SIM_VERBS_SRCS))
$(B)/fuzz/sim_wqe: fuzz/sim_wqe.c $(SIM_VERBS_SRCS) $(SIM_HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(filter-out -Werror -std=gnu11,$(FUZZ_FLAGS)) -std=gnu11 -w -Isim -pthread -o $@ $< $(SIM_FUZZ_SRCS)

fuzz: deps sim $(FUZZ_BINS)
	@FUZZ_S=$(FUZZ_S) FUZZ_NICE=$(FUZZ_NICE) fuzz/run.sh $(FUZZ_NAMES)
