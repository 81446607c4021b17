//===- loom-opt.cpp - The Loom optimizer driver ---------------------------===//

#include "loom/InitAll.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  loom::registerAllPasses();
  mlir::DialectRegistry registry;
  loom::registerAllDialects(registry);
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Loom optimizer driver\n", registry));
}
