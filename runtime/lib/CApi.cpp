//===- CApi.cpp - The C API over loomrt::Session --------------------------===//

#include "loomrt/loomrt.h"

#include "loomrt/Checkpoint.h"
#include "loomrt/Dtype.h"
#include "loomrt/Error.h"
#include "loomrt/Session.h"

#include "MemoryTracker.h"

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <optional>
#include <string>

struct loomrt_session {
  loomrt::Session session;
  std::optional<loomrt::BatchFile> batches;
};

namespace {

thread_local std::string lastError;
// The tracker of an open loomrt_memory_region on this thread.
thread_local std::shared_ptr<loomrt::MemoryTracker> regionTracker;

loomrt_status fail(loomrt_status status, std::string message) {
  lastError = std::move(message);
  return status;
}

/// Runs `body`, turning any exception into a status and a message.
template <typename Fn>
loomrt_status guarded(Fn &&body) {
  lastError.clear();
  try {
    body();
    return LOOMRT_OK;
  } catch (const c10::Error &e) {
    return fail(LOOMRT_ERROR, e.what_without_backtrace());
  } catch (const std::exception &e) {
    return fail(LOOMRT_ERROR, e.what());
  } catch (...) {
    return fail(LOOMRT_ERROR, "unknown error");
  }
}

#define LOOMRT_REQUIRE(cond, what)                                             \
  do {                                                                         \
    if (!(cond))                                                               \
      return fail(LOOMRT_INVALID_ARGUMENT, std::string(__func__) + ": " what); \
  } while (0)

} // namespace

extern "C" {

const char *loomrt_last_error(void) { return lastError.c_str(); }

loomrt_status loomrt_set_num_threads(int numThreads) {
  LOOMRT_REQUIRE(numThreads > 0, "num_threads must be positive");
  return guarded([&] { at::set_num_threads(numThreads); });
}

loomrt_status loomrt_session_create(const char *artifactPath,
                                    loomrt_session **out) {
  LOOMRT_REQUIRE(artifactPath && out, "artifact_path and out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    *out = new loomrt_session{loomrt::Session::load(artifactPath), {}};
  });
}

loomrt_status loomrt_session_create_on(const char *artifactPath,
                                       const char *device,
                                       loomrt_session **out) {
  LOOMRT_REQUIRE(artifactPath && out, "artifact_path and out must not be NULL");
  *out = nullptr;
  loomrt::DistributedConfig config;
  if (device) {
    config.device = loomrt::parseDeviceKind(device);
    LOOMRT_REQUIRE(config.device, "device must be \"cpu\", \"cuda\" or NULL");
  }
  return guarded([&] {
    *out = new loomrt_session{loomrt::Session::load(artifactPath, config), {}};
  });
}

void loomrt_session_destroy(loomrt_session *session) { delete session; }

loomrt_status loomrt_session_load_weights(loomrt_session *session,
                                          const char *path) {
  LOOMRT_REQUIRE(session && path, "session and path must not be NULL");
  return guarded([&] { session->session.loadWeights(path); });
}

loomrt_status loomrt_session_set_batches(loomrt_session *session,
                                         const char *path, int64_t *numSteps) {
  LOOMRT_REQUIRE(session && path, "session and path must not be NULL");
  return guarded([&] {
    session->batches = loomrt::BatchFile::open(path);
    if (numSteps)
      *numSteps = session->batches->numSteps();
  });
}

loomrt_status loomrt_session_step_index(loomrt_session *session, int64_t index,
                                        double *loss) {
  LOOMRT_REQUIRE(session, "session must not be NULL");
  LOOMRT_REQUIRE(session->batches,
                 "no batches file; call loomrt_session_set_batches first");
  LOOMRT_REQUIRE(index >= 0, "index must not be negative");
  return guarded([&] {
    double l = session->session.step(session->batches->batch(index));
    if (loss)
      *loss = l;
  });
}

loomrt_status loomrt_session_step(loomrt_session *session,
                                  const loomrt_tensor *batch,
                                  size_t numElements, double *loss) {
  LOOMRT_REQUIRE(session, "session must not be NULL");
  LOOMRT_REQUIRE(batch || numElements == 0, "batch must not be NULL");
  return guarded([&] {
    std::vector<at::Tensor> tensors;
    for (size_t i = 0; i < numElements; ++i) {
      const loomrt_tensor &t = batch[i];
      std::string where = "batch[" + std::to_string(i) + "]";
      if (!t.dtype)
        throw loomrt::Error(where + ": dtype is NULL");
      std::optional<c10::ScalarType> dtype =
          loomrt::parseArtifactDtype(t.dtype);
      if (!dtype)
        throw loomrt::Error(where + ": unknown dtype '" + std::string(t.dtype) +
                            "'");
      if (t.ndim < 0 || (t.ndim > 0 && !t.shape))
        throw loomrt::Error(where + ": bad ndim or NULL shape");
      std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
      at::Tensor out = at::empty(shape, at::TensorOptions().dtype(*dtype));
      size_t want = size_t(out.numel()) * out.element_size();
      if (t.nbytes != want)
        throw loomrt::Error(where + ": " + std::to_string(t.nbytes) +
                            " bytes given, " + std::string(t.dtype) + " " +
                            loomrt::formatShape(shape) + " needs " +
                            std::to_string(want));
      if (want != 0) {
        if (!t.data)
          throw loomrt::Error(where + ": data is NULL");
        std::memcpy(out.data_ptr(), t.data, want);
      }
      tensors.push_back(std::move(out));
    }
    double l = session->session.step(tensors);
    if (loss)
      *loss = l;
  });
}

loomrt_status loomrt_session_save_parameters(const loomrt_session *session,
                                             const char *path) {
  LOOMRT_REQUIRE(session && path, "session and path must not be NULL");
  return guarded([&] { session->session.saveParameters(path); });
}

loomrt_status loomrt_session_save_checkpoint(loomrt_session *session,
                                             const char *dir,
                                             int64_t dataPosition,
                                             int64_t keep) {
  LOOMRT_REQUIRE(session && dir, "session and dir must not be NULL");
  LOOMRT_REQUIRE(dataPosition >= 0 && keep >= 0,
                 "data_position and keep must not be negative");
  return guarded([&] {
    loomrt::CheckpointSaveOptions options;
    options.keep = keep;
    loomrt::saveCheckpoint(session->session, dir, dataPosition, options);
  });
}

loomrt_status loomrt_session_load_checkpoint(loomrt_session *session,
                                             const char *path,
                                             int64_t *dataPosition) {
  LOOMRT_REQUIRE(session && path, "session and path must not be NULL");
  return guarded([&] {
    loomrt::CheckpointInfo info =
        loomrt::loadCheckpoint(session->session, path);
    if (dataPosition)
      *dataPosition = info.dataPosition;
  });
}

loomrt_status loomrt_session_load_parameters(loomrt_session *session,
                                             const char *path) {
  LOOMRT_REQUIRE(session && path, "session and path must not be NULL");
  return guarded([&] { session->session.loadParameters(path); });
}

double loomrt_session_last_loss(const loomrt_session *session) {
  return session && session->session.stepsRun() > 0
             ? session->session.lastStats().loss
             : 0.0;
}

double loomrt_session_last_time_ms(const loomrt_session *session) {
  return session ? session->session.lastStats().timeMs : 0.0;
}

int64_t loomrt_session_last_start_bytes(const loomrt_session *session) {
  return session ? session->session.lastStats().startBytes : 0;
}

int64_t loomrt_session_last_peak_bytes(const loomrt_session *session) {
  return session ? session->session.lastStats().peakBytes : 0;
}

int64_t loomrt_session_steps_run(const loomrt_session *session) {
  return session ? session->session.stepsRun() : 0;
}

loomrt_status loomrt_memory_region_begin(int64_t heldBytes) {
  LOOMRT_REQUIRE(heldBytes >= 0, "held_bytes must be non-negative");
  LOOMRT_REQUIRE(!regionTracker, "a memory region is already open");
  return guarded([&] {
    regionTracker = std::make_shared<loomrt::MemoryTracker>();
    regionTracker->reset(heldBytes);
    c10::ThreadLocalDebugInfo::_push(c10::DebugInfoKind::PROFILER_STATE,
                                     regionTracker);
  });
}

loomrt_status loomrt_memory_region_end(int64_t *peakBytes) {
  LOOMRT_REQUIRE(peakBytes, "peak_bytes is NULL");
  LOOMRT_REQUIRE(regionTracker, "no memory region is open");
  return guarded([&] {
    c10::ThreadLocalDebugInfo::_pop(c10::DebugInfoKind::PROFILER_STATE);
    *peakBytes = regionTracker->peak();
    regionTracker.reset();
  });
}

} // extern "C"
