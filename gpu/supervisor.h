/* The evaluator supervisor: one evaluator process per GPU slot, killed and restarted on
 * timeout, crash, garbage or a poisoned CUDA context, with the task reloaded after every
 * restart. Implemented in gpu/supervisor/ (process.c, protocol.c, supervisor.c, state.c,
 * pool.c, paths.c).
 *
 * The evaluator protocol (docs/architecture.md, "Evaluator protocol"), JSON lines over the
 * evaluator's stdin and stdout: the evaluator first writes one ready line
 * {"event":"ready","pid":N,"device":{...}[,"gpu_library_error"]}; then each request is
 * one line {"id":N,"op":"load_task"|"profile"|"evaluate"|"shutdown",...arguments},
 * answered by exactly one line {"id":N,"ok":true,"result":{...}} or {"id":N,"ok":false,
 * "error":{"stage","class","message"[,"traceback"]},"fatal":bool[,"result"]}. A fatal
 * reply means the CUDA context is lost and the process exits right after writing it.
 * Nothing else may appear on stdout; stderr is free-form log. */
#ifndef OPFORGE_SUPERVISOR_H
#define OPFORGE_SUPERVISOR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/outcome.h"

struct sandbox;

/* Everything needed to start one evaluator. Strings are copied by supervisor_start.
 * Zero or negative numbers mean "the default" (given after each field). */
struct supervisor_config {
  const char *python;          /* interpreter; NULL or "" runs evaluator_path itself */
  const char *evaluator_path;  /* gpu/evaluator/main.py, the evaluator package's entry
                                * script (or any program speaking the protocol) */
  const char *gpu_lib_path;    /* --lib PATH; NULL: not passed */
  const char *cache_dir;       /* --cache-dir DIR; NULL: not passed */
  const char *device;          /* --device: "0", "1", ..., "cpu", "meta"; NULL: "cpu" */
  const char *stderr_path;     /* evaluator stderr appended here; NULL: inherited */
  double compile_eval_deadline_s; /* evaluate and unknown ops: 60 */
  double profile_deadline_s;   /* profile, including torch.compile: 600 */
  double load_deadline_s;      /* load_task, also when replayed after a restart: 120 */
  double start_deadline_s;     /* from spawn to the ready line: 120 */
  double shutdown_deadline_s;  /* supervisor_free: shutdown reply, then each signal: 2 */
  size_t max_line_bytes;       /* longest reply line accepted: 16 MiB */
  double mem_fraction;         /* --mem-fraction X; 0: not passed */
  int restart_limit;           /* restarts allowed inside restart_window_s: 5 */
  double restart_window_s;     /* see restart_limit: 60 */
  bool no_restart;             /* one-shot users (opforge profile): a killed or dead
                                * evaluator stays down; requests then fail with
                                * crash/start_failed */
  const struct sandbox *sandbox; /* borrowed, must outlive the supervisor: where it is
                                * enforced (gpu/sandbox.h) the evaluator runs in it with
                                * the device, cache dir and lock file of its view, and its
                                * stderr reaches stderr_path through a pipe; NULL or mode
                                * none: spawned directly with the server's environment */
};


/* Evaluator state, as /v1/devices shows it. */
enum supervisor_state {
  SUPERVISOR_STARTING,   /* spawned, waiting for the ready line */
  SUPERVISOR_READY,      /* idle, process alive */
  SUPERVISOR_BUSY,       /* a request is in flight */
  SUPERVISOR_RESTARTING, /* killed or dead; the next request (or the current one) restarts it */
  SUPERVISOR_FAILED,     /* restart storm: requests fail fast with crash/restart_limit */
  SUPERVISOR_DISABLED,   /* no process by design (supervisor_new_disabled) */
};

struct supervisor;

/* Fills cfg with the defaults above and every pointer NULL. */
void supervisor_config_defaults(struct supervisor_config *cfg);

/* Spawns the evaluator in its own process group and waits for its ready line within
 * start_deadline_s, keeping the device info it reports. Returns 0 and sets *ret_sv
 * (caller owns, supervisor_free) on success; on failure returns a negative errno, writes
 * the reason into err (may be NULL) and leaves no process behind. */
int supervisor_start(const struct supervisor_config *cfg, struct supervisor **ret_sv,
                     char *err, size_t errlen);

/* A supervisor with no process, in state "disabled", so that a slot whose evaluator
 * cannot run still shows up in /v1/devices with the reason. Its requests fail fast with
 * stage "crash", class "crash/disabled". Returns 0 and sets *ret_sv (caller owns), or
 * -EINVAL / -ENOMEM. */
int supervisor_new_disabled(const struct supervisor_config *cfg, const char *reason,
                            struct supervisor **ret_sv);

/* Sends {"id":n,"op":op,...args} (args borrowed; an object or NULL) and waits for the
 * reply until deadline_s (<= 0: the configured default for op). Always produces a reply
 * object in the protocol's shape, which the caller owns:
 *  - the evaluator's own reply, ok or not;
 *  - a "fatal":true reply as the evaluator wrote it; the process is then reaped,
 *    restarted and the task reloaded before this returns;
 *  - on timeout, death or a line that is not this request's reply (unparsable, wrong id,
 *    over max_line_bytes) a synthetic {"id","ok":false,"error":{"stage":"timeout"|"crash",
 *    "class":"timeout/<op>"|"crash/signal_<N>"|"crash/exit_<N>"|"crash/garbage_output",
 *    "message"},"fatal":false,"restarted":bool,"reloaded":bool}, after the process group
 *    was killed, reaped and restarted, and the last loaded task replayed;
 *  - in state failed or disabled, at once, class "crash/restart_limit" or "crash/disabled";
 *  - stage "crash", class "crash/start_failed" when the process was down (an earlier
 *    restart or replay failed, or no_restart is set) and could not be brought back.
 * Before sending, a process that died or wrote stray output since its last reply is
 * restarted (counted, logged, last_error set) so that this request is not blamed.
 * Restarts follow the storm guard: restart_limit restarts inside restart_window_s with no
 * normal reply in between (a successful task replay counts as one) mark the slot failed.
 * A successful load_task is remembered (deep copy) for replay after restarts.
 * Returns 0, or -EINVAL (bad arguments) / -ENOMEM without a reply. Only one thread may
 * call it (or supervisor_free) on a given supervisor at a time. */
int supervisor_request(struct supervisor *sv, const char *op, json_t *args,
                       double deadline_s, json_t **ret_reply);

/* Thread-safe snapshot: {"device": "0"|"cpu"|..., "index": int|null, "name", "capability",
 * "memory_bytes" (null when unknown), "state", "restarts", "current_task" (string|null),
 * "pid" (int|null), "last_error" (string|null), "info" (the ready line's device object)}.
 * Caller owns the result; NULL only when out of memory. */
json_t *supervisor_describe(struct supervisor *sv);

/* Restarts so far (thread-safe). */
unsigned long supervisor_restarts(struct supervisor *sv);

/* Current state (thread-safe). */
enum supervisor_state supervisor_state(struct supervisor *sv);

/* Text name of a state: "starting", "ready", ... (static storage). */
const char *supervisor_state_name(enum supervisor_state state);

/* Records which task the slot is working on (copied; NULL clears). Thread-safe. */
void supervisor_set_current_task(struct supervisor *sv, const char *task_id);

/* Process id of the evaluator now running, or -1 (thread-safe; for tests and logs). */
long supervisor_pid(struct supervisor *sv);

/* The class of the synthetic reply a request gets once the supervisor was aborted. */
#define SUPERVISOR_SHUTDOWN_CLASS "crash/shutdown"

/* Stops the evaluator for good, from any thread (the server's shutdown grace ran out):
 * SIGKILLs its process group. The request in flight, if any, and every later one get a
 * synthetic reply of stage "crash", class SUPERVISOR_SHUTDOWN_CLASS, and nothing is
 * restarted. Accepts NULL. */
void supervisor_abort(struct supervisor *sv);

/* Asks the evaluator to shut down (shutdown_deadline_s), then SIGTERM and SIGKILL its
 * whole process group, reaps it, and frees everything. Accepts NULL. No other thread may
 * use sv during or after the call. */
void supervisor_free(struct supervisor *sv);

/* ---- pool: every slot of the server, for /v1/devices and /metrics ---- */

struct supervisor_pool;

/* Returns an empty pool (caller owns, supervisor_pool_free) or NULL when out of memory. */
struct supervisor_pool *supervisor_pool_new(void);

/* Adds sv, taking it over (the pool frees it). Call before other threads read the pool.
 * Returns 0 or -ENOMEM (sv is then freed too, so the caller never leaks it). */
int supervisor_pool_add(struct supervisor_pool *pool, struct supervisor *sv);

/* Number of slots; 0 for NULL. */
size_t supervisor_pool_count(const struct supervisor_pool *pool);

/* Slot i (borrowed; owned by the pool), or NULL when out of range. */
struct supervisor *supervisor_pool_get(const struct supervisor_pool *pool, size_t i);

/* {"devices":[{"index","name","capability","memory_bytes","state","restarts",
 * "current_task","last_error"},...]}; {"devices":[]} for NULL. Caller owns; NULL when out of memory. */
json_t *supervisor_pool_describe(struct supervisor_pool *pool);

/* Sum of the restarts of every slot (for /metrics); 0 for NULL. */
unsigned long supervisor_pool_restarts(struct supervisor_pool *pool);

/* Frees every supervisor (see supervisor_free) and the pool. Accepts NULL. */
void supervisor_pool_free(struct supervisor_pool *pool);

/* ---- discovery and defaults ---- */

/* Number of CUDA devices the driver reports (dlopen libcuda.so.1, cuInit,
 * cuDeviceGetCount); 0 when there is no driver or it fails to initialize. */
int supervisor_count_gpus(void);

/* Default interpreter: $OPFORGE_PYTHON, else ~/.cache/opforge/venv/bin/python when it
 * exists, else "python3". Caller frees; NULL only when out of memory. */
char *supervisor_default_python(void);

/* Default evaluator: the entry script main.py of the evaluator package, first that exists
 * of: $OPFORGE_EVALUATOR (taken as is), <exe dir>/../share/opforge/evaluator/main.py (the
 * installed copy), <exe dir>/../gpu/evaluator/main.py,
 * <exe dir>/../../gpu/evaluator/main.py, <source dir>/gpu/evaluator/main.py where the
 * source dir comes from <exe dir>/meson-info/meson-info.json (an out-of-tree build dir).
 * Caller frees; NULL when none exists. */
char *supervisor_default_evaluator(void);

/* Default libopforge_gpu.so, first that exists of: $OPFORGE_GPU_LIB (taken as is),
 * <exe dir>/gpu/libopforge_gpu.so, <exe dir>/../lib/opforge/libopforge_gpu.so,
 * <exe dir>/../lib/libopforge_gpu.so. Caller frees; NULL when none exists. */
char *supervisor_default_gpu_lib(void);

#endif
