# Thin wrapper over CMake.  `make` builds into build/; `make check` installs
# what is missing (as root), builds with -Werror and runs every test;
# `make demo` shows softhca at work.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all build deps check demo clean fuzz

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Debian packages for building and testing (apt-get as root; otherwise the
# command to run is printed and make stops).
deps:
	@scripts/install-deps.sh

# Everything in sequence, also under `make -j`: deps, a -Werror build, then
# ctest and the pyverbs suite; the last line is "check: N passed, ...".
check: deps
	cmake -S . -B $(BUILD) -DSOFTHCA_WERROR=ON $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)
	@scripts/check.sh $(BUILD)

demo: deps
	@$(MAKE) --no-print-directory build
	@scripts/demo.sh $(BUILD)

# libFuzzer (tests/fuzz), clang only, in its own build dir: fuzz_wire on
# the wire codec's parser, fuzz_net_rx on the net path's receive side,
# fuzz_net_hs on the connection handshake (FUZZ_TARGETS picks), each for
# FUZZ_TIME seconds (default 60).  New inputs land in $(FUZZ_BUILD)/corpus,
# corpus-net-rx and corpus-net-hs, crashes in
# $(FUZZ_BUILD)/crash-* (replay: fuzz_*_seeds replay FILE).
FUZZ_BUILD ?= build-fuzz
FUZZ_TIME ?= 60
FUZZ_TARGETS ?= fuzz_wire fuzz_net_rx fuzz_net_hs
fuzz:
	@command -v clang >/dev/null || { echo "fuzz: needs clang and" \
		"libclang-rt-dev (apt-get install clang)"; exit 1; }
	cmake -S tests/fuzz -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
ifneq ($(filter fuzz_wire,$(FUZZ_TARGETS)),)
	$(FUZZ_BUILD)/fuzz_wire_seeds write $(FUZZ_BUILD)/corpus
	cd $(FUZZ_BUILD) && ./fuzz_wire -max_total_time=$(FUZZ_TIME) \
		-max_len=4160 -print_final_stats=1 corpus
endif
ifneq ($(filter fuzz_net_rx,$(FUZZ_TARGETS)),)
	$(FUZZ_BUILD)/fuzz_net_rx_seeds write $(FUZZ_BUILD)/corpus-net-rx
	cd $(FUZZ_BUILD) && ./fuzz_net_rx -max_total_time=$(FUZZ_TIME) \
		-max_len=4096 -timeout=10 -print_final_stats=1 corpus-net-rx
endif
ifneq ($(filter fuzz_net_hs,$(FUZZ_TARGETS)),)
	$(FUZZ_BUILD)/fuzz_net_hs_seeds write $(FUZZ_BUILD)/corpus-net-hs
	cd $(FUZZ_BUILD) && ./fuzz_net_hs -max_total_time=$(FUZZ_TIME) \
		-max_len=1024 -timeout=20 -print_final_stats=1 corpus-net-hs
endif

clean:
	rm -rf $(BUILD)
