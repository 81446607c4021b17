// Hand-computed predicted peak memory of an optimizer update's temporaries
// (PeakMemory.cpp, getKernelScratchBytes), as the runtime runs torch.optim's
// algorithms (runtime/lib/Optimizer.cpp): w is 16x16xf32, P = 1024 B.
// Persistent: x and w 1024 B each, plus the optimizer's state (Adam and
// AdamW: 2P; SGD with momentum: P). Activations (op index: storage
// [first, last]): 0 %p 1024 [0, 1], 1 %l 4 [1, end], 2 %g 1024 [2, 3],
// 3 the update of w, which reads %g last and holds its scratch:
// - AdamW: sqrt and div at once, 2P, and 12 B of scalars: 1028 + 2060 = 3088
//   at op 3; 4096 + 3088 = 7184.
// - Adam with weight decay: also grad.add(param), 3P + 12: 1028 + 3084 =
//   4112; 4096 + 4112 = 8208. (AdamW with maximize: the same, for -grad.)
// - SGD with Nesterov momentum: grad.add(buf), P, and 12 B of scalars:
//   1028 + 1036 = 2064; 3072 + 2064 = 5136.
// - SGD without momentum: nothing; the peak is 1028 at ops 0 to 3 (first
//   at op 1): 2048 + 1028 = 3076.
// - fused AdamW: a 4-byte step tensor: 1032; 4096 + 1032 = 5128.
// - AdamW with AMSGrad: Adam's scratch (maximum writes into max_exp_avg_sq
//   in place); state 3P: 5120 + 3088 = 8208.
// - RMSprop: avg (P) and 12 B of scalars: 1028 + 1036 = 2064; state
//   square_avg P: 3072 + 2064 = 5136.
// - RMSprop centered with momentum, weight decay and maximize: -grad, then
//   grad.add(param) while -grad lives (2P), then avg beside the decayed
//   gradient (2P), and 12 B: 1028 + 2060 = 3088; state 3P: 5120 + 3088 =
//   8208.
// - Adagrad with weight decay: the decayed gradient and std, 2P + 12:
//   3088; state sum P: 3072 + 3088 = 6160.
// - fused Adagrad: the 4-byte step tensor: 1032; 3072 + 1032 = 4104.
// - Adamax with weight decay: the decayed gradient and grad.abs(), 2P + 12:
//   3088; state exp_avg and exp_inf 2P: 4096 + 3088 = 7184.
// - RAdam with (L2) weight decay: the decayed gradient, `update` and, once
//   rectified, `adaptive`, 3P + 12: 4112; state 2P: 4096 + 4112 = 8208.
//   With decoupled weight decay no gradient copy: 3088; 7184.
// - NAdam with L2 weight decay: as Adam, the decayed gradient beside the
//   `div` and its `sqrt`, 3P + 12: 4112; state 2P: 8208. With decoupled
//   weight decay no gradient copy: 3088; 7184.
// - Adadelta: std and delta at once, 2P + 12: 3088; state square_avg and
//   acc_delta 2P: 4096 + 3088 = 7184. With weight decay and maximize: -grad,
//   then the decayed gradient (which outlives it) beside std and delta, 3P +
//   12: 4112; 8208.
// - Rprop: sign, the gradient's clone and its sign() at once, 3P (above 2P
//   and the 256-byte mask sign.eq(etaminus) with its 8-byte scalar): 1028 +
//   3072 = 4100; state prev and step_size 2P: 4096 + 4100 = 8196. With
//   maximize the same: -grad is freed when its clone replaces it, and
//   before that it, grad.mul(prev) and its sign are three P too.
// - ASGD, once averaging starts (any step may be past t0 + 1):
//   param.sub(ax) and the 4-byte mu, P + 4 (above the 8-byte scalar of
//   param.mul_): 1028 + 1028 = 2056; state ax P: 3072 + 2056 = 5128. With
//   weight decay and maximize: -grad and the decayed gradient made from it,
//   2P (above P + 8 and P + 4): 1028 + 2048 = 3076; 3072 + 3076 = 6148.
// The runtime measures each of these on a capture of a one-layer model
// whose peak is the update (loom-run --memory-report; see
// python/tests/test_optimizers_parity.py).
// (Without the scratch, every one peaks at 1028 activations.)

// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=adamw}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAMW
// ADAMW: predicted peak memory: 7184 bytes (persistent 4096 + activations 3088
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=rprop}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=RPROP
// RPROP: predicted peak memory: 8196 bytes (persistent 4096 + activations 4100
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=rprop maximize=true}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=RPROP-MAX
// RPROP-MAX: predicted peak memory: 8196 bytes (persistent 4096 + activations 4100
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=asgd}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=ASGD
// ASGD: predicted peak memory: 5128 bytes (persistent 3072 + activations 2056
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=asgd weight-decay=0.1 maximize=true}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=ASGD-WD-MAX
// ASGD-WD-MAX: predicted peak memory: 6148 bytes (persistent 3072 + activations 3076
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=adam weight-decay=0.1}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAM-WD
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=adamw maximize=true}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAM-WD
// ADAM-WD: predicted peak memory: 8208 bytes (persistent 4096 + activations 4112
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=sgd momentum=0.9 nesterov=true}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=NESTEROV
// NESTEROV: predicted peak memory: 5136 bytes (persistent 3072 + activations 2064
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=sgd}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=SGD
// SGD: predicted peak memory: 3076 bytes (persistent 2048 + activations 1028
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=adamw impl=fused}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=FUSED
// FUSED: predicted peak memory: 5128 bytes (persistent 4096 + activations 1032
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=adamw amsgrad=true}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=AMSGRAD
// AMSGRAD: predicted peak memory: 8208 bytes (persistent 5120 + activations 3088
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=rmsprop}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=RMSPROP
// RMSPROP: predicted peak memory: 5136 bytes (persistent 3072 + activations 2064
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=rmsprop centered=true momentum=0.9 weight-decay=0.1 maximize=true}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=RMSPROP-ALL
// RMSPROP-ALL: predicted peak memory: 8208 bytes (persistent 5120 + activations 3088
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=adagrad weight-decay=0.1}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAGRAD
// ADAGRAD: predicted peak memory: 6160 bytes (persistent 3072 + activations 3088
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=adagrad impl=fused}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAGRAD-FUSED
// ADAGRAD-FUSED: predicted peak memory: 4104 bytes (persistent 3072 + activations 1032
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=adamax weight-decay=0.1}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADAMAX
// ADAMAX: predicted peak memory: 7184 bytes (persistent 4096 + activations 3088
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=radam weight-decay=0.1}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=RADAM
// RADAM: predicted peak memory: 8208 bytes (persistent 4096 + activations 4112
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=radam weight-decay=0.1 decoupled-weight-decay=true}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=RADAM-DECOUPLED
// RADAM-DECOUPLED: predicted peak memory: 7184 bytes (persistent 4096 + activations 3088
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=adadelta}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADADELTA
// ADADELTA: predicted peak memory: 7184 bytes (persistent 4096 + activations 3088
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=adadelta weight-decay=0.1 maximize=true}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=ADADELTA-ALL
// ADADELTA-ALL: predicted peak memory: 8208 bytes (persistent 4096 + activations 4112
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=nadam weight-decay=0.1}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=NADAM
// NADAM: predicted peak memory: 8208 bytes (persistent 4096 + activations 4112
// RUN: loom-opt %s --pass-pipeline='builtin.module(func.func(loom-attach-optimizer{optimizer=nadam weight-decay=0.1 decoupled-weight-decay=true}),loom-stats)' -o /dev/null 2>&1 | FileCheck %s --check-prefix=NADAM-DECOUPLED
// NADAM-DECOUPLED: predicted peak memory: 7184 bytes (persistent 4096 + activations 3088
// The lowered program predicts the same.
// RUN: loom-compile %s --optimizer=adamw --emit=mlir --summary -o /dev/null 2>&1 | FileCheck %s --check-prefix=RT
// RT: predicted peak memory 7184 bytes (persistent 4096 + activations 3088)

func.func @step(%x: tensor<16x16xf32> {loom.name = "x", loom.role = #loom.role<input>},
                %w: tensor<16x16xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<16x16xf32> {loom.role = #loom.role<grad>, loom.target = "w"})
    attributes {loom.step} {
  %p = loom.aten "aten::mul.Tensor"(%x, %w) {args = [#loom.arg<0>, #loom.arg<1>], loom.phase = #loom.phase<forward>} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  %l = loom.aten "aten::sum.default"(%p) {args = [#loom.arg<0>], loom.phase = #loom.phase<forward>} : (tensor<16x16xf32>) -> tensor<f32>
  %g = loom.aten "aten::clone.default"(%x) {args = [#loom.arg<0>], loom.phase = #loom.phase<backward>} : (tensor<16x16xf32>) -> tensor<16x16xf32>
  return %l, %g : tensor<f32>, tensor<16x16xf32>
}
