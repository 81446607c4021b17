/*===- loomrt.h - C API of the Loom runtime -----------------------*- C -*-===*\
|*                                                                            *|
|* A stable C interface over loomrt::Session for callers that are not C++     *|
|* (ctypes, other languages) or that must not see LibTorch's headers. Every  *|
|* function catches everything: no exception crosses this boundary. A       *|
|* function that can fail returns LOOMRT_OK or an error status, and          *|
|* loomrt_last_error() then returns the message on the calling thread.       *|
|*                                                                            *|
\*===----------------------------------------------------------------------===*/

#ifndef LOOMRT_LOOMRT_H
#define LOOMRT_LOOMRT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum loomrt_status {
  LOOMRT_OK = 0,
  /* The runtime refused or failed: bad artifact, file, batch, kernel. */
  LOOMRT_ERROR = 1,
  /* A NULL handle or pointer, or an out-of-range argument. */
  LOOMRT_INVALID_ARGUMENT = 2,
} loomrt_status;

/* An opaque training session: one loaded artifact and its owned state. */
typedef struct loomrt_session loomrt_session;

/* One batch element given as raw memory: `nbytes` bytes of contiguous,
   row-major, little-endian data of `dtype` (the artifact's names: "f32",
   "f64", "f16", "bf16", "i64", "i32", "i16", "i8", "u8", "bool", "c64",
   "c128") and shape `shape[0..ndim)`. The runtime copies it. */
typedef struct loomrt_tensor {
  const void *data;
  size_t nbytes;
  const char *dtype;
  const int64_t *shape;
  int64_t ndim;
} loomrt_tensor;

/* The message of the last failed call on this thread ("" if none). Valid
   until the next loomrt call on this thread. */
const char *loomrt_last_error(void);

/* Sets ATen's intra-op thread count (process-wide). */
loomrt_status loomrt_set_num_threads(int num_threads);

/* Loads and validates an artifact; *out receives the session. */
loomrt_status loomrt_session_create(const char *artifact_path,
                                    loomrt_session **out);
/* As loomrt_session_create, on `device` ("cpu" or "cuda"; NULL: the
   artifact's own `device`). Without a usable GPU, "cuda" fails with
   LOOMRT_ERROR and a one-line message starting "device cuda: ". */
loomrt_status loomrt_session_create_on(const char *artifact_path,
                                       const char *device,
                                       loomrt_session **out);
/* Frees a session; NULL is ignored. */
void loomrt_session_destroy(loomrt_session *session);

/* Replaces parameters, buffers and constants from a safetensors file and
   resets the optimizer state (Session::loadWeights). */
loomrt_status loomrt_session_load_weights(loomrt_session *session,
                                          const char *safetensors_path);

/* Reads a capture's batches.safetensors for loomrt_session_step_index;
 *num_steps (may be NULL) receives how many distinct batches it holds. */
loomrt_status loomrt_session_set_batches(loomrt_session *session,
                                         const char *batches_path,
                                         int64_t *num_steps);
/* Runs one step on batch `index` of the batches file (index mod its
   num_steps); *loss (may be NULL) receives the loss. */
loomrt_status loomrt_session_step_index(loomrt_session *session, int64_t index,
                                        double *loss);
/* Runs one step on `num_elements` batch elements given as raw memory. */
loomrt_status loomrt_session_step(loomrt_session *session,
                                  const loomrt_tensor *batch,
                                  size_t num_elements, double *loss);

/* Checkpoints of parameters and buffers (safetensors). */
loomrt_status loomrt_session_save_parameters(const loomrt_session *session,
                                             const char *path);
loomrt_status loomrt_session_load_parameters(loomrt_session *session,
                                             const char *path);

/* Training checkpoints (loomrt/Checkpoint.h, docs/checkpoints.md): the
   parameters, buffers, optimizer state, step counts and RNG state, written to
   DIR/step-<steps run>, keeping the newest `keep` (0: all). `data_position`
   is the index of the next batch the caller will step on. */
loomrt_status loomrt_session_save_checkpoint(loomrt_session *session,
                                             const char *dir,
                                             int64_t data_position,
                                             int64_t keep);
/* Restores a checkpoint (`path`, or the newest complete one in the directory
   `path`), whatever sharding saved it; *data_position (may be NULL) receives
   the saved data position. Nothing changes when it fails. */
loomrt_status loomrt_session_load_checkpoint(loomrt_session *session,
                                             const char *path,
                                             int64_t *data_position);

/* Measurements of the last step (0 before the first). */
double loomrt_session_last_loss(const loomrt_session *session);
double loomrt_session_last_time_ms(const loomrt_session *session);
int64_t loomrt_session_last_start_bytes(const loomrt_session *session);
int64_t loomrt_session_last_peak_bytes(const loomrt_session *session);
int64_t loomrt_session_steps_run(const loomrt_session *session);

/* Measures CPU tensor memory of arbitrary code on the calling thread with
   the same allocator hook a session's step uses, so that a caller can
   measure another framework (e.g. PyTorch eager) exactly as Loom is
   measured. `held_bytes` is what is already live (parameters, state, batch)
   and starts the count. Regions do not nest. */
loomrt_status loomrt_memory_region_begin(int64_t held_bytes);
/* Ends the region; *peak_bytes receives the largest live byte count seen. */
loomrt_status loomrt_memory_region_end(int64_t *peak_bytes);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* LOOMRT_LOOMRT_H */
