// RUN: loom-opt %s --loom-lower-to-rt -verify-diagnostics -split-input-file

// The runtime receives into a buffer of the receive's type; a send of
// another type would be read as garbage, so the lowering refuses it.
loom.mesh @pp shape [2] axes ["pp"]
func.func @stage0(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.batch_index = 0 : i64}) attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  // expected-error @below {{'loom.send_start' op in @stage0 sends 'tensor<4xf32>' (tag 0) but its 'loom.recv_start' in @stage1 expects 'tensor<4xbf16>'}}
  %s = loom.send_start %x on @pp axes ["pp"] peer 1 tag 0 : tensor<4xf32> -> !loom.future<none>
  loom.wait %s : !loom.future<none>
  return
}
func.func @stage1() attributes {loom.step, loom.program_ranks = array<i64: 1>} {
  // expected-note @below {{the receive}}
  %r = loom.recv_start on @pp axes ["pp"] peer 0 tag 0 : !loom.future<tensor<4xbf16>>
  %h = loom.wait %r : !loom.future<tensor<4xbf16>> -> tensor<4xbf16>
  return
}

// -----

// A send nobody receives.
loom.mesh @pp shape [2] axes ["pp"]
func.func @stage0(%x: tensor<4xf32> {loom.name = "x", loom.role = #loom.role<input>, loom.batch_index = 0 : i64}) attributes {loom.step, loom.program_ranks = array<i64: 0>} {
  // expected-error @below {{'loom.send_start' op in @stage0 has no matching 'loom.recv_start' (tag 3) in @stage1, which runs rank 1}}
  %s = loom.send_start %x on @pp axes ["pp"] peer 1 tag 3 : tensor<4xf32> -> !loom.future<none>
  loom.wait %s : !loom.future<none>
  return
}
func.func @stage1() attributes {loom.step, loom.program_ranks = array<i64: 1>} {
  return
}
