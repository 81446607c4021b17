# Loom: two commands do everything on a fresh machine.
#   make demo   capture the example models, import, compile and report
#   make test   set up, build and run every test (lit, unit, Python, fuzz)

BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup configure build build-compiler build-runtime test demo docs fuzz bench clean

all: build

setup:
	@scripts/setup.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
	  $(CMAKE_FLAGS)

# The runtime is its own CMake project (LibTorch needs exceptions, LLVM has
# them off); it links the LibTorch inside the pinned PyTorch wheel.
$(BUILD)/runtime/build.ninja:
	cmake -S runtime -B $(BUILD)/runtime -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
	  -DCMAKE_PREFIX_PATH=$$(.venv/bin/python -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')

configure: $(BUILD)/build.ninja $(BUILD)/runtime/build.ninja

build-compiler: setup $(BUILD)/build.ninja
	ninja -C $(BUILD) -j $(JOBS)

build-runtime: setup $(BUILD)/runtime/build.ninja
	ninja -C $(BUILD)/runtime -j $(JOBS)

build: build-compiler build-runtime

# The compiler's suite (lit, unit, Python end to end, fuzz) and the
# runtime's (unit, loom-run end to end).
test: build
	cd $(BUILD)/runtime && ctest --output-on-failure -j $(JOBS)
	@# ctest shows no output of a passing test: say which tests skipped, and why.
	@grep -h '^SKIPPED' $(BUILD)/runtime/Testing/Temporary/LastTest.log || true
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	@scripts/demo.sh

docs: build
	scripts/update-docs.sh $(BUILD)

fuzz: setup
	scripts/fuzz.sh $${FUZZ_SECONDS:-60}

clean:
	rm -rf $(BUILD) out
