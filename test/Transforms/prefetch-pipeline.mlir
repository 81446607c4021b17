// loom-compile-pipeline runs loom-prefetch after loom-fsdp (no forward
// prefetch, as FSDP2; backward bounded: FSDP2's pre within the step's
// predicted peak) and loom-bucket when
// bucket-bytes is set; loom-compile passes the options through.

// RUN: loom-compile --dp=fsdp --world-size=4 --print-pipeline | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: builtin.module(loom-fsdp{{.*}} reshard-after-forward=auto },loom-prefetch{backward-prefetch=bounded forward-prefetch=0 },loom-sync-batch-norm,func.func(loom-attach-optimizer
// DEFAULT-NOT: loom-bucket

// RUN: loom-compile --dp=fsdp --world-size=4 --forward-prefetch=2 --backward-prefetch=post --bucket-bytes=4096 --print-pipeline | FileCheck %s --check-prefix=OPTS
// OPTS: loom-prefetch{backward-prefetch=post forward-prefetch=2 },loom-bucket{bucket-bytes=4096},loom-sync-batch-norm,func.func(loom-attach-optimizer

// The same pipeline through loom-opt.
// RUN: loom-opt %S/prefetch.mlir --pass-pipeline="builtin.module(loom-compile-pipeline{dp=fsdp world-size=2 optimizer=none forward-prefetch=1 backward-prefetch=none bucket-bytes=64})" | FileCheck %s --check-prefix=OPT
// OPT: loomrt.program

// RUN: not loom-compile --dp=fsdp --world-size=4 --backward-prefetch=early --print-pipeline 2>&1 | FileCheck %s --check-prefix=MODE
// MODE: for the --backward-prefetch option: 'early' is not one of bounded, pre, post, none
// RUN: not loom-compile --dp=fsdp --world-size=4 --forward-prefetch=-1 --print-pipeline 2>&1 | FileCheck %s --check-prefix=NEG
// NEG: forward-prefetch must not be negative, got -1
// RUN: not loom-compile --dp=fsdp --world-size=4 --bucket-bytes=-8 --print-pipeline 2>&1 | FileCheck %s --check-prefix=NEGB
// NEGB: bucket-bytes must not be negative, got -8
// RUN: not loom-compile --dp=replicate --world-size=4 --bucket-bytes=4096 --print-pipeline 2>&1 | FileCheck %s --check-prefix=DDP
// DDP: forward-prefetch, backward-prefetch, forward-targets, backward-targets and bucket-bytes need dp=fsdp
// RUN: not loom-compile --dp=replicate --world-size=4 --forward-targets=layers.0:layers.1 --print-pipeline 2>&1 | FileCheck %s --check-prefix=DDP

// Explicit per-unit lists (FSDP2's set_modules_to_forward_prefetch and
// set_modules_to_backward_prefetch) pass through to loom-prefetch.
// RUN: loom-compile --dp=fsdp --world-size=4 --forward-targets=layers.0:layers.1 '--backward-targets=layers.1:layers.0+<root>' --print-pipeline | FileCheck %s --check-prefix=TLIST
// TLIST: loom-prefetch{backward-prefetch=bounded backward-targets={layers.1:layers.0+<root>} forward-prefetch=0 forward-targets={layers.0:layers.1}}
// With layers.0 -> [layers.1], layers.1's all-gather starts right after
// layers.0's completes, before layers.0's feed-forward runs.
// RUN: loom-compile %S/prefetch.mlir --dp=fsdp --world-size=2 --forward-targets=layers.0:layers.1 --emit=program | FileCheck %s --check-prefix=TARGETS
// TARGETS: "op":"wait"{{.*}}"name":"fsdp.all_gather:layers.0","module":"layers.0","phase":"forward"
// TARGETS-NOT: "module":"layers.0.ffn"
// TARGETS: "op":"all_gather_start"{{.*}}"name":"fsdp.all_gather:layers.1","module":"layers.1","phase":"forward"
// TARGETS: "module":"layers.0.ffn"
// TARGETS: "op":"wait"{{.*}}"name":"fsdp.all_gather:layers.1","module":"layers.1","phase":"forward"

// The program of prefetch.mlir's step on 2 ranks with forward-prefetch=1:
// layers.0's all-gather is issued while the root's gathered weights are
// split and before the embedding runs; two all-gathers are in flight.
// RUN: loom-compile %S/prefetch.mlir --dp=fsdp --world-size=2 --forward-prefetch=1 --emit=program | FileCheck %s --check-prefix=PROG
// PROG: "op":"all_gather_start"{{.*}}"module":"","phase":"forward"
// PROG-NEXT: "op":"wait"{{.*}}"module":"","phase":"forward"
// PROG-NOT: "module":"tok_embeddings"
// PROG: "op":"all_gather_start"{{.*}}"module":"layers.0","phase":"forward"
// PROG-NOT: "op":"wait"
// PROG: "module":"tok_embeddings"
// PROG: "op":"wait"{{.*}}"module":"layers.0","phase":"forward"
// PROG-NEXT: "op":"free"
// PROG-NEXT: "op":"record_event"
// PROG-NEXT: "op":"wait_event"
// PROG-NEXT: "op":"aten"{{.*}}"module":"layers.1","phase":"forward"
// PROG: "op":"all_gather_start"{{.*}}"module":"layers.1","phase":"forward"

// With 128-byte buckets: the root alone and layers.0+1 in forward, layers.2
// alone; in backward layers.2+1, then layers.0 (prefetched by layers.1,
// before the merged reduce-scatter of layers.2+1), then the reduce-scatters
// of layers.0 and the root.
// RUN: loom-compile %S/prefetch.mlir --dp=fsdp --world-size=2 --bucket-bytes=128 --emit=program | FileCheck %s --check-prefix=BUCKET
// BUCKET: "op":"all_gather_start"{{.*}}"name":"fsdp.all_gather:<root>","module":"","phase":"forward"
// BUCKET: "op":"all_gather_start"{{.*}}"name":"loom.bucket:layers.0,layers.1","module":"layers","phase":"forward"
// BUCKET: "op":"all_gather_start"{{.*}}"name":"fsdp.all_gather:layers.2","module":"layers.2","phase":"forward"
// BUCKET: "op":"all_gather_start"{{.*}}"name":"loom.bucket:layers.2,layers.1","module":"layers","phase":"backward"
// BUCKET: "op":"all_gather_start"{{.*}}"name":"fsdp.all_gather:layers.0","module":"layers.0","phase":"backward"
// BUCKET: "op":"reduce_scatter_start"{{.*}}"name":"loom.bucket:layers.2,layers.1"
// BUCKET: "op":"reduce_scatter_start"{{.*}}"name":"fsdp.reduce_scatter:layers.0"
// BUCKET: "op":"reduce_scatter_start"{{.*}}"name":"fsdp.reduce_scatter:<root>"
// BUCKET-NOT: _start
