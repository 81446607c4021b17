//===- MemoryTracker.h - Live tensor bytes from allocator reports -*- C++
//-*-===//
//
// c10's DefaultCPUAllocator reports every allocation and free to the
// `MemoryReportingInfoBase` installed as PROFILER_STATE debug info of the
// current thread (c10::reportMemoryUsageToProfiler; this is what the
// PyTorch profiler's profile_memory uses). A MemoryTracker installed with
// MemoryTracker::Scope turns those reports into live and peak byte counts.
//
// What is counted: the blocks allocated on the thread that installed the
// tracker (the session's thread), from their allocation until they are
// freed, on whichever thread that happens. Gloo's worker threads run each
// collective under the thread-local state captured when it was issued, so
// they report to this tracker too, concurrently; what they allocate
// themselves (the flat buffers Gloo gathers into) is not counted: when it
// lives relative to the session's work is a race between threads, and
// counting it made the peak of one program vary from step to step.
//
// Staging: blocks a collective backend allocates on the session's thread
// while it is being issued (between beginStaging and endStaging: e.g. the
// copy Gloo's reduce-scatter reduces in) are counted from then until the
// collective's wait (releaseStaging), whenever and on whichever thread the
// backend frees them. So a step's live and peak bytes depend only on the
// program: the same step gives the same numbers on every run.
//
// Limits, documented in docs/runtime.md: ATen's OpenMP workers do not
// inherit the debug info, so an allocation made inside a parallel region is
// not seen; memory that kernels get from elsewhere (MKL's scratch) is not
// tensor memory and is not seen either, but what they take from c10's
// allocator (oneDNN convolutions' reorders, im2col columns) is; a block
// allocated while the tracker was not installed is never subtracted when it
// is freed.
//
//===----------------------------------------------------------------------===//

#ifndef LOOMRT_LIB_MEMORYTRACKER_H
#define LOOMRT_LIB_MEMORYTRACKER_H

#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

namespace loomrt {

class MemoryTracker final : public c10::MemoryReportingInfoBase {
public:
  void reportMemoryUsage(void *ptr, int64_t allocSize, size_t totalAllocated,
                         size_t totalReserved, c10::Device device) override {
    if (device.type() != c10::DeviceType::CPU || allocSize == 0)
      return;
    std::lock_guard<std::mutex> lock(mutex_);
    if (allocSize > 0) {
      if (std::this_thread::get_id() != owner_)
        return; // another thread's own block (Gloo's worker buffers)
      ++allocations_;
      if (staging_) {
        staged_[ptr] = {staging_, allocSize};
      } else {
        blocks_.insert(ptr);
      }
    } else {
      auto s = staged_.find(ptr);
      if (s != staged_.end()) {
        // Subtracted at the collective's wait, not now.
        stagedFreed_[s->second.first] += s->second.second;
        staged_.erase(s);
        return;
      }
      if (blocks_.erase(ptr) == 0)
        return; // a block this tracker did not count
    }
    current_ += allocSize;
    peak_ = std::max(peak_, current_);
    windowPeak_ = std::max(windowPeak_, current_);
  }
  bool memoryProfilingEnabled() const override { return true; }

  /// The tracker installed on this thread, or null.
  static MemoryTracker *installed() {
    return dynamic_cast<MemoryTracker *>(
        c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE));
  }

  /// Allocations on the owner thread from here to endStaging belong to a
  /// collective; returns its id for releaseStaging.
  int64_t beginStaging() {
    std::lock_guard<std::mutex> lock(mutex_);
    staging_ = ++lastStaging_;
    return staging_;
  }
  void endStaging() {
    std::lock_guard<std::mutex> lock(mutex_);
    staging_ = 0;
  }
  /// The collective `id` finished: its staging blocks stop counting, freed
  /// or not (a later free of one is ignored).
  void releaseStaging(int64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    int64_t bytes = 0;
    auto freed = stagedFreed_.find(id);
    if (freed != stagedFreed_.end()) {
      bytes += freed->second;
      stagedFreed_.erase(freed);
    }
    for (auto it = staged_.begin(); it != staged_.end();) {
      if (it->second.first == id) {
        bytes += it->second.second;
        it = staged_.erase(it);
      } else {
        ++it;
      }
    }
    current_ -= bytes;
  }

  /// Starts a new measurement with `liveBytes` already in use.
  void reset(int64_t liveBytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    current_ = peak_ = liveBytes;
    allocations_ = 0;
  }
  int64_t current() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return current_;
  }
  int64_t peak() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return peak_;
  }
  int64_t allocations() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return allocations_;
  }
  /// A window inside the measurement (one kernel's run, for the kernel
  /// workspace profile): its peak starts at the current bytes and follows
  /// them, without touching peak().
  void beginWindow() {
    std::lock_guard<std::mutex> lock(mutex_);
    windowPeak_ = current_;
  }
  int64_t windowPeak() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return windowPeak_;
  }

  /// Routes this thread's CPU allocator reports to `tracker` while alive,
  /// and makes this thread the one whose allocations it counts.
  class Scope {
  public:
    explicit Scope(std::shared_ptr<MemoryTracker> tracker)
        : guard_(c10::DebugInfoKind::PROFILER_STATE, own(tracker)) {}

  private:
    static std::shared_ptr<MemoryTracker>
    own(std::shared_ptr<MemoryTracker> tracker) {
      std::lock_guard<std::mutex> lock(tracker->mutex_);
      tracker->owner_ = std::this_thread::get_id();
      return tracker;
    }
    c10::DebugInfoGuard guard_;
  };

private:
  mutable std::mutex mutex_;
  std::thread::id owner_ = std::this_thread::get_id();
  /// Blocks allocated on the owner thread and not freed yet.
  std::unordered_set<void *> blocks_;
  /// Staging blocks not freed yet: collective id and size.
  std::unordered_map<void *, std::pair<int64_t, int64_t>> staged_;
  /// Bytes of staging blocks already freed, per collective id.
  std::unordered_map<int64_t, int64_t> stagedFreed_;
  int64_t staging_ = 0;
  int64_t lastStaging_ = 0;
  int64_t current_ = 0;
  int64_t peak_ = 0;
  int64_t windowPeak_ = 0;
  int64_t allocations_ = 0;
};

} // namespace loomrt

#endif // LOOMRT_LIB_MEMORYTRACKER_H
