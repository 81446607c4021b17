//===- Device.cpp - The CPU backend and the choice of device --------------===//
//
// CpuDevice is the CPU runtime as it was before the device layer: Gloo
// process groups, collectives running on Gloo's threads while the session's
// thread goes on (so every "stream" is that thread and events are
// implicit), memory from the allocator reports MemoryTracker counts. The
// CUDA backend lives in libloomrt_cuda.so, opened here on first use.
//
//===----------------------------------------------------------------------===//

#include "Device.h"
#include "MemoryTracker.h"

#include "loomrt/Error.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <dlfcn.h>

#include <mutex>

namespace loomrt {

const char *toString(StreamKind stream) {
  switch (stream) {
  case StreamKind::Compute:
    return "compute";
  case StreamKind::AllGather:
    return "all_gather";
  case StreamKind::ReduceScatter:
    return "reduce_scatter";
  case StreamKind::AllReduce:
    return "all_reduce";
  case StreamKind::Broadcast:
    return "broadcast";
  case StreamKind::AllSlice:
    return "all_slice";
  case StreamKind::PointToPoint:
    return "send_recv";
  }
  return "?";
}

StreamKind streamFor(OpKind op) {
  switch (op) {
  case OpKind::AllGatherStart:
    return StreamKind::AllGather;
  case OpKind::ReduceScatterStart:
    return StreamKind::ReduceScatter;
  case OpKind::AllReduceStart:
    return StreamKind::AllReduce;
  case OpKind::BroadcastStart:
    return StreamKind::Broadcast;
  case OpKind::AllSliceStart:
    return StreamKind::AllSlice;
  case OpKind::SendStart:
  case OpKind::RecvStart:
    return StreamKind::PointToPoint;
  default:
    return StreamKind::Compute;
  }
}

DeviceEvent::~DeviceEvent() = default;
Device::~Device() = default;

namespace {

class CpuDevice final : public Device {
public:
  explicit CpuDevice(std::shared_ptr<MemoryTracker> tracker)
      : Device(DeviceKind::Cpu, c10::Device(c10::DeviceType::CPU)),
        tracker_(std::move(tracker)) {}

  c10::intrusive_ptr<c10d::Backend>
  createProcessGroup(const c10::intrusive_ptr<c10d::Store> &store,
                     int64_t index, int64_t size,
                     std::chrono::milliseconds timeout) override {
    // One loopback device for every group: the ranks of a loom-run share
    // this machine.
    if (!glooDevice_)
      glooDevice_ =
          ::c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
    auto opts = ::c10d::ProcessGroupGloo::Options::create(timeout);
    opts->devices.push_back(glooDevice_);
    return c10::make_intrusive<::c10d::ProcessGroupGloo>(store, int(index),
                                                         int(size), opts);
  }

  // Gloo runs a collective on its own thread as soon as it is issued and
  // wait() blocks this thread until it is done: program order on one host
  // thread already is every edge an event would add.
  void beginCollective(StreamKind) override {}
  std::shared_ptr<DeviceEvent> endCollective(StreamKind) override {
    return nullptr;
  }
  void waitCollective(StreamKind, const DeviceEvent *) override {}

  void waitWork(c10d::Work &work, std::chrono::milliseconds) override {
    // The group's own timeout (its Options) bounds Gloo's wait.
    work.wait();
  }
  bool workerReleasesLate() const override { return true; }
  bool gathersInPlace() const override { return false; }

  // The CPU allocator has no streams to record: a block freed here is free.
  void release(const at::Tensor &, StreamSet) override {}

  void beginStep(int64_t liveBytes) override { tracker_->reset(liveBytes); }
  DeviceMemory memory() override {
    return {tracker_->current(), tracker_->peak(), tracker_->allocations()};
  }

private:
  std::shared_ptr<MemoryTracker> tracker_;
  std::shared_ptr<::gloo::transport::Device> glooDevice_;
};

std::function<std::unique_ptr<Device>(const DeviceOptions &)> &
testingFactory() {
  static std::function<std::unique_ptr<Device>(const DeviceOptions &)> f;
  return f;
}

/// libloomrt_cuda.so next to this library, opened once; null with the
/// reason in `error` when it cannot be.
CreateCudaDeviceFn openCudaBackend(std::string &error) {
  static std::once_flag once;
  static CreateCudaDeviceFn create = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    Dl_info self{};
    std::string dir;
    if (::dladdr(reinterpret_cast<void *>(&openCudaBackend), &self) &&
        self.dli_fname) {
      dir = self.dli_fname;
      dir = dir.substr(0, dir.find_last_of('/') + 1);
    }
    std::string path = dir + "libloomrt_cuda.so";
    // Never closed: the device's code must outlive every session.
    void *handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = ::dlerror();
      failure = "cannot load the CUDA backend " + path + " (" +
                (why ? why : "unknown error") +
                "); this runtime was built against a LibTorch without "
                "CUDA, or the library was removed";
      return;
    }
    create = reinterpret_cast<CreateCudaDeviceFn>(
        ::dlsym(handle, kCreateCudaDeviceSymbol));
    if (!create)
      failure = path + " has no " + kCreateCudaDeviceSymbol;
  });
  error = failure;
  return create;
}

} // namespace

std::unique_ptr<Device> makeCpuDevice(std::shared_ptr<MemoryTracker> tracker) {
  return std::make_unique<CpuDevice>(std::move(tracker));
}

void setDeviceFactoryForTesting(
    std::function<std::unique_ptr<Device>(const DeviceOptions &)> factory) {
  testingFactory() = std::move(factory);
}

std::unique_ptr<Device> makeDevice(const DeviceOptions &options) {
  if (testingFactory())
    return testingFactory()(options);
  if (options.kind == DeviceKind::Cpu)
    return makeCpuDevice(options.tracker);
  std::string error;
  CreateCudaDeviceFn create = openCudaBackend(error);
  if (!create)
    throw Error("device cuda: " + error);
  Device *device = create(&options, &error);
  if (!device)
    throw Error("device cuda: " + error);
  return std::unique_ptr<Device>(device);
}

} // namespace loomrt
