#!/usr/bin/env bash
# Builds Loom's libFuzzer targets with clang-22 (ASan + UBSan) in their own
# build folders and fuzzes each for a bounded time or number of executions:
#   importer     the .pt2 importer (tools/loom-import-fuzzer)
#   artifact     the runtime's .loomx loader (runtime/fuzz)
#   safetensors  the runtime's safetensors reader (runtime/fuzz)
#   checkpoint-index  the runtime's checkpoint index.json reader (runtime/fuzz)
# Seeds are committed fixtures; each target's corpus grows in BUILD_DIR and
# later runs start from it. Exits non-zero on a crash, leaving the input in
# BUILD_DIR/crashes/. docs/fuzzing.md records the long runs.
#
# usage: scripts/fuzz.sh [--build-only] [SECONDS] [BUILD_DIR] [TARGET...]
#   SECONDS    per target (default 60); with FUZZ_RUNS=N set, each target
#              stops after N executions instead
#   BUILD_DIR  default build-fuzz (the runtime's targets: BUILD_DIR/runtime)
#   TARGET     default: all four
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
seconds=${1:-60}
build=${2:-build-fuzz}
shift $(($# < 2 ? $# : 2))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(importer artifact safetensors checkpoint-index)
case "$build" in /*) ;; *) build="$root/$build" ;; esac

if ! command -v clang++-22 >/dev/null; then
  echo "fuzz: clang++-22 not installed (make setup installs it)" >&2
  exit 1
fi

configure() { # SOURCE BUILD FLAGS...
  local src=$1 dir=$2
  shift 2
  [ -f "$dir/build.ninja" ] && return
  mkdir -p "$dir"
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22 \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    "$@" >"$dir/configure.log" 2>&1 ||
    { cat "$dir/configure.log"; exit 1; }
}

for t in "${targets[@]}"; do
  case $t in
  importer)
    configure . "$build" -DLOOM_ENABLE_FUZZER=ON
    ninja -C "$build" loom-import-fuzzer >/dev/null ;;
  artifact | safetensors | checkpoint-index)
    configure runtime "$build/runtime" -DLOOMRT_ENABLE_FUZZER=ON \
      -DLOOMRT_BUILD_TESTS=OFF -DLOOMRT_PYTHON="$root/.venv/bin/python"
    ninja -C "$build/runtime" "loomrt-$t-fuzzer" >/dev/null ;;
  *)
    echo "fuzz: unknown target '$t' (importer, artifact, safetensors, checkpoint-index)" >&2
    exit 1 ;;
  esac
done
[ $build_only = 0 ] || exit 0

# Seeds, rebuilt each run from the committed fixtures. The importer and the
# loader also take their JSON alone (see the targets), so the JSON inside
# an archive is a seed of its own: every artifact's, and micro.pt2's graph
# but not tiny.pt2's (37 KB: the importer's time per input grows with the
# graph's size, and micro's has the same schema at a quarter of it).
seeds="$build/fuzz-seeds"
rm -rf "$seeds"
mkdir -p "$seeds"/{importer,artifact,safetensors,checkpoint-index} "$build/crashes"
cp test/Import/Inputs/tiny.pt2 tools/loom-import-fuzzer/seeds/*.pt2 \
  "$seeds/importer/"
cp runtime/fuzz/seeds/artifact/*.loomx "$seeds/artifact/"
cp runtime/fuzz/seeds/safetensors/*.safetensors "$seeds/safetensors/"
cp runtime/fuzz/seeds/checkpoint-index/*.json "$seeds/checkpoint-index/"
python3 - "$seeds" <<'PY'
import pathlib, re, struct, sys, zipfile
seeds = pathlib.Path(sys.argv[1])
for p in [seeds / "importer" / "micro.pt2"]:
    z = zipfile.ZipFile(p)
    name = next(n for n in z.namelist() if n.endswith("models/model.json"))
    (seeds / "importer" / (p.stem + ".json")).write_bytes(z.read(name))
for p in (seeds / "artifact").glob("*.loomx"):
    b = p.read_bytes()
    (n,) = struct.unpack_from("<Q", b, 16)
    (seeds / "artifact" / (p.stem + ".json")).write_bytes(b[32:32 + n])
# The loader's dictionary: every string ArtifactSchema.def declares (keys,
# enum spellings, dtypes), quoted as they appear in the program JSON.
words = set()
for line in open("runtime/include/loomrt/ArtifactSchema.def"):
    if line.startswith("LOOMX_") and not line.startswith("LOOMX_MAGIC"):
        words.update(re.findall(r'"([^"\\]*)"', line))
with open(seeds / "artifact.dict", "w") as f:
    for w in sorted(words):
        for word in w.split() if " " in w else [w]:
            f.write('"\\"%s\\""\n' % word)
# The checkpoint index's dictionary: every key and every kind, dtype and
# other string the seed indexes hold, quoted.
import json
words = set()
def walk(v):
    if isinstance(v, dict):
        for k, x in v.items():
            words.add(k)
            walk(x)
    elif isinstance(v, list):
        for x in v:
            walk(x)
    elif isinstance(v, str) and len(v) < 40:
        words.add(v)
for p in (seeds / "checkpoint-index").glob("*.json"):
    walk(json.loads(p.read_text()))
words.update(["parameter", "buffer", "optimizer_state", "step", "f16", "bf16", "i64"])
with open(seeds / "checkpoint-index.dict", "w") as f:
    for w in sorted(words):
        if w.isprintable() and '"' not in w and "\\" not in w:
            f.write('"\\"%s\\""\n' % w)
PY

# Mixed instrumented/uninstrumented code (the MLIR libraries, LibTorch)
# makes ASan's container-overflow check and its allocator poisoning
# (BumpPtrAllocator poisons from inline headers, unpoisons in uninstrumented
# libLLVM) report false positives.
export ASAN_OPTIONS=detect_container_overflow=0:allow_user_poisoning=0:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
if [ -n "${FUZZ_RUNS:-}" ]; then
  limit=(-runs="$FUZZ_RUNS")
else
  limit=(-max_total_time="$seconds")
fi

status=0
for t in "${targets[@]}"; do
  corpus="$build/fuzz-corpus/$t"
  mkdir -p "$corpus"
  case $t in
  importer)
    bin="$build/bin/loom-import-fuzzer"
    extra=(-dict="$root/test/Import/Inputs/pt2.dict") ;;
  artifact)
    bin="$build/runtime/bin/loomrt-artifact-fuzzer"
    extra=(-dict="$seeds/artifact.dict") ;;
  safetensors)
    bin="$build/runtime/bin/loomrt-safetensors-fuzzer"
    extra=() ;;
  checkpoint-index)
    bin="$build/runtime/bin/loomrt-checkpoint-index-fuzzer"
    extra=(-dict="$seeds/checkpoint-index.dict") ;;
  esac
  # Past crashes (runtime/fuzz/regressions) are replayed as corpus: the
  # sanitized build checks them again on every run.
  regressions=()
  [ -d "runtime/fuzz/regressions/$t" ] && regressions=("runtime/fuzz/regressions/$t")
  log="$build/fuzz-$t.log"
  echo "fuzz $t: ${limit[*]} ($(date -u +%FT%TZ))"
  if ! "$bin" "${limit[@]}" -timeout=20 -rss_limit_mb=4096 \
      -print_final_stats=1 -artifact_prefix="$build/crashes/$t-" "${extra[@]}" \
      "$corpus" "$seeds/$t" "${regressions[@]}" >"$log" 2>&1; then
    tail -n 60 "$log"
    echo "fuzz $t: FAILED; the input is in $build/crashes/ (log: $log)" >&2
    status=1
    continue
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
  files=$(find "$corpus" -type f | wc -l)
  bytes=$(du -sb "$corpus" | cut -f1)
  echo "fuzz $t: $runs executions, $rate exec/s, corpus $files files ($bytes bytes), no crash"
done
exit $status
