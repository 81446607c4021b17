#!/usr/bin/env bash
# The main job: capture each example model's training step from PyTorch,
# import it into Loom IR, round-trip it through loom-opt, report its
# statistics, compile it ahead of time (AdamW attached) and train it for 20
# steps with loom-run, checking every loss and the final parameters against
# PyTorch eager's; then GPT with FSDP on 4 ranks and as a 2-stage pipeline.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
OUT=${OUT:-out}
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"

for model in mlp gpt vit; do
  dir="$OUT/$model"
  mkdir -p "$dir"
  echo "=== $model: capture (PyTorch eager reference, 20 steps, AdamW) ==="
  .venv/bin/python -m loom.capture "examples/$model.py" --out "$dir" \
    --steps 20 --optimizer adamw
  echo "=== $model: import ==="
  "$BUILD/bin/loom-import" "$dir/step.pt2" -o "$dir/step.mlir"
  echo "wrote $dir/step.mlir ($(wc -l <"$dir/step.mlir") lines) and $dir/step.weights.safetensors"
  echo "=== $model: round trip through loom-opt ==="
  "$BUILD/bin/loom-opt" "$dir/step.mlir" -o "$dir/roundtrip.mlir"
  "$BUILD/bin/loom-opt" "$dir/roundtrip.mlir" -o "$dir/roundtrip2.mlir"
  "$BUILD/bin/loom-opt" "$dir/step.mlir" --mlir-print-op-generic |
    "$BUILD/bin/loom-opt" -o "$dir/roundtrip-generic.mlir"
  cmp "$dir/roundtrip.mlir" "$dir/roundtrip2.mlir"
  cmp "$dir/roundtrip.mlir" "$dir/roundtrip-generic.mlir"
  echo "round trip stable (custom and generic forms print identically)"
  echo "=== $model: loom-opt --loom-stats ==="
  "$BUILD/bin/loom-opt" "$dir/step.mlir" --loom-stats -o /dev/null 2>&1
  echo "=== $model: compile (the optimizer capture recorded: AdamW, lr 1e-3, weight decay 0.01) ==="
  "$BUILD/bin/loom-compile" "$dir/step.mlir" -o "$dir/step.loomx" --summary
  echo "=== $model: train 20 steps with loom-run, next to PyTorch eager's losses (bitwise: tolerance 0) ==="
  "$BUILD/runtime/bin/loom-run" "$dir/step.loomx" --batches "$dir/batches.safetensors" \
    --steps 20 --check "$dir/reference.json" --rtol 0 --atol 0 --trace "$dir/trace.json"
  echo
done
dir="$OUT/gpt-fsdp4"
echo "=== gpt on 4 CPU ranks with FSDP (fully_shard per layer + root): capture the per-rank step ==="
.venv/bin/python -m loom.capture examples/gpt.py --out "$dir" --steps 20 --optimizer adamw --split 4
"$BUILD/bin/loom-import" "$dir/step.pt2" -o "$dir/step.mlir"
echo "=== gpt FSDP: compile for the 4 ranks capture recorded, scheduled to overlap communication (loom-schedule) ==="
"$BUILD/bin/loom-compile" "$dir/step.mlir" -o "$dir/step.loomx" --dp=fsdp --schedule --summary
echo "=== gpt FSDP: train 20 steps on the artifact's 4 Gloo ranks, next to PyTorch eager on one device ==="
"$BUILD/runtime/bin/loom-run" "$dir/step.loomx" --batches "$dir/batches.safetensors" \
  --steps 20 --check "$dir/reference.json" --no-progress --trace "$dir/trace.json"
echo "=== gpt FSDP: the last step's timeline (collectives in flight under compute) ==="
.venv/bin/python scripts/render_timeline.py "$dir/trace.json" --step 19 -o "$dir/trace.svg"
echo

dir="$OUT/gpt-pp2"
echo "=== gpt on 2 CPU ranks as a 2-stage pipeline (1F1B, 4 microbatches): capture one microbatch's step ==="
.venv/bin/python -m loom.capture examples/gpt.py --out "$dir" --steps 20 --optimizer adamw --microbatches 4
"$BUILD/bin/loom-import" "$dir/step.pt2" -o "$dir/step.mlir"
echo "=== gpt pipeline: PyTorch's 1F1B action lists for 2 ranks, 4 microbatches ==="
"$BUILD/bin/loom-pp-schedule" --schedule=1F1B --pp=2 --microbatches=4 --lowered
echo "=== gpt pipeline: compile one program per stage (loom-pipeline-split + loom-pipeline-schedule) ==="
"$BUILD/bin/loom-compile" "$dir/step.mlir" -o "$dir/step.loomx" --pp=2 --pp-schedule=1F1B --summary
echo "=== gpt pipeline: train 20 steps on 2 Gloo ranks (activations and gradients sent point to point), next to PyTorch eager ==="
"$BUILD/runtime/bin/loom-run" "$dir/step.loomx" --batches "$dir/batches.safetensors" \
  --steps 20 --check "$dir/reference.json" --no-progress --trace "$dir/trace.json"
echo

echo "demo: the examples were captured, imported, compiled and trained at parity"
echo "with PyTorch eager; IR, artifacts and Perfetto traces are under $OUT/"
