//===- KernelWorkspaceTest.cpp - Measuring and storing kernel workspace ---===//

#include "TestUtil.h"

#include "KernelWorkspace.h"

using namespace loomrt;
using namespace loomrt::test;

namespace {

TEST(KernelWorkspace, SessionMeasuresEveryKernelSignature) {
  Session s = Session::load(writeArtifact(
      "linear.loomx", linearProgram(sgdOptimizer()), linearWeights()));
  EXPECT_TRUE(s.kernelWorkspace().empty());
  s.setMeasuringKernels(true);
  s.step(linearBatch(0));
  const std::map<std::string, int64_t> &w = s.kernelWorkspace();
  // The tensor inputs and results, sorted, as the compiler's
  // getKernelSignature spells them; Scalars and ints are not in it.
  ASSERT_EQ(w.count("aten::addmm.default(f32[3],f32[5,6],f32[6,3])->(f32[5,3])"),
            1u);
  ASSERT_EQ(w.count("aten::add.Scalar(i64[])->(i64[])"), 1u);
  ASSERT_EQ(w.count("aten::sum.dim_IntList(f32[5,3])->(f32[3])"), 1u);
  // Nine aten instructions, all distinct signatures; f32 matmuls and the
  // elementwise kernels allocate nothing beyond their results.
  EXPECT_EQ(w.size(), 9u);
  EXPECT_EQ(w.at("aten::addmm.default(f32[3],f32[5,6],f32[6,3])->(f32[5,3])"),
            0);
  for (const auto &[signature, bytes] : w)
    EXPECT_GE(bytes, 0) << signature;
  // Off: nothing more is recorded.
  s.setMeasuringKernels(false);
  std::map<std::string, int64_t> before = w;
  s.step(linearBatch(1));
  EXPECT_EQ(s.kernelWorkspace(), before);
}

TEST(KernelWorkspace, WritesReadsAndMergesTheMost) {
  KernelWorkspace a;
  a.device = "cpu";
  a.threads = 2;
  a.add("k1", 10);
  a.add("k1", 4);
  a.add("k2", 0);
  std::string pa = tempPath("ws-a.json");
  a.write(pa);
  KernelWorkspace b;
  b.device = "cpu";
  b.threads = 1;
  b.add("k1", 7);
  b.add("k3", 5);
  std::string pb = tempPath("ws-b.json");
  b.write(pb);
  std::string merged = tempPath("ws.json");
  mergeKernelWorkspaces({pa, pb}, merged);
  KernelWorkspace m = KernelWorkspace::read(merged);
  EXPECT_EQ(m.device, "cpu");
  EXPECT_EQ(m.bytes, (std::map<std::string, int64_t>{
                         {"k1", 10}, {"k2", 0}, {"k3", 5}}));
}

TEST(KernelWorkspace, MalformedProfilesAreRefused) {
  auto readError = [](const std::string &text) {
    std::string path = writeFile("ws-bad.json", text);
    return errorOf([&] { KernelWorkspace::read(path); });
  };
  EXPECT_TRUE(contains(readError("{"), "ws-bad.json: "));
  EXPECT_TRUE(contains(readError(R"({"format": "loomx", "kernels": {}})"),
                       "not a kernel workspace profile"));
  EXPECT_TRUE(contains(
      readError(R"({"format": "loom-kernel-workspace", "kernels": []})"),
      "\"kernels\" must be an object"));
  EXPECT_TRUE(contains(
      readError(
          R"({"format": "loom-kernel-workspace", "kernels": {"k": -1}})"),
      "kernels[\"k\"] must be a non-negative integer"));
}

} // namespace
