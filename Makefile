# Thin wrapper over CMake.  `make` builds into build/; `make check` installs
# what is missing (as root), builds with -Werror and runs every test;
# `make demo` shows softhca at work.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all build deps check demo clean

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

clean:
	rm -rf $(BUILD)
