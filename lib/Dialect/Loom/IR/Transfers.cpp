//===- Transfers.cpp - Matching the sends and receives of a pipelined step ===//

#include "loom/Dialect/Loom/IR/Transfers.h"

#include "loom/Dialect/Loom/IR/LoomDialect.h"
#include "loom/Dialect/Loom/IR/LoomOps.h"

#include "mlir/IR/SymbolTable.h"

#include <map>
#include <tuple>

using namespace mlir;
using namespace loom;

static std::string programName(func::FuncOp f) {
  return ("@" + f.getSymName()).str();
}

/// Which program runs each global rank.
static FailureOr<DenseMap<int64_t, unsigned>>
mapRanks(ArrayRef<func::FuncOp> programs) {
  DenseMap<int64_t, unsigned> programOfRank;
  for (unsigned i = 0, e = programs.size(); i < e; ++i) {
    func::FuncOp f = programs[i];
    auto ranks =
        f->getAttrOfType<DenseI64ArrayAttr>(LoomDialect::kProgramRanksAttrName);
    if (!ranks || ranks.empty())
      return f.emitError("a pipelined step's programs each need '")
             << LoomDialect::kProgramRanksAttrName << "'";
    for (int64_t r : ranks.asArrayRef())
      if (!programOfRank.try_emplace(r, i).second)
        return f.emitError("rank ")
               << r << " also runs " << programName(programs[programOfRank[r]])
               << "; each rank runs one program";
  }
  return programOfRank;
}

static Type transferType(Operation *op) {
  if (auto send = dyn_cast<SendStartOp>(op))
    return send.getInput().getType();
  return cast<FutureType>(cast<RecvStartOp>(op).getFuture().getType())
      .getValueType();
}

FailureOr<DenseMap<Operation *, TransferEnd>>
loom::matchTransfers(ArrayRef<func::FuncOp> programs) {
  FailureOr<DenseMap<int64_t, unsigned>> programOfRank = mapRanks(programs);
  if (failed(programOfRank))
    return failure();

  // Every end by (sender rank, receiver rank, tag).
  SymbolTableCollection symbols;
  using Key = std::tuple<int64_t, int64_t, int64_t>;
  std::map<Key, std::pair<Operation *, unsigned>> sends, recvs;
  DenseMap<Operation *, TransferEnd> ends;
  for (unsigned i = 0, e = programs.size(); i < e; ++i) {
    func::FuncOp f = programs[i];
    int64_t own =
        f->getAttrOfType<DenseI64ArrayAttr>(LoomDialect::kProgramRanksAttrName)
            .asArrayRef()
            .front();
    for (Operation &op : f.getBody().front()) {
      auto send = dyn_cast<SendStartOp>(op);
      auto recv = dyn_cast<RecvStartOp>(op);
      if (!send && !recv)
        continue;
      auto meshRef = op.getAttrOfType<FlatSymbolRefAttr>("mesh");
      auto axes = op.getAttrOfType<ArrayAttr>("axes");
      MeshOp mesh = symbols.lookupNearestSymbolFrom<MeshOp>(&op, meshRef);
      if (!mesh || !axes)
        return op.emitOpError("names no mesh that resolves");
      int64_t peer =
          static_cast<int64_t>(send ? send.getPeer() : recv.getPeer());
      int64_t tag = static_cast<int64_t>(send ? send.getTag() : recv.getTag());
      SmallVector<int64_t> group = mesh.getGroup(axes, own);
      if (peer < 0 || peer >= static_cast<int64_t>(group.size()))
        return op.emitOpError("peer ")
               << peer << " is not an index in rank " << own << "'s group of "
               << group.size() << " ranks";
      int64_t peerRank = group[peer];
      if (!programOfRank->count(peerRank))
        return op.emitOpError("peer ") << peer << " is rank " << peerRank
                                       << ", which no program of the step runs";
      ends[&op] = {i, nullptr, programOfRank->lookup(peerRank), peerRank};
      Key key = send ? Key{own, peerRank, tag} : Key{peerRank, own, tag};
      auto &table = send ? sends : recvs;
      auto [it, inserted] = table.try_emplace(key, &op, i);
      if (!inserted) {
        InFlightDiagnostic diag =
            op.emitOpError("repeats tag ")
            << tag << " between ranks " << std::get<0>(key) << " and "
            << std::get<1>(key) << "; a tag names one transfer per pair";
        diag.attachNote(it->second.first->getLoc()) << "first used here";
        return diag;
      }
    }
  }

  auto unmatched = [&](Operation *op, unsigned program, StringRef missing) {
    const TransferEnd &e = ends[op];
    return op->emitOpError("in ")
           << programName(programs[program]) << " has no matching '" << missing
           << "' (tag " << op->getAttrOfType<IntegerAttr>("tag").getInt()
           << ") in " << programName(programs[e.matchProgram])
           << ", which runs rank " << e.peerRank;
  };
  for (auto &[key, send] : sends) {
    auto it = recvs.find(key);
    if (it == recvs.end())
      return unmatched(send.first, send.second, "loom.recv_start");
    Operation *recv = it->second.first;
    if (transferType(send.first) != transferType(recv)) {
      InFlightDiagnostic diag = send.first->emitOpError("in ")
                                << programName(programs[send.second])
                                << " sends " << transferType(send.first)
                                << " (tag " << std::get<2>(key)
                                << ") but its 'loom.recv_start' in "
                                << programName(programs[it->second.second])
                                << " expects " << transferType(recv);
      diag.attachNote(recv->getLoc()) << "the receive";
      return diag;
    }
    ends[send.first].match = recv;
    ends[recv].match = send.first;
  }
  for (auto &[key, recv] : recvs)
    if (!sends.count(key))
      return unmatched(recv.first, recv.second, "loom.send_start");
  return ends;
}
