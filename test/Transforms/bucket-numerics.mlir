// REQUIRES: torch
// Prefetching and bucketing compute what FSDP2 computes: the steps after
// loom-fsdp + loom-prefetch + loom-bucket give every rank the original
// step's loss on its batch and its shard of the averaged gradients.
// spmd_emulate.py runs all ranks in one process with the collectives
// emulated by ATen ops, in program order (atol 1e-5, rtol 1e-4).

// The ModelArgs(n_layers=3) unit structure of prefetch.mlir on 2 ranks.
// RUN: loom-opt %S/prefetch.mlir -o %t.orig.mlir
// RUN: loom-opt %S/prefetch.mlir --loom-fsdp="mesh-shape=2 reshard-after-forward=true" --loom-prefetch="forward-prefetch=2" --loom-bucket="bucket-bytes=1000" -o %t.all.mlir
// RUN: %torch_python %S/Inputs/spmd_emulate.py %t.orig.mlir %t.all.mlir | FileCheck %s --check-prefix=T3
// RUN: loom-opt %S/prefetch.mlir --loom-fsdp="mesh-shape=2" --loom-prefetch="backward-prefetch=post" --loom-bucket="bucket-bytes=128" -o %t.some.mlir
// RUN: %torch_python %S/Inputs/spmd_emulate.py %t.orig.mlir %t.some.mlir | FileCheck %s --check-prefix=T3

// fsdp.mlir's MLP stack with 15-row parameters padded on 4 ranks, and HSDP
// (2 x 2: the merged reduce-scatter is followed by each unit's all-reduce).
// RUN: loom-opt %S/fsdp.mlir -o %t.mlp.mlir
// RUN: loom-opt %S/fsdp.mlir --loom-fsdp="mesh-shape=4" --loom-prefetch="forward-prefetch=1" --loom-bucket="bucket-bytes=100000" -o %t.mlp-fsdp.mlir
// RUN: %torch_python %S/Inputs/spmd_emulate.py %t.mlp.mlir %t.mlp-fsdp.mlir | FileCheck %s --check-prefix=MLP
// RUN: loom-opt %S/fsdp.mlir --loom-fsdp="mesh-shape=2,2" --loom-prefetch --loom-bucket="bucket-bytes=100000" -o %t.mlp-hsdp.mlir
// RUN: %torch_python %S/Inputs/spmd_emulate.py %t.mlp.mlir %t.mlp-hsdp.mlir | FileCheck %s --check-prefix=MLP
// RUN: grep -cE '^ +%[0-9]+ = loom\.reduce_scatter_start ' %t.mlp-hsdp.mlir | FileCheck %s --check-prefix=ONE

// T3: ok: 7 results on 2 ranks match
// MLP: ok: 5 results on 4 ranks match
// ONE: {{^}}1{{$}}
