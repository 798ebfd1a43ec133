# rvxsim tests: one standalone program per feature, built against the
# installed rdma-core (-libverbs -lmlx5) and run with LD_LIBRARY_PATH=build/sim.
# Included from sim/sim.mk; paths are relative to the project root.

SIM_TEST_NAMES := abi geometry opcodes srq wrap cq_owner moderation faults \
                  twoproc peer_death rnr verbs_path idle_cpu many_qps stopped_peer stats \
                  dc_objects dc_ops dc_errors dc_multi dc_resend ud_verbs ud_direct counters read_retry async_events wr_api mmio_count uc mw import odp xrc
SIM_TESTS := $(addprefix build/sim/tests/t_,$(SIM_TEST_NAMES))

SIM_TEST_CC     ?= gcc
SIM_TEST_CFLAGS ?= -O2 -g -Wall -Wextra -Werror -pthread
SIM_TEST_LIBS   ?= -libverbs -lmlx5

build/sim/tests/t_%: sim/tests/t_%.c sim/tests/simtest.h
	@mkdir -p $(dir $@)
	$(SIM_TEST_CC) $(SIM_TEST_CFLAGS) -o $@ $< $(SIM_TEST_LIBS)

$(filter build/sim/tests/t_dc_% build/sim/tests/t_wr_api build/sim/tests/t_read_retry,$(SIM_TESTS)): sim/tests/t_dc_common.h

.PHONY: sim-tests
sim-tests: $(SIM_TESTS)
