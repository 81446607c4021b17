//===- KernelWorkspace.cpp - The measured kernel workspace profile --------===//

#include "KernelWorkspace.h"

#include "FileUtil.h"
#include "Json.h"
#include "loomrt/ArtifactSchema.h"
#include "loomrt/Error.h"

#include <algorithm>

namespace loomrt {

namespace {
constexpr const char kFormatName[] = "loom-kernel-workspace";
} // namespace

void KernelWorkspace::add(const std::string &signature,
                          int64_t workspaceBytes) {
  auto [it, inserted] = bytes.try_emplace(signature, workspaceBytes);
  if (!inserted)
    it->second = std::max(it->second, workspaceBytes);
}

void KernelWorkspace::merge(const KernelWorkspace &other) {
  if (device.empty())
    device = other.device;
  threads = std::max(threads, other.threads);
  for (const auto &[signature, b] : other.bytes)
    add(signature, b);
}

void KernelWorkspace::write(const std::string &path) const {
  nlohmann::json j;
  j[schema::kKernelWorkspaceFormat] = kFormatName;
  j[schema::kKernelWorkspaceDevice] = device;
  j[schema::kKernelWorkspaceThreads] = threads;
  nlohmann::json kernels = nlohmann::json::object();
  for (const auto &[signature, b] : bytes)
    kernels[signature] = b;
  j[schema::kKernelWorkspaceKernels] = std::move(kernels);
  std::string text = j.dump(1) + "\n";
  AtomicFileWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
}

KernelWorkspace KernelWorkspace::read(const std::string &path) {
  nlohmann::json j = parseUntrustedJson(readFile(path), path + ": ");
  auto fail = [&](const std::string &what) -> Error {
    return Error(path + ": " + what);
  };
  if (!j.is_object() || !j.contains(schema::kKernelWorkspaceFormat) ||
      j[schema::kKernelWorkspaceFormat] != kFormatName)
    throw fail(std::string("not a kernel workspace profile (\"") +
               schema::kKernelWorkspaceFormat + "\" is not \"" + kFormatName +
               "\")");
  KernelWorkspace w;
  const nlohmann::json &device = j.value(schema::kKernelWorkspaceDevice,
                                         nlohmann::json(""));
  const nlohmann::json &threads =
      j.value(schema::kKernelWorkspaceThreads, nlohmann::json(0));
  if (!device.is_string() || !threads.is_number_integer())
    throw fail(std::string("\"") + schema::kKernelWorkspaceDevice +
               "\" must be a string and \"" + schema::kKernelWorkspaceThreads +
               "\" an integer");
  w.device = device.get<std::string>();
  w.threads = threads.get<int64_t>();
  auto kernels = j.find(schema::kKernelWorkspaceKernels);
  if (kernels == j.end() || !kernels->is_object())
    throw fail(std::string("\"") + schema::kKernelWorkspaceKernels +
               "\" must be an object of kernel signatures");
  for (const auto &[signature, b] : kernels->items()) {
    if (!b.is_number_integer() || b.get<int64_t>() < 0)
      throw fail(std::string(schema::kKernelWorkspaceKernels) + "[\"" +
                 signature + "\"] must be a non-negative integer");
    w.add(signature, b.get<int64_t>());
  }
  return w;
}

void mergeKernelWorkspaces(const std::vector<std::string> &parts,
                           const std::string &path) {
  KernelWorkspace merged;
  for (const std::string &part : parts)
    merged.merge(KernelWorkspace::read(part));
  merged.write(path);
}

} // namespace loomrt
