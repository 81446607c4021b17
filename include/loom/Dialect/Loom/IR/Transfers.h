//===- Transfers.h - The transfers of a pipelined step ----------*- C++ -*-===//
//
// A pipelined (MPMD) step is one program per pipeline rank (a `loom.step`
// with `loom.program_ranks`); its `loom.send_start` and `loom.recv_start`
// ops pair up across programs by (sender rank, receiver rank, tag). The
// simulator replays the pairs and the lowering checks them; both get them
// from matchTransfers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DIALECT_LOOM_IR_TRANSFERS_H
#define LOOM_DIALECT_LOOM_IR_TRANSFERS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

namespace loom {

/// One end of a transfer: the program that posts it and the other end.
struct TransferEnd {
  unsigned program = 0;
  mlir::Operation *match = nullptr;
  unsigned matchProgram = 0;
  int64_t peerRank = 0;
};

/// Pairs every send of `programs` with its receive. A program stands for
/// all its ranks (they run the same ops), so its first rank resolves its
/// peers. Fails with a located error on a program without
/// `loom.program_ranks`, a rank two programs run, a peer outside its group
/// or that no program runs, a tag repeated between two ranks, an end
/// without its other end, and a send whose tensor type is not the type its
/// receive expects (the runtime would read the bytes as another tensor).
mlir::FailureOr<llvm::DenseMap<mlir::Operation *, TransferEnd>>
matchTransfers(llvm::ArrayRef<mlir::func::FuncOp> programs);

} // namespace loom

#endif // LOOM_DIALECT_LOOM_IR_TRANSFERS_H
