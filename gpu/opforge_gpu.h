/* libopforge_gpu's C ABI loaded by the evaluator (gpu/evaluator/gpulib.py) with ctypes.
 * Every string in and out is UTF-8 JSON; every returned string is malloc'd and must be
 * released with ofg_string_free (NULL is returned only when out of memory). A session
 * is not thread-safe: call it from one thread at a time. */
#ifndef OPFORGE_GPU_H
#define OPFORGE_GPU_H

#include <stddef.h>

#define OFG_EXPORT __attribute__((visibility("default")))

/* Candidates a session holds prepared at once: every region of one program is prepared
 * before it runs, so this is also the most generated regions a program may have (the
 * partition keeps any beyond it as library steps, engine/partition.c). */
#define OFG_MAX_PREPARED_CANDIDATES 1024

/* Opens device `device` (CUDA ordinal): loads the driver with dlopen, retains the
 * primary context (the one PyTorch uses) and makes it current, and opens the cubin cache
 * in cache_dir (NULL or "" for none). Returns 0 and *ret_session, or -1 with err
 * (errlen bytes) filled. Free with ofg_session_free. */
OFG_EXPORT int ofg_session_open(int device, const char *cache_dir, void **ret_session,
                                char *err, size_t errlen);
/* Frees every candidate, the flush buffer and the cache, and releases the primary
 * context. Accepts NULL. */
OFG_EXPORT void ofg_session_free(void *session);
/* {"type":"cuda","name","index","capability":"9.0","arch":"sm_90a","sm_count",
 *  "memory_bytes","hbm_peak_GBps","l2_bytes",...,"cache":{"dir","hits","misses"}} */
OFG_EXPORT char *ofg_device_info(void *session);
/* Compiles (through the cache), validates the plan against the tensors, loads the
 * module and allocates the plan's buffers. candidate_json {"source","options","plan"};
 * tensors_json {"tensors":[{"name","dtype","numel","bytes","output"?}],"precision"}
 * (a tensor is an output when "output" is true, or without it when its name starts with
 * "output:"; outputs are poisoned by ofg_candidate_run and must be named by a launch).
 * At most OFG_MAX_PREPARED_CANDIDATES at once (then protocol/too_many_candidates).
 * Returns
 * {"ok","handle"(-1 unless ok),"compile":{...},"failure":null|{stage,class,message},
 *  "sticky":bool, "globals":{"declared","reset"} (module globals reset before each run)}. */
OFG_EXPORT char *ofg_candidate_prepare(void *session, const char *candidate_json,
                                       const char *tensors_json);
/* Runs the plan once on stream (a CUstream as an integer; 0 = legacy default stream)
 * with {"tensors":[{"name","ptr"}...]}, synchronizing after each launch. First, output
 * tensors (names "output:*", not overlapping an input) are filled with 0xff bytes (NaN),
 * scratch buffers zeroed and module globals reset, so no state survives between runs;
 * with "reset_state": false in pointers_json the buffers and globals are left as the
 * last run left them, which exposes kernels that keep state between calls.
 * Returns {"ok","failure","sticky"}. */
OFG_EXPORT char *ofg_candidate_run(void *session, int handle, const char *pointers_json,
                                   unsigned long long stream);
/* Times the plan (timing_json {"warmup","min_reps","max_reps","target_rse",
 * "flush_bytes"}, each optional). Before each rep, untimed: outputs poisoned, L2 flush,
 * buffers and globals reset; the CUDA events enclose the plan's launches only. Returns {"ok","median_ms","mean_ms","reps","rse",
 * "failure","sticky"}. */
OFG_EXPORT char *ofg_candidate_time(void *session, int handle, const char *pointers_json,
                                    unsigned long long stream, const char *timing_json);
/* Keeps pointers_json's tensor pointers ({"tensors":[{"name","ptr"}...]}, as for
 * ofg_candidate_run) in the prepared candidate for ofg_candidate_enqueue, replacing any
 * bound before. Returns NULL on success, else a failure JSON {"ok":false,"failure",
 * "sticky"} (free with ofg_string_free). */
OFG_EXPORT char *ofg_candidate_bind(void *session, int handle, const char *pointers_json);
/* Enqueues on stream, with the bound pointers: the reset of the candidate's scratch
 * buffers and module globals (memsets and device-to-device copies), then every launch
 * in order. Nothing else: no synchronization, no output poisoning, no JSON, no
 * allocation, so that it can run inside CUDA graph stream capture (the capturing stream
 * then records it). Returns NULL on success, else a failure JSON as ofg_candidate_bind
 * (protocol/not_bound before any bind; cuda/<error> naming the launch). */
OFG_EXPORT char *ofg_candidate_enqueue(void *session, int handle, unsigned long long stream);
/* Unloads the candidate's module and frees its buffers; unknown handles are ignored. */
OFG_EXPORT void ofg_candidate_free(void *session, int handle);
/* Frees a string returned by this library; accepts NULL. */
OFG_EXPORT void ofg_string_free(char *s);
/* Compile only, no GPU needed: {"source","options","arch","precision","cache_dir"} ->
 * {"ok","ms","log","signature","registers","spills","cubin_bytes","cache","kernels",
 *  "failure"}. session may be NULL; arch defaults to the session's, else sm_90a. */
OFG_EXPORT char *ofg_compile_only(void *session, const char *request_json);

#endif
