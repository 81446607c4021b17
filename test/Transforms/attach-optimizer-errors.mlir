// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=lion" 2>&1 | FileCheck %s --check-prefix=LION
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adam lr=-1" 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=sgd nesterov=true" 2>&1 | FileCheck %s --check-prefix=NESTEROV
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adamw momentum=0.9" 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adam beta1=1.0" 2>&1 | FileCheck %s --check-prefix=BETA
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=sgd amsgrad=true" 2>&1 | FileCheck %s --check-prefix=AMSGRAD
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adam initial-accumulator-value=0.1" 2>&1 | FileCheck %s --check-prefix=ACCUMULATOR
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adagrad centered=true" 2>&1 | FileCheck %s --check-prefix=CENTERED
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=rmsprop alpha=-0.5" 2>&1 | FileCheck %s --check-prefix=ALPHA
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adagrad initial-accumulator-value=-1" 2>&1 | FileCheck %s --check-prefix=INITIAL
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=rmsprop impl=fused" 2>&1 | FileCheck %s --check-prefix=FUSED
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adamax impl=fused" 2>&1 | FileCheck %s --check-prefix=FUSED-ADAMAX
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adamax amsgrad=true" 2>&1 | FileCheck %s --check-prefix=AMSGRAD-ADAMAX
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adamw decoupled-weight-decay=true" 2>&1 | FileCheck %s --check-prefix=DECOUPLED
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=radam impl=fused" 2>&1 | FileCheck %s --check-prefix=FUSED-RADAM
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adadelta impl=fused" 2>&1 | FileCheck %s --check-prefix=FUSED-ADADELTA
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adadelta rho=1.5" 2>&1 | FileCheck %s --check-prefix=RHO
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=rmsprop rho=0.5" 2>&1 | FileCheck %s --check-prefix=RHO-RMSPROP
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=nadam impl=fused" 2>&1 | FileCheck %s --check-prefix=FUSED-NADAM
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=nadam momentum-decay=-1" 2>&1 | FileCheck %s --check-prefix=MOMENTUM-DECAY
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adam momentum-decay=0.01" 2>&1 | FileCheck %s --check-prefix=MOMENTUM-DECAY-ADAM
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=rprop weight-decay=0.1" 2>&1 | FileCheck %s --check-prefix=WD-RPROP
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=rprop eps=1e-3" 2>&1 | FileCheck %s --check-prefix=EPS-RPROP
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adam etaminus=0.3" 2>&1 | FileCheck %s --check-prefix=ETA-ADAM
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=rprop etaplus=0.9" 2>&1 | FileCheck %s --check-prefix=ETAS
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=rprop step-size-min=1 step-size-max=0.5" 2>&1 | FileCheck %s --check-prefix=STEP-SIZES
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=rprop impl=fused" 2>&1 | FileCheck %s --check-prefix=FUSED-RPROP
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=asgd eps=1e-3" 2>&1 | FileCheck %s --check-prefix=EPS-ASGD
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=adam t0=10" 2>&1 | FileCheck %s --check-prefix=T0-ADAM
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=sgd lr=0.1 alpha=0.75" 2>&1 | FileCheck %s --check-prefix=ALPHA-SGD
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=asgd lr=-1" 2>&1 | FileCheck %s --check-prefix=LR-ASGD
// RUN: not loom-opt %s --split-input-file --loom-attach-optimizer="optimizer=asgd impl=fused" 2>&1 | FileCheck %s --check-prefix=FUSED-ASGD

// An unknown algorithm is refused when the options are parsed, naming the
// known ones.
// LION: for the --optimizer option: 'lion' is not one of none, sgd, adam, adamw, rmsprop, adagrad, adadelta, adamax, radam, nadam, rprop, asgd
func.func @step(%w: tensor<4xf32> {loom.name = "w", loom.role = #loom.role<parameter>})
    -> (tensor<f32> {loom.role = #loom.role<loss>},
        tensor<4xf32> {loom.role = #loom.role<grad>, loom.target = "w"})
    attributes {loom.step} {
  %l = loom.aten "aten::sum.default"(%w) {args = [#loom.arg<0>]} : (tensor<4xf32>) -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4xf32>
}

// LR: error: 'func.func' op --loom-attach-optimizer: 'lr' is -1.0, expected a finite value >= 0.0
// NESTEROV: error: 'func.func' op --loom-attach-optimizer: Nesterov momentum requires a momentum > 0 and zero dampening
// MOMENTUM: error: 'func.func' op --loom-attach-optimizer: 'momentum' is not a hyperparameter of adamw (torch.optim.AdamW does not take it)
// BETA: error: 'func.func' op --loom-attach-optimizer: 'beta1' is 1.0, expected a finite value >= 0.0 and < 1.0
// A hyperparameter of another algorithm is refused, not ignored.
// AMSGRAD: error: 'func.func' op --loom-attach-optimizer: 'amsgrad' is not a hyperparameter of sgd (torch.optim.SGD does not take it)
// ACCUMULATOR: error: 'func.func' op --loom-attach-optimizer: 'initial-accumulator-value' is not a hyperparameter of adam (torch.optim.Adam does not take it)
// CENTERED: error: 'func.func' op --loom-attach-optimizer: 'centered' is not a hyperparameter of adagrad (torch.optim.Adagrad does not take it)
// ALPHA: error: 'func.func' op --loom-attach-optimizer: 'alpha' is -0.5, expected a finite value >= 0.0
// INITIAL: error: 'func.func' op --loom-attach-optimizer: 'initial_accumulator_value' is -1.0, expected a finite value >= 0.0
// torch.optim.RMSprop has no fused=True.
// FUSED: error: 'func.func' op --loom-attach-optimizer: impl=fused: rmsprop has no fused implementation (torch.optim.RMSprop takes no fused=True)
// FUSED-ADAMAX: error: 'func.func' op --loom-attach-optimizer: impl=fused: adamax has no fused implementation (torch.optim.Adamax takes no fused=True)
// DECOUPLED: error: 'func.func' op --loom-attach-optimizer: 'decoupled-weight-decay' is not a hyperparameter of adamw (torch.optim.AdamW does not take it)
// FUSED-RADAM: error: 'func.func' op --loom-attach-optimizer: impl=fused: radam has no fused implementation (torch.optim.RAdam takes no fused=True)
// FUSED-ADADELTA: error: 'func.func' op --loom-attach-optimizer: impl=fused: adadelta has no fused implementation (torch.optim.Adadelta takes no fused=True)
// RHO: error: 'func.func' op --loom-attach-optimizer: 'rho' is 1.5, expected a value in [0, 1]
// RHO-RMSPROP: error: 'func.func' op --loom-attach-optimizer: 'rho' is not a hyperparameter of rmsprop (torch.optim.RMSprop does not take it)
// FUSED-NADAM: error: 'func.func' op --loom-attach-optimizer: impl=fused: nadam has no fused implementation (torch.optim.NAdam takes no fused=True)
// MOMENTUM-DECAY: error: 'func.func' op --loom-attach-optimizer: 'momentum_decay' is -1.0, expected a finite value >= 0.0
// MOMENTUM-DECAY-ADAM: error: 'func.func' op --loom-attach-optimizer: 'momentum-decay' is not a hyperparameter of adam (torch.optim.Adam does not take it)
// AMSGRAD-ADAMAX: error: 'func.func' op --loom-attach-optimizer: 'amsgrad' is not a hyperparameter of adamax (torch.optim.Adamax does not take it)
// Rprop has no weight decay and no eps (torch.optim.Rprop takes neither);
// its etas and step sizes are checked as its constructor checks them.
// WD-RPROP: error: 'func.func' op --loom-attach-optimizer: 'weight-decay' is not a hyperparameter of rprop (torch.optim.Rprop does not take it)
// EPS-RPROP: error: 'func.func' op --loom-attach-optimizer: 'eps' is not a hyperparameter of rprop (torch.optim.Rprop does not take it)
// ETA-ADAM: error: 'func.func' op --loom-attach-optimizer: 'etaminus' is not a hyperparameter of adam (torch.optim.Adam does not take it)
// ETAS: error: 'func.func' op --loom-attach-optimizer: 'etas' are (0.5, 0.9), expected 0 < etaminus < 1 < etaplus
// STEP-SIZES: error: 'func.func' op --loom-attach-optimizer: 'step_size_min' is 1.0, above 'step_size_max' 0.5
// FUSED-RPROP: error: 'func.func' op --loom-attach-optimizer: impl=fused: rprop has no fused implementation (torch.optim.Rprop takes no fused=True)
// ASGD has no eps; its lambd and t0 are its own, and alpha is RMSprop's and
// ASGD's only (each with its own default).
// EPS-ASGD: error: 'func.func' op --loom-attach-optimizer: 'eps' is not a hyperparameter of asgd (torch.optim.ASGD does not take it)
// T0-ADAM: error: 'func.func' op --loom-attach-optimizer: 't0' is not a hyperparameter of adam (torch.optim.Adam does not take it)
// ALPHA-SGD: error: 'func.func' op --loom-attach-optimizer: 'alpha' is not a hyperparameter of sgd (torch.optim.SGD does not take it)
// LR-ASGD: error: 'func.func' op --loom-attach-optimizer: 'lr' is -1.0, expected a finite value >= 0.0
// FUSED-ASGD: error: 'func.func' op --loom-attach-optimizer: impl=fused: asgd has no fused implementation (torch.optim.ASGD takes no fused=True)
