# rvxsim: a software ConnectX (mlx5) behind rdma-core's libibverbs.so.1 and libmlx5.so.1.
# Included by the top-level Makefile; paths are relative to the repository root.
#   make -f sim/sim.mk sim         build/sim/{libibverbs.so.1,libmlx5.so.1,rvxsim_devinfo}
#   make -f sim/sim.mk sim-bench   run the engine benchmark
# Run any rdma-core program on the model: LD_LIBRARY_PATH=build/sim ./prog

SIM_LIBDIR := build/sim
SIM_CC     := gcc
# SIM_VERSIONED: the objects go into the versioned shared libraries (a harness that links the
# sources into one program leaves it out, and with it the .symver aliases)
SIM_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -fPIC -pthread -fvisibility=hidden -DSIM_VERSIONED
SIM_HDRS   := sim/internal.h sim/engine.h sim/verbs.h
SIM_VERBS_SRCS := sim/verbs.c sim/objects.c sim/cq.c sim/qp.c sim/provider.c sim/tables.c sim/engine.c sim/decode.c sim/requester.c sim/responder.c sim/doorbell.c sim/fabric.c sim/trace.c sim/dc.c sim/sysfs.c sim/ud.c sim/abi.c sim/wr.c sim/dm.c sim/mmio.c sim/mw.c sim/xrc.c
SIM_VERBS_OBJS := $(patsubst sim/%.c,$(SIM_LIBDIR)/obj/%.o,$(SIM_VERBS_SRCS))
SIM_MLX5_OBJS  := $(SIM_LIBDIR)/obj/mlx5dv.o $(SIM_LIBDIR)/obj/mlx5dv_stubs.o

SIM_IBVERBS := $(SIM_LIBDIR)/libibverbs.so.1
SIM_MLX5    := $(SIM_LIBDIR)/libmlx5.so.1
SIM_DEVINFO := $(SIM_LIBDIR)/rvxsim_devinfo
SIM_BENCH   := $(SIM_LIBDIR)/bench_sim
SIM_PRELOAD := $(SIM_LIBDIR)/librvxsim_preload.so
SIM_ENV     := $(SIM_LIBDIR)/rvxsim-env

# Tools link against the model by name and find it next to themselves.
SIM_TOOL_LDFLAGS := -L$(SIM_LIBDIR) -l:libibverbs.so.1 -l:libmlx5.so.1 -Wl,-rpath,'$$ORIGIN'

.PHONY: sim sim-bench sim-clean

sim: $(SIM_IBVERBS) $(SIM_MLX5) $(SIM_DEVINFO) $(SIM_BENCH) $(SIM_PRELOAD) $(SIM_ENV)

$(SIM_LIBDIR)/obj/%.o: sim/%.c $(SIM_HDRS)
	@mkdir -p $(dir $@)
	$(SIM_CC) $(SIM_CFLAGS) -c $< -o $@

$(SIM_IBVERBS): $(SIM_VERBS_OBJS) sim/libibverbs.map
	$(SIM_CC) -shared -pthread -Wl,-soname,libibverbs.so.1 \
		-Wl,--version-script=sim/libibverbs.map -o $@ $(SIM_VERBS_OBJS)

$(SIM_MLX5): $(SIM_MLX5_OBJS) $(SIM_IBVERBS) sim/libmlx5.map
	$(SIM_CC) -shared -pthread -Wl,-soname,libmlx5.so.1 \
		-Wl,--version-script=sim/libmlx5.map -o $@ $(SIM_MLX5_OBJS) \
		$(SIM_IBVERBS) -Wl,-rpath,'$$ORIGIN'

$(SIM_DEVINFO): sim/devinfo.c $(SIM_IBVERBS) $(SIM_MLX5)
	$(SIM_CC) -std=gnu11 -O2 -g -Wall -Wextra -pthread -o $@ $< $(SIM_TOOL_LDFLAGS)

$(SIM_BENCH): sim/bench_sim.c $(SIM_IBVERBS) $(SIM_MLX5)
	$(SIM_CC) -std=gnu11 -O2 -g -Wall -Wextra -pthread -o $@ $< $(SIM_TOOL_LDFLAGS)

# Unmodified clients run as: build/sim/rvxsim-env PROGRAM ... (see sim/README.md, "Clients")
$(SIM_PRELOAD): sim/preload.c
	@mkdir -p $(dir $@)
	$(SIM_CC) -std=gnu11 -O2 -g -Wall -Wextra -fPIC -shared -fvisibility=hidden -o $@ $< -ldl

$(SIM_ENV): sim/rvxsim-env
	@mkdir -p $(dir $@)
	cp $< $@

sim-bench: sim
	$(SIM_BENCH)

sim-clean:
	rm -rf $(SIM_LIBDIR)

-include sim/tests/tests.mk
