// RUN: loom-opt %s --split-input-file --verify-diagnostics --loom-simulate="device=%S/Inputs/pipe-device.json" -o /dev/null

// A cycle of waits: each rank waits for the other's send before it sends.
// The joint replay stops and names both programs instead of hanging.
loom.mesh @pp shape [2] axes ["pp"]
func.func @stage0(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4xf32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  %r = loom.recv_start on @pp axes ["pp"] peer 1 tag 1 : !loom.future<tensor<4xf32>>
  // expected-error@+1 {{deadlock in the pipelined step: @stage0 waits here for its 'loom.recv_start' (tag 1) whose 'loom.send_start' in @stage1 is never reached; blocked programs: @stage0, @stage1}}
  %g = loom.wait %r : !loom.future<tensor<4xf32>> -> tensor<4xf32>
  %s = loom.send_start %x on @pp axes ["pp"] peer 1 tag 0 : tensor<4xf32> -> !loom.future<none>
  loom.wait %s : !loom.future<none>
  return %g : tensor<4xf32>
}
func.func @stage1(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4xf32> {loom.role = #loom.role<output>})
    attributes {loom.step, loom.program_ranks = array<i64: 1>} {
  %r = loom.recv_start on @pp axes ["pp"] peer 0 tag 0 : !loom.future<tensor<4xf32>>
  // expected-note@+1 {{@stage1 is blocked here, waiting for 'loom.send_start' in @stage0}}
  %g = loom.wait %r : !loom.future<tensor<4xf32>> -> tensor<4xf32>
  // expected-note@+1 {{the matching 'loom.send_start' in @stage1}}
  %s = loom.send_start %x on @pp axes ["pp"] peer 0 tag 1 : tensor<4xf32> -> !loom.future<none>
  loom.wait %s : !loom.future<none>
  return %g : tensor<4xf32>
}

// -----

// A recv whose send never comes.
loom.mesh @pp shape [2] axes ["pp"]
func.func @stage0(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4xf32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  return %x : tensor<4xf32>
}
func.func @stage1(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4xf32> {loom.role = #loom.role<output>})
    attributes {loom.step, loom.program_ranks = array<i64: 1>} {
  // expected-error@+1 {{'loom.recv_start' op in @stage1 has no matching 'loom.send_start' (tag 5) in @stage0, which runs rank 0}}
  %r = loom.recv_start on @pp axes ["pp"] peer 0 tag 5 : !loom.future<tensor<4xf32>>
  %g = loom.wait %r : !loom.future<tensor<4xf32>> -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// A send no recv takes.
loom.mesh @pp shape [2] axes ["pp"]
func.func @stage0(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4xf32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  // expected-error@+1 {{'loom.send_start' op in @stage0 has no matching 'loom.recv_start' (tag 0) in @stage1, which runs rank 1}}
  %s = loom.send_start %x on @pp axes ["pp"] peer 1 tag 0 : tensor<4xf32> -> !loom.future<none>
  loom.wait %s : !loom.future<none>
  return %x : tensor<4xf32>
}
func.func @stage1(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4xf32> {loom.role = #loom.role<output>})
    attributes {loom.step, loom.program_ranks = array<i64: 1>} {
  return %x : tensor<4xf32>
}

// -----

// A peer rank that no program runs.
loom.mesh @pp shape [3] axes ["pp"]
func.func @stage0(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4xf32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  // expected-error@+1 {{'loom.send_start' op peer 2 is rank 2, which no program of the step runs}}
  %s = loom.send_start %x on @pp axes ["pp"] peer 2 tag 0 : tensor<4xf32> -> !loom.future<none>
  loom.wait %s : !loom.future<none>
  return %x : tensor<4xf32>
}
func.func @stage1(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4xf32> {loom.role = #loom.role<output>})
    attributes {loom.step, loom.program_ranks = array<i64: 1>} {
  return %x : tensor<4xf32>
}

// -----

// A step without program ranks beside pipelined ones.
loom.mesh @pp shape [2] axes ["pp"]
func.func @stage0(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4xf32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  return %x : tensor<4xf32>
}
// expected-error@+1 {{a pipelined module's steps all need 'loom.program_ranks', as @stage0 has}}
func.func @other(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4xf32> {loom.role = #loom.role<loss>})
    attributes {loom.step} {
  return %x : tensor<4xf32>
}

// -----

// Two transfers between the same ranks under one tag: which recv takes
// which send would be ambiguous.
loom.mesh @pp shape [2] axes ["pp"]
func.func @stage0(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4xf32> {loom.role = #loom.role<loss>})
    attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  // expected-note@+1 {{first used here}}
  %s = loom.send_start %x on @pp axes ["pp"] peer 1 tag 0 : tensor<4xf32> -> !loom.future<none>
  // expected-error@+1 {{'loom.send_start' op repeats tag 0 between ranks 0 and 1; a tag names one transfer per pair}}
  %t = loom.send_start %x on @pp axes ["pp"] peer 1 tag 0 : tensor<4xf32> -> !loom.future<none>
  loom.wait %s : !loom.future<none>
  loom.wait %t : !loom.future<none>
  return %x : tensor<4xf32>
}
func.func @stage1(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>})
    -> (tensor<4xf32> {loom.role = #loom.role<output>})
    attributes {loom.step, loom.program_ranks = array<i64: 1>} {
  return %x : tensor<4xf32>
}
