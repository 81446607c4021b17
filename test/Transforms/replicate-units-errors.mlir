// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2,2 axes=r,s grouping=units" 2>&1 | FileCheck %s --check-prefix=TWOD
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2 grouping=units bucket-cap-mb=1" 2>&1 | FileCheck %s --check-prefix=CAP
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2 units=fc" 2>&1 | FileCheck %s --check-prefix=NOUNITS
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2 grouping=units unit-settings=fc:reshard-after-forward=true" 2>&1 | FileCheck %s --check-prefix=RAF
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2 grouping=units unit-settings=fc:all-reduce=last" 2>&1 | FileCheck %s --check-prefix=ALLREDUCE
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2 grouping=units unit-settings=fc:gradient-sync=true" 2>&1 | FileCheck %s --check-prefix=VALUE
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2 grouping=units units=head" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2 grouping=units units=fc unit-settings=layers.*:gradient-sync=every" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2 grouping=units bad=1" 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not loom-opt %s --split-input-file --loom-replicate="mesh-shape=2 grouping=bucket" 2>&1 | FileCheck %s --check-prefix=ENUM
// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-replicate="mesh=dp grouping=units"
// The compile options: grouping=units belongs to dp=replicate, without
// bucket caps; units with dp=replicate need it.
// RUN: not loom-compile %S/Inputs/accumulation-mlp.mlir --dp=fsdp --world-size=2 --grouping=units -o %t.loomx 2>&1 | FileCheck %s --check-prefix=FSDP
// RUN: not loom-compile %S/Inputs/accumulation-mlp.mlir --dp=replicate --world-size=2 --grouping=units --bucket-cap-mb=5 -o %t.loomx 2>&1 | FileCheck %s --check-prefix=COMPILECAP
// RUN: not loom-compile %S/Inputs/accumulation-mlp.mlir --dp=replicate --world-size=2 --units=fc -o %t.loomx 2>&1 | FileCheck %s --check-prefix=COMPILEUNITS
// RUN: not loom-compile %S/Inputs/accumulation-mlp.mlir --dp=replicate --world-size=4 --replicate-size=2 --grouping=units -o %t.loomx 2>&1 | FileCheck %s --check-prefix=HSDP

// PyTorch's replicate raises ValueError for a mesh that is not 1-D.
// TWOD: error: --loom-replicate: grouping=units is FSDP2's replicate, which takes a 1-D mesh (PyTorch raises ValueError for any other), but mesh-shape has 2 dimensions; replicas of shards are HSDP (loom-fsdp with mesh-shape=R,S)
// CAP: error: --loom-replicate: bucket-cap-mb and first-bucket-cap-mb size DDP's buckets; grouping=units reduces one unit at a time
// NOUNITS: error: --loom-replicate: units and unit-settings need grouping=units (DDP's buckets are sized, not formed from modules)
// Only gradient-sync means something without sharding.
// RAF: error: 'func.func' op --loom-replicate: unit-settings entry 'fc:reshard-after-forward=true' sets what replicate does not have: its parameters are never sharded, so only gradient-sync applies
// ALLREDUCE: error: 'func.func' op --loom-replicate: unit-settings entry 'fc:all-reduce=last' sets what replicate does not have
// The unit code is loom-fsdp's; its errors name the pass that runs it.
// VALUE: error: 'func.func' op --loom-replicate: unit-settings entry 'fc:gradient-sync=true': gradient-sync takes last or every, not 'true'
// UNKNOWN: error: 'func.func' op --loom-replicate: unit 'head' matches no parameter (none is owned or used by a module under it)
// NOMATCH: error: 'func.func' op --loom-replicate: unit-settings entry 'layers.*:gradient-sync=every' matches no unit; the units are fc, <root>
// OPTION: no such option bad
// ENUM: 'bucket' is not one of buckets, units
// FSDP: grouping=units needs dp=replicate
// COMPILECAP: bucket-cap-mb and first-bucket-cap-mb size DDP's buckets; grouping=units reduces one unit at a time
// COMPILEUNITS: units and unit-settings with dp=replicate need grouping=units
// HSDP: replicate-size (HSDP) needs dp=fsdp

loom.mesh @dp shape [2] axes ["dp"]
func.func @step(%w: tensor<4xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "fc.weight"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %g = loom.aten "aten::zeros_like.default"(%w) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<4xf32>) -> tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}

// -----

// A mesh declared before the pass must be 1-D too.
loom.mesh @dp shape [2, 2] axes ["r", "s"]
// expected-error@+1 {{--loom-replicate: grouping=units is FSDP2's replicate, which takes a 1-D mesh (PyTorch raises ValueError for any other), but mesh @dp has 2 axes ["r", "s"]; replicas of shards are HSDP (loom-fsdp with mesh-shape=R,S)}}
func.func @step(%w: tensor<4xf32> {loom.name = "fc.weight", loom.role = #loom.role<parameter>},
                %x: tensor<2x4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "fc.weight"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%x) {args = [#loom.arg<0>], loom.module = "", loom.phase = #loom.phase<forward>} : (tensor<2x4xf32>) -> tensor<f32>
  %g = loom.aten "aten::zeros_like.default"(%w) {args = [#loom.arg<0>], loom.module = "fc", loom.phase = #loom.phase<backward>} : (tensor<4xf32>) -> tensor<4xf32>
  return %l, %g : tensor<f32>, tensor<4xf32>
}
