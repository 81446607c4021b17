//===- Pt2Archive.h - Read entries of a .pt2 zip archive ------------------===//

#ifndef LOOM_LIB_IMPORT_PT2ARCHIVE_H
#define LOOM_LIB_IMPORT_PT2ARCHIVE_H

#include "loom/Import/Pt2Importer.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <memory>
#include <string>
#include <vector>

struct zip; // libzip's archive handle

namespace loom {

/// A read-only view of a zip archive (through libzip). Every failure comes
/// back as an llvm::Error whose message names the entry involved.
class Pt2Archive {
public:
  static llvm::Expected<std::unique_ptr<Pt2Archive>>
  openFile(llvm::StringRef path);
  static llvm::Expected<std::unique_ptr<Pt2Archive>>
  openBuffer(llvm::StringRef bytes);
  /// An archive made of the given (name, contents) entries, without zip
  /// encoding: lets the fuzzer feed graph JSON straight to the importer.
  static std::unique_ptr<Pt2Archive>
  fromEntries(std::vector<std::pair<std::string, std::string>> entries);
  ~Pt2Archive();

  const std::vector<std::string> &entries() const { return names; }
  bool contains(llvm::StringRef name) const;
  /// The whole, decompressed and CRC-checked contents of `name`.
  llvm::Expected<std::string> read(llvm::StringRef name) const;

private:
  Pt2Archive() = default;
  llvm::Error loadNames();

  ::zip *archive = nullptr;
  std::string bufferCopy;
  std::vector<std::string> contents; // for fromEntries, parallel to names
  std::vector<std::string> names;
};

/// Imports an opened archive (see importPt2); `name` names it in
/// diagnostics.
mlir::OwningOpRef<mlir::ModuleOp> importArchive(Pt2Archive &archive,
                                                llvm::StringRef name,
                                                mlir::MLIRContext *context,
                                                const ImportOptions &options);

} // namespace loom

#endif // LOOM_LIB_IMPORT_PT2ARCHIVE_H
