//===- MemoryTracker.h - Live tensor bytes from allocator reports -*- C++
//-*-===//
//
// c10's DefaultCPUAllocator reports every allocation and free to the
// `MemoryReportingInfoBase` installed as PROFILER_STATE debug info of the
// current thread (c10::reportMemoryUsageToProfiler; this is what the
// PyTorch profiler's profile_memory uses). A MemoryTracker installed with
// MemoryTracker::Scope turns those reports into live and peak byte counts.
//
// Limits, documented in docs/runtime.md: the debug info is thread-local and
// ATen's OpenMP workers do not inherit it, so an allocation made inside a
// parallel region is not seen; memory that kernels get from elsewhere
// (oneDNN/MKL scratch) is not tensor memory and is not seen either. Frees
// are matched to allocations by the allocator's own table, so an allocation
// the tracker never saw is never subtracted.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LIB_MEMORYTRACKER_H
#define LOOMRT_LIB_MEMORYTRACKER_H

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <cstdint>
#include <memory>

namespace loomrt {

class MemoryTracker final : public c10::MemoryReportingInfoBase {
public:
  void reportMemoryUsage(void *ptr, int64_t allocSize, size_t totalAllocated,
                         size_t totalReserved, c10::Device device) override {
    if (device.type() != c10::DeviceType::CPU)
      return;
    current_ += allocSize;
    peak_ = std::max(peak_, current_);
    if (allocSize > 0)
      ++allocations_;
  }
  bool memoryProfilingEnabled() const override { return true; }

  /// Starts a new measurement with `liveBytes` already in use.
  void reset(int64_t liveBytes) {
    current_ = peak_ = liveBytes;
    allocations_ = 0;
  }
  int64_t current() const { return current_; }
  int64_t peak() const { return peak_; }
  int64_t allocations() const { return allocations_; }

  /// Routes this thread's CPU allocator reports to `tracker` while alive.
  class Scope {
  public:
    explicit Scope(std::shared_ptr<MemoryTracker> tracker)
        : guard_(c10::DebugInfoKind::PROFILER_STATE, std::move(tracker)) {}

  private:
    c10::DebugInfoGuard guard_;
  };

private:
  int64_t current_ = 0;
  int64_t peak_ = 0;
  int64_t allocations_ = 0;
};

} // namespace loomrt

#endif // LOOMRT_LIB_MEMORYTRACKER_H
