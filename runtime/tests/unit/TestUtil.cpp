//===- TestUtil.cpp - Hand-built artifacts for the runtime's tests --------===//

#include "TestUtil.h"

#include "loomrt/ArtifactSchema.h"

#include "loomrt/Safetensors.h"

#include <ATen/Context.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/zeros.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace loomrt::test {

namespace {

/// This process's folder under the test temporary directory, removed with
/// everything in it when the process exits (by the process that made it,
/// should a test ever fork).
class TempFolder {
public:
  TempFolder()
      : owner(::getpid()),
        path(::testing::TempDir() + "loomrt-" + std::to_string(owner)) {
    std::filesystem::create_directories(path);
  }
  ~TempFolder() {
    std::error_code ignored;
    if (::getpid() == owner)
      std::filesystem::remove_all(path, ignored);
  }
  const pid_t owner;
  const std::string path;
};

} // namespace

std::string tempPath(const std::string &name) {
  static TempFolder folder;
  static std::atomic<int> counter{0};
  return folder.path + "/" + std::to_string(counter++) + "-" + name;
}

std::string writeFile(const std::string &name, const std::string &bytes) {
  std::string path = tempPath(name);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  return path;
}

static std::string readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string safetensorsBytes(const NamedTensors &tensors) {
  std::string path = tempPath("weights.safetensors");
  writeSafetensors(path, tensors);
  return readAll(path);
}

std::string ArtifactBytes::build(const std::string &program,
                                 const std::string &weights) const {
  std::string out = magic;
  auto put = [&](const void *p, size_t n) {
    out.append(static_cast<const char *>(p), n);
  };
  uint64_t n = program.size(), m = weights.size();
  put(&version, 4);
  put(&flags, 4);
  put(&n, 8);
  put(&m, 8);
  return out + program + weights;
}

std::string writeArtifact(const std::string &name, const json &program,
                          const NamedTensors &weights) {
  // The container's version follows the program's (one the runtime reads).
  ArtifactBytes b;
  if (program.is_object() && program.contains("version") &&
      program["version"].is_number_integer()) {
    int64_t v = program["version"].get<int64_t>();
    if (v >= kArtifactOldestVersion && v <= kArtifactVersion)
      b.version = uint32_t(v);
  }
  return writeFile(name, b.build(program.dump(), safetensorsBytes(weights)));
}

json sgdOptimizer(double momentum) {
  return {{"name", "sgd"},    {"lr", 0.05},           {"betas", {0.9, 0.999}},
          {"eps", 1e-8},      {"weight_decay", 0.01}, {"momentum", momentum},
          {"dampening", 0.0}, {"nesterov", false},    {"maximize", false}};
}

json linearProgram(const json &optimizer) {
  auto T = [](int s) { return json{{"tensor", s}}; };
  auto input = [](const char *name, const char *role, int slot,
                  const char *dtype, std::vector<int64_t> shape) {
    return json{{"name", name},
                {"role", role},
                {"slot", slot},
                {"dtype", dtype},
                {"shape", shape}};
  };
  json inputs = json::array({input("fc.weight", "parameter", 0, "f32", {3, 6}),
                             input("fc.bias", "parameter", 1, "f32", {3}),
                             input("calls", "buffer", 2, "i64", {})});
  json x = input("x", "input", 3, "f32", {5, 6});
  x["batch_index"] = 0;
  json target = input("target", "input", 4, "f32", {5, 3});
  target["batch_index"] = 1;
  inputs.push_back(x);
  inputs.push_back(target);

  auto aten = [](const char *name, const char *kernel, const char *overload,
                 json args, json results) {
    return json{{"op", "aten"}, {"kernel", kernel},   {"overload", overload},
                {"args", args}, {"results", results}, {"name", name},
                {"stream", 0},  {"phase", "forward"}};
  };
  json insts = json::array({
      aten("t", "aten::t", "default", {T(0)}, {5}),
      aten("addmm", "aten::addmm", "default", {T(1), T(3), T(5)}, {6}),
      aten("mse_loss", "aten::mse_loss", "default", {T(6), T(4), {{"int", 1}}},
           {7}),
      aten("add", "aten::add", "Scalar", {T(2), {{"int", 1}}}, {8}),
      aten("ones_like", "aten::ones_like", "default", {T(7)}, {9}),
      aten("mse_loss_backward", "aten::mse_loss_backward", "default",
           {T(9), T(6), T(4), {{"int", 1}}}, {10}),
      aten("t_1", "aten::t", "default", {T(10)}, {11}),
      aten("mm", "aten::mm", "default", {T(11), T(3)}, {12}),
      aten("sum", "aten::sum", "dim_IntList",
           {T(10), {{"ints", {0}}}, {{"bool", false}}}, {13}),
      {{"op", "free"}, {"slots", {5, 6, 9, 10, 11}}},
  });
  json state = json::array();
  int nextSlot = 14;
  // The state each update takes, as the schema declares it.
  int numState = 0;
  if (optimizer.is_object()) {
    auto isSet = [&](const char *key) {
      if (!optimizer.contains(key))
        return false;
      const json &v = optimizer[key];
      return v.is_boolean() ? v.get<bool>() : v.get<double>() != 0;
    };
    std::string name = optimizer["name"];
    schema::forEachOptimizerState(name.c_str(), isSet,
                                  [&](const char *) { ++numState; });
  }
  const char *init = optimizer.is_object() && optimizer["name"] == "adagrad"
                         ? schema::kStateInitInitialAccumulatorValue
                         : schema::kStateInitZeros;
  if (optimizer.is_object()) {
    const char *params[] = {"fc.weight", "fc.bias"};
    std::vector<int64_t> shapes[] = {{3, 6}, {3}};
    for (int p = 0; p < 2; ++p) {
      json slots = json::array();
      for (int k = 0; k < numState; ++k) {
        state.push_back(
            {{"name", std::string(params[p]) + ".s" + std::to_string(k)},
             {"param", params[p]},
             {"slot", nextSlot},
             {"dtype", "f32"},
             {"shape", shapes[p]},
             {"init", init}});
        slots.push_back(nextSlot++);
      }
      insts.push_back({{"op", "optimizer"},
                       {"param", params[p]},
                       {"param_slot", p},
                       {"grad", 12 + p},
                       {"state", slots},
                       {"phase", "optimizer"}});
    }
  }
  return {{"format", "loomx"},
          {"version", 1},
          {"producer", "TestUtil"},
          {"world_size", 1},
          {"num_slots", nextSlot},
          {"optimizer", optimizer},
          {"inputs", inputs},
          {"state", state},
          {"outputs",
           {{{"role", "loss"}, {"slot", 7}},
            {{"role", "buffer_mutation"}, {"target", "calls"}, {"slot", 8}},
            {{"role", "grad"}, {"target", "fc.weight"}, {"slot", 12}},
            {{"role", "grad"}, {"target", "fc.bias"}, {"slot", 13}}}},
          {"programs",
           {{{"rank", 0}, {"streams", {"compute"}}, {"instructions", insts}}}}};
}

NamedTensors linearWeights() {
  at::manual_seed(1);
  return {{"fc.weight", at::randn({3, 6})},
          {"fc.bias", at::randn({3})},
          {"calls", at::zeros({}, at::kLong)}};
}

std::vector<at::Tensor> linearBatch(int seed) {
  at::manual_seed(100 + seed);
  return {at::randn({5, 6}), at::randn({5, 3})};
}

::testing::AssertionResult contains(const std::string &text,
                                    const std::string &part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "expected the text to contain\n  \"" << part
         << "\"\nbut it is\n  \"" << text << "\"";
}

std::string errorOf(const std::function<void()> &fn) {
  try {
    fn();
  } catch (const Error &e) {
    return e.what();
  } catch (const c10::Error &e) {
    ADD_FAILURE() << "threw c10::Error instead of loomrt::Error: "
                  << e.what_without_backtrace();
    return "";
  } catch (const std::exception &e) {
    ADD_FAILURE() << "threw std::exception instead of loomrt::Error: "
                  << e.what();
    return "";
  }
  ADD_FAILURE() << "expected a loomrt::Error, nothing was thrown";
  return "";
}

} // namespace loomrt::test
