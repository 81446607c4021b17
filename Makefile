# Loom: two commands do everything on a fresh machine.
#   make demo   capture the example models, import, compile and report
#   make test   set up, build and run every test (lit, unit, Python, fuzz)

BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all setup configure build test demo docs fuzz clean

all: build

setup:
	@scripts/setup.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
	  $(CMAKE_FLAGS)

configure: $(BUILD)/build.ninja

build: setup configure
	ninja -C $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

demo: build
	@scripts/demo.sh

docs: build
	scripts/update-docs.sh $(BUILD)

fuzz: setup
	scripts/fuzz.sh $${FUZZ_SECONDS:-60}

clean:
	rm -rf $(BUILD) out
