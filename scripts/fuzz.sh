#!/usr/bin/env bash
# Builds the importer's libFuzzer target with clang-22 (ASan + UBSan) in its
# own build folder and fuzzes it for a bounded time, starting from the
# committed fixture archive and its graph JSON. Exits non-zero on a crash,
# leaving the crashing input in the fuzz build folder.
#
# usage: scripts/fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
seconds=${1:-60}
build=${2:-build-fuzz}

if ! command -v clang++-22 >/dev/null; then
  echo "fuzz: clang++-22 not installed (make setup installs it)" >&2
  exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
  mkdir -p "$build"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DLOOM_ENABLE_FUZZER=ON >"$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; exit 1; }
fi
ninja -C "$build" loom-import-fuzzer >/dev/null

seeds="$build/fuzz-seeds"
corpus="$build/fuzz-corpus"
mkdir -p "$seeds" "$corpus"
cp test/Import/Inputs/tiny.pt2 "$seeds/tiny.pt2"
python3 - "$seeds" <<'PY'
import sys, zipfile
z = zipfile.ZipFile("test/Import/Inputs/tiny.pt2")
name = next(n for n in z.namelist() if n.endswith("models/model.json"))
open(sys.argv[1] + "/model.json", "wb").write(z.read(name))
PY

# Mixed instrumented/uninstrumented code (the MLIR libraries) makes ASan's
# container-overflow check and its allocator poisoning (BumpPtrAllocator
# poisons from inline headers, unpoisons in uninstrumented libLLVM) report
# false positives.
export ASAN_OPTIONS=detect_container_overflow=0:allow_user_poisoning=0:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
cd "$build"
./bin/loom-import-fuzzer -max_total_time="$seconds" -timeout=20 -rss_limit_mb=4096 \
  -print_final_stats=1 -dict="$root/test/Import/Inputs/pt2.dict" \
  fuzz-corpus fuzz-seeds 2>&1 | tail -n 25
