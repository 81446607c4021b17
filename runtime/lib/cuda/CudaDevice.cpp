//===- CudaDevice.cpp - The CUDA backend: streams, events, NCCL -----------===//
//
// The Device of a session that runs on a GPU, built into libloomrt_cuda.so
// (libloomrt opens it with dlopen when a session runs on cuda). Host C++
// over ATen, c10 and c10d, with no device code of its own:
//
//   - compute runs on the device's default stream, as PyTorch eager does;
//     each collective kind gets a stream of its own from c10's pool (pool
//     streams do not synchronise with the default stream, so an all-gather
//     overlaps the compute before its wait);
//   - a start records an event on compute and makes its stream wait on it
//     (the start's input is ready), then issues there: ProcessGroupNCCL
//     makes its NCCL stream wait on the current (collective) stream, and
//     the staging the runtime does (copies into the gathered buffer, the
//     reduce-scatter result) runs on that stream too. An event recorded on
//     the collective stream after the call is what the wait makes compute
//     wait on;
//   - the wait then waits for the NCCL work with the session's timeout, on
//     the host: c10d raises when it passes, and the session turns that into
//     the same error, naming the collective, the group and the rank that
//     did not come, as on Gloo;
//   - a wait's result was allocated on its collective's stream and is read
//     on compute: at its release point compute is recorded on its block
//     (CUDACachingAllocator::recordStream), so the block is not handed to
//     the next collective on that stream while compute still reads it;
//   - memory from the caching allocator's statistics: requested bytes, the
//     tensors' own sizes like the CPU's count, peak reset at each step.
//
// This file has been compiled and linked, never run on a GPU (docs/
// runtime.md).
//
//===----------------------------------------------------------------------===//

#include "Device.h"

#include "loomrt/Error.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <cuda_runtime_api.h>

#include <array>
#include <cstdlib>
#include <optional>

namespace loomrt {
namespace {

/// A CUDA event recorded on a collective's stream after it was issued.
class CudaEvent final : public DeviceEvent {
public:
  CudaEvent() {
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
  }
  ~CudaEvent() override {
    // Destroying an event whose record is still pending is allowed: CUDA
    // releases it once it completes.
    cudaEventDestroy(event_);
  }
  CudaEvent(const CudaEvent &) = delete;
  CudaEvent &operator=(const CudaEvent &) = delete;

  void record(const c10::cuda::CUDAStream &stream) {
    C10_CUDA_CHECK(cudaEventRecord(event_, stream.stream()));
  }
  void block(const c10::cuda::CUDAStream &stream) const {
    C10_CUDA_CHECK(cudaStreamWaitEvent(stream.stream(), event_, 0));
  }

private:
  cudaEvent_t event_ = nullptr;
};

constexpr size_t kAggregate =
    static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);

class CudaDevice final : public Device {
public:
  explicit CudaDevice(c10::DeviceIndex index)
      : Device(DeviceKind::Cuda, c10::Device(c10::DeviceType::CUDA, index)),
        index_(index), compute_(c10::cuda::getDefaultCUDAStream(index)) {
    c10::cuda::set_device(index);
  }

  c10::intrusive_ptr<c10d::Backend>
  createProcessGroup(const c10::intrusive_ptr<c10d::Store> &store,
                     int64_t index, int64_t size,
                     std::chrono::milliseconds timeout) override {
    // A timed-out collective must reach the session's wait as an error
    // that names the peer, not end the process from c10d's watchdog thread
    // (its default on NCCL errors); a user's own setting wins.
    ::setenv("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0", /*overwrite=*/0);
    auto opts = c10d::ProcessGroupNCCL::Options::create();
    opts->timeout = timeout;
    return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, int(index),
                                                       int(size), opts);
  }

  void beginCollective(StreamKind stream) override {
    c10::cuda::CUDAStream s = streamOf(stream);
    CudaEvent ready;
    ready.record(compute_);
    ready.block(s);
    c10::cuda::setCurrentCUDAStream(s);
  }

  std::shared_ptr<DeviceEvent> endCollective(StreamKind stream) override {
    auto issued = std::make_shared<CudaEvent>();
    issued->record(streamOf(stream));
    c10::cuda::setCurrentCUDAStream(compute_);
    return issued;
  }

  void waitCollective(StreamKind, const DeviceEvent *event) override {
    if (event)
      static_cast<const CudaEvent *>(event)->block(compute_);
  }

  void waitWork(c10d::Work &work, std::chrono::milliseconds timeout) override {
    // With a timeout, WorkNCCL::wait makes the current stream (compute)
    // wait for the NCCL stream and blocks this thread until the work is
    // done, raising when the timeout passes.
    work.wait(timeout);
  }
  bool workerReleasesLate() const override { return false; }
  bool gathersInPlace() const override { return true; }

  void release(const at::Tensor &value, StreamSet usedOn) override {
    if (!value.is_cuda() || !value.has_storage())
      return;
    for (int k = 0; k < kNumStreamKinds; ++k)
      if (usedOn & streamBit(StreamKind(k)))
        c10::cuda::CUDACachingAllocator::recordStream(
            value.storage().data_ptr(), streamOf(StreamKind(k)));
  }

  void beginStep(int64_t) override {
    // The current device and stream are per thread: a session stepped from
    // another thread than the one that made it runs on its GPU all the same.
    c10::cuda::set_device(index_);
    c10::cuda::setCurrentCUDAStream(compute_);
    // The allocator counts everything this process holds on the device, so
    // the step starts from its own count rather than the session's tensors.
    c10::cuda::CUDACachingAllocator::resetPeakStats(index_);
    allocationsAtStart_ =
        c10::cuda::CUDACachingAllocator::getDeviceStats(index_)
            .allocation[kAggregate]
            .allocated;
  }

  DeviceMemory memory() override {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(index_);
    const auto &bytes = stats.requested_bytes[kAggregate];
    return {bytes.current, bytes.peak,
            stats.allocation[kAggregate].allocated - allocationsAtStart_};
  }

private:
  c10::cuda::CUDAStream streamOf(StreamKind stream) {
    if (stream == StreamKind::Compute)
      return compute_;
    std::optional<c10::cuda::CUDAStream> &s = streams_[size_t(stream)];
    if (!s)
      s = c10::cuda::getStreamFromPool(/*isHighPriority=*/true, index_);
    return *s;
  }

  c10::DeviceIndex index_;
  c10::cuda::CUDAStream compute_;
  std::array<std::optional<c10::cuda::CUDAStream>, kNumStreamKinds> streams_;
  int64_t allocationsAtStart_ = 0;
};

} // namespace
} // namespace loomrt

/// The entry point libloomrt looks up (kCreateCudaDeviceSymbol): the device
/// of this process's GPU, or null and why, in one line, when there is none
/// to use.
extern "C" __attribute__((visibility("default"))) loomrt::Device *
loomrtCreateCudaDevice(const loomrt::DeviceOptions *options,
                       std::string *error) {
  // The runtime API directly: c10's device_count() would print a warning
  // of its own on a machine without a driver, and the user gets one line.
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    *error = std::string("no usable CUDA device (") +
             cudaGetErrorString(status) + ")";
    return nullptr;
  }
  if (count == 0) {
    *error = "no CUDA device on this machine";
    return nullptr;
  }
  if (options->localRank >= count) {
    *error = "LOCAL_RANK is " + std::to_string(options->localRank) +
             " but this machine has " + std::to_string(count) +
             " CUDA device(s): run one process per GPU";
    return nullptr;
  }
  try {
    return new loomrt::CudaDevice(c10::DeviceIndex(options->localRank));
  } catch (const c10::Error &e) {
    *error = e.what_without_backtrace();
  } catch (const std::exception &e) {
    *error = e.what();
  }
  return nullptr;
}
