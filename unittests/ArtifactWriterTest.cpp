//===- ArtifactWriterTest.cpp - The .loomx container and weights section --===//

#include "loom/Target/Artifact/ArtifactWriter.h"
#include "SafetensorsFile.h"
#include "loom/InitAll.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace loom;
using loom::test::safetensorsFile;

namespace {
uint64_t readLE(StringRef bytes, size_t offset, int size) {
  uint64_t value = 0;
  for (int i = 0; i < size; ++i)
    value |= uint64_t(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return value;
}

class ArtifactWriterTest : public ::testing::Test {
protected:
  ArtifactWriterTest() {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    EXPECT_FALSE(
        llvm::sys::fs::createUniqueDirectory("loom-artifact-test", dir));
  }
  ~ArtifactWriterTest() override { llvm::sys::fs::remove_directories(dir); }

  void writeFile(StringRef name, StringRef bytes) {
    SmallString<256> path(dir);
    llvm::sys::path::append(path, name);
    std::error_code ec;
    llvm::raw_fd_ostream os(path, ec);
    ASSERT_FALSE(ec);
    os << bytes;
  }

  MLIRContext context;
  SmallString<256> dir;
};

// A program with slots assigned that binds one parameter and one input.
constexpr const char *kProgram = R"mlir(
module attributes {loom.weights = "w.safetensors"} {
  loomrt.program "step" rank 0 world_size 1 streams ["compute"] slots 3 {
    %w = loomrt.input "w" role <parameter> slot 0 : tensor<2xf32>
    %x = loomrt.input "x" role <input> batch_index 0 slot 1 : tensor<2xf32>
    %s2 = loomrt.aten "aten::dot.default"(%w, %x) stream 0 slots [2] {args = [#loom.arg<0>, #loom.arg<1>]} : (tensor<2xf32>, tensor<2xf32>) -> tensor<f32>
    loomrt.free %x stream 0 : tensor<2xf32>
    loomrt.output %s2 role <loss> : tensor<f32>
    loomrt.return
  }
}
)mlir";

TEST_F(ArtifactWriterTest, ContainerHoldsProgramAndBoundWeightsOnly) {
  // The importer's file also holds a tensor the step does not bind (e.g. the
  // second name of a tied weight); the artifact drops it.
  std::string wBytes("\x00\x00\x80\x3f\x00\x00\x00\x40", 8); // 1.0f, 2.0f
  writeFile("w.safetensors",
            safetensorsFile({{"alias", "F32", {2}, std::string(8, '\x7f')},
                             {"w", "F32", {2}, wBytes}}));
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(kProgram, &context);
  ASSERT_TRUE(module);
  ArtifactOptions options;
  options.source = "step.mlir";
  options.pipeline = "builtin.module()";
  options.weightsDir = std::string(dir);

  std::string artifact;
  llvm::raw_string_ostream os(artifact);
  ASSERT_TRUE(succeeded(writeArtifact(*module, options, os)));

  ASSERT_GE(artifact.size(), 32u);
  EXPECT_EQ(StringRef(artifact).take_front(8), StringRef("LOOMX\r\n\x1a", 8));
  EXPECT_EQ(readLE(artifact, 8, 4), 8u);  // the schema's current version
  EXPECT_EQ(readLE(artifact, 12, 4), 0u); // flags
  uint64_t n = readLE(artifact, 16, 8), m = readLE(artifact, 24, 8);
  EXPECT_EQ(32 + n + m, artifact.size());

  // The program section is exactly what buildProgramJSON gives.
  FailureOr<std::string> program = buildProgramJSON(*module, options);
  ASSERT_TRUE(succeeded(program));
  EXPECT_EQ(StringRef(artifact).substr(32, n), *program);
  llvm::Expected<llvm::json::Value> json = llvm::json::parse(*program);
  ASSERT_TRUE(bool(json));
  const llvm::json::Object *root = json->getAsObject();
  EXPECT_EQ(root->getInteger("num_slots"), 3);
  EXPECT_EQ(root->getString("source"), "step.mlir");

  // The weights section is a safetensors file with `w` alone, same bytes.
  StringRef weights = StringRef(artifact).substr(32 + n, m);
  uint64_t headerSize = readLE(weights, 0, 8);
  EXPECT_EQ(headerSize % 8, 0u);
  llvm::Expected<llvm::json::Value> header =
      llvm::json::parse(weights.substr(8, headerSize).rtrim(' '));
  ASSERT_TRUE(bool(header));
  const llvm::json::Object *entries = header->getAsObject();
  EXPECT_FALSE(entries->get("alias"));
  const llvm::json::Object *w = entries->getObject("w");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->getString("dtype"), "F32");
  EXPECT_EQ(weights.drop_front(8 + headerSize), wBytes);
}

TEST_F(ArtifactWriterTest, RefusesWeightsOfTheWrongDtype) {
  writeFile("w.safetensors",
            safetensorsFile({{"w", "F64", {2}, std::string(16, '\0')}}));
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(kProgram, &context);
  ASSERT_TRUE(module);
  ArtifactOptions options;
  options.weightsDir = std::string(dir);
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    message = d.str();
    return success();
  });
  std::string artifact;
  llvm::raw_string_ostream os(artifact);
  EXPECT_TRUE(failed(writeArtifact(*module, options, os)));
  EXPECT_TRUE(artifact.empty());
  EXPECT_NE(message.find("'w' is F32[2] in the step but F64[2] in the weights"),
            std::string::npos)
      << message;
}
} // namespace
