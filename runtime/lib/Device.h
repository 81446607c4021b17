//===- Device.h - What differs between devices ------------------*- C++ -*-===//
//
// The interpreter (Session.cpp) is one loop for every device; what differs
// between a CPU with Gloo and a GPU with NCCL sits behind this interface:
//
//   - the c10::Device that kernels, owned state and results live on;
//   - the process group created over the rendezvous' TCPStore (Gloo or
//     NCCL);
//   - streams: compute runs on one stream, each collective kind on its own
//     (streamFor); a collective start makes its stream wait for compute and
//     issues there (beginCollective/endCollective), its wait makes compute
//     wait for the event recorded after it (waitCollective);
//   - waiting for a c10d::Work, with the timeout that names the rank that
//     did not come;
//   - releasing a value at its compiled free point (release): a value made
//     on a collective's stream and read on compute must be recorded on
//     compute before its block goes back to a caching allocator;
//   - peak memory, reported the same way for every device.
//
// CpuDevice (Device.cpp) keeps the CPU runtime's behaviour exactly: one
// host thread is every stream, so begin/end/wait are no-ops, and memory
// comes from MemoryTracker. The CUDA backend (cuda/CudaDevice.cpp) is a
// separate library, libloomrt_cuda.so, loaded only when a session runs on
// cuda, so CPU runs never load libtorch_cuda.
//
// Only collectives, waits and frees call into the device; an aten
// instruction does not, so a CPU step pays no virtual call per kernel.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LIB_DEVICE_H
#define LOOMRT_LIB_DEVICE_H

#include "loomrt/Artifact.h"

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace loomrt {

class MemoryTracker;

/// The streams of a step: compute, and one per kind of collective, so that
/// an all-gather prefetched for the next unit never queues behind the
/// previous unit's reduce-scatter (FSDP2's all_gather_stream and
/// reduce_scatter_stream).
enum class StreamKind : uint8_t {
  Compute,
  AllGather,
  ReduceScatter,
  AllReduce,
  Broadcast,
  /// all_slice moves no data, but copies its slice off compute like the
  /// collectives it replaces.
  AllSlice,
  PointToPoint,
};
inline constexpr int kNumStreamKinds = 7;
const char *toString(StreamKind stream);
/// The stream an instruction of `op` issues on: a collective or transfer
/// start its kind's, everything else (waits included) compute.
StreamKind streamFor(OpKind op);
/// A set of streams, one bit per StreamKind.
using StreamSet = uint8_t;
inline constexpr StreamSet streamBit(StreamKind s) {
  return StreamSet(1u << unsigned(s));
}

/// An event recorded on a stream after a collective was issued there; what
/// compute waits on at the collective's wait. Null on the CPU.
class DeviceEvent {
public:
  virtual ~DeviceEvent();
};

/// Tensor memory of a step, as StepStats reports it.
struct DeviceMemory {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocations = 0;
};

class Device {
public:
  virtual ~Device();

  DeviceKind kind() const { return kind_; }
  /// Where kernels, owned state and results live.
  c10::Device device() const { return device_; }

  /// The backend of one process group (`size` ranks, this one at `index`)
  /// over `store` (prefixed per group by the caller).
  virtual c10::intrusive_ptr<c10d::Backend>
  createProcessGroup(const c10::intrusive_ptr<c10d::Store> &store,
                     int64_t index, int64_t size,
                     std::chrono::milliseconds timeout) = 0;

  /// A collective is about to be issued on `stream`: the stream waits for
  /// what compute has queued (the start's input), and what is issued until
  /// endCollective (the backend's call, staging copies) goes on it.
  virtual void beginCollective(StreamKind stream) = 0;
  /// The collective is issued: returns the event its wait makes compute
  /// wait on (null where there is nothing to wait on), and makes compute
  /// current again.
  virtual std::shared_ptr<DeviceEvent> endCollective(StreamKind stream) = 0;
  /// At the compiled wait: compute waits for `event` (from endCollective
  /// on `stream`), before anything reads the result.
  virtual void waitCollective(StreamKind stream, const DeviceEvent *event) = 0;

  /// Blocks until `work` is done; throws (c10d's error, or a timeout's)
  /// when it fails or `timeout` passes.
  virtual void waitWork(c10d::Work &work,
                        std::chrono::milliseconds timeout) = 0;
  /// Whether the backend's worker thread still holds a finished work for a
  /// moment after wait() returns (Gloo's does; Comm then waits until it
  /// lets go, so the tensors it holds are freed on the session's thread).
  virtual bool workerReleasesLate() const = 0;
  /// Whether the backend gathers dim 0 straight into one flat tensor
  /// (NCCL's _allgather_base). Gloo's copies through a gathered-size buffer
  /// of its own, so on the CPU each member broadcasts into its block.
  virtual bool gathersInPlace() const = 0;

  /// `value` leaves its slot at a compiled free point (a free, the slot's
  /// next write, or the step's end) after `usedOn` read it besides the
  /// stream that made it.
  virtual void release(const at::Tensor &value, StreamSet usedOn) = 0;

  /// A step starts with `liveBytes` of the session's tensors alive (what
  /// the CPU counts from; a device allocator counts what it holds).
  virtual void beginStep(int64_t liveBytes) = 0;
  /// Tensor memory since beginStep.
  virtual DeviceMemory memory() = 0;

protected:
  Device(DeviceKind kind, c10::Device device) : kind_(kind), device_(device) {}

private:
  DeviceKind kind_;
  c10::Device device_;
};

/// What a device is created from.
struct DeviceOptions {
  DeviceKind kind = DeviceKind::Cpu;
  /// The session's tracker (the CPU's memory accounting).
  std::shared_ptr<MemoryTracker> tracker;
  /// torchrun's LOCAL_RANK: the GPU this process uses (0 when unset).
  int64_t localRank = 0;
};

/// The device `options` asks for. cuda loads libloomrt_cuda.so from the
/// directory of libloomrt.so; throws loomrt::Error in one line when that
/// library was not built (a LibTorch without CUDA) or no GPU is usable.
std::unique_ptr<Device> makeDevice(const DeviceOptions &options);

/// Tests: makes every later makeDevice call return what `factory` makes
/// (an empty function restores the real devices).
void setDeviceFactoryForTesting(
    std::function<std::unique_ptr<Device>(const DeviceOptions &)> factory);

/// The CPU backend: one host thread is every stream, Gloo groups, memory
/// from `tracker`. Public for backends that record around it (tests).
std::unique_ptr<Device> makeCpuDevice(std::shared_ptr<MemoryTracker> tracker);

/// The symbol libloomrt_cuda.so exports: creates a CudaDevice or returns
/// null with the reason in `*error`.
using CreateCudaDeviceFn = Device *(*)(const DeviceOptions *options,
                                       std::string *error);
inline constexpr char kCreateCudaDeviceSymbol[] = "loomrtCreateCudaDevice";

} // namespace loomrt

#endif // LOOMRT_LIB_DEVICE_H
