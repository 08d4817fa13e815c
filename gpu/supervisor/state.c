/* The slot state other threads read (see supervisor.h): /v1/devices' description, the
 * state, restarts, pid and current task, and the setters the request thread uses. */
#include "gpu/supervisor/internal.h"
#include "base/log.h"

/* ---- setters (the request thread) ---- */

/* Logs a warning naming the slot's device; the message is printf-formatted. */
void sv_log(struct supervisor *sv, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  log_warn("evaluator[%s]: %s", sv->device, msg);
}

/* Sets the state other threads see. */
void sv_set_state(struct supervisor *sv, enum supervisor_state state) {
  pthread_mutex_lock(&sv->lock);
  sv->state = state;
  pthread_mutex_unlock(&sv->lock);
}

/* Records the newest failure for /v1/devices (copied). */
void sv_set_last_error(struct supervisor *sv, const char *msg) {
  char *copy = dup_or_null(msg);
  pthread_mutex_lock(&sv->lock);
  free(sv->last_error);
  sv->last_error = copy;
  pthread_mutex_unlock(&sv->lock);
}

/* Sets the process id: sv->pid for the request thread, its copy for the others. */
void sv_set_pid(struct supervisor *sv, pid_t pid) {
  sv->pid = pid;
  pthread_mutex_lock(&sv->lock);
  sv->shown_pid = pid > 0 ? (long)pid : -1;
  pthread_mutex_unlock(&sv->lock);
}

/* ---- getters (any thread) ---- */

const char *supervisor_state_name(enum supervisor_state state) {
  switch (state) {
  case SUPERVISOR_STARTING: return "starting";
  case SUPERVISOR_READY: return "ready";
  case SUPERVISOR_BUSY: return "busy";
  case SUPERVISOR_RESTARTING: return "restarting";
  case SUPERVISOR_FAILED: return "failed";
  case SUPERVISOR_DISABLED: return "disabled";
  }
  return "unknown";
}

unsigned long supervisor_restarts(struct supervisor *sv) {
  return sv ? atomic_load(&sv->restarts) : 0;
}

enum supervisor_state supervisor_state(struct supervisor *sv) {
  pthread_mutex_lock(&sv->lock);
  enum supervisor_state state = sv->state;
  pthread_mutex_unlock(&sv->lock);
  return state;
}

long supervisor_pid(struct supervisor *sv) {
  pthread_mutex_lock(&sv->lock);
  long pid = sv->shown_pid;
  pthread_mutex_unlock(&sv->lock);
  return pid;
}

void supervisor_set_current_task(struct supervisor *sv, const char *task_id) {
  char *copy = dup_or_null(task_id);
  pthread_mutex_lock(&sv->lock);
  free(sv->current_task);
  sv->current_task = copy;
  pthread_mutex_unlock(&sv->lock);
}

/* Slot index: the server's GPU index (--device) when it is a number, else the device
 * info's. A sandboxed evaluator sees only its own GPU, as index 0. */
static json_t *describe_index(const char *device, json_t *info) {
  char *end;
  errno = 0;
  long n = strtol(device, &end, 10);
  if (errno == 0 && end != device && *end == '\0' && n >= 0)
    return json_integer(n);
  json_t *index = json_object_get(info, "index");
  if (json_is_integer(index))
    return json_integer(json_integer_value(index));
  return json_null();
}

/* Name of the device: the driver's name, else the type ("cpu", "meta"), else --device. */
static json_t *describe_name(const char *device, json_t *info) {
  const char *name = json_string_value(json_object_get(info, "name"));
  if (!name)
    name = json_string_value(json_object_get(info, "type"));
  return json_string(name ? name : device);
}

/* The value of key in info when it has type want, else null (a new reference). */
static json_t *info_field(json_t *info, const char *key, json_type want) {
  json_t *v = json_object_get(info, key);
  return (v && json_typeof(v) == want) ? json_deep_copy(v) : json_null();
}

json_t *supervisor_describe(struct supervisor *sv) {
  pthread_mutex_lock(&sv->lock);
  json_t *info = sv->device_info ? json_deep_copy(sv->device_info) : json_object();
  json_t *out = json_pack(
      "{s:s,s:o,s:o,s:o,s:o,s:s,s:I,s:o,s:o,s:o}", "device", sv->device,
      "index", describe_index(sv->device, info), "name", describe_name(sv->device, info),
      "capability", info_field(info, "capability", JSON_STRING),
      "memory_bytes", info_field(info, "memory_bytes", JSON_INTEGER),
      "state", supervisor_state_name(sv->state),
      "restarts", (json_int_t)atomic_load(&sv->restarts),
      "current_task", sv->current_task ? json_string(sv->current_task) : json_null(),
      "pid", sv->shown_pid > 0 ? json_integer(sv->shown_pid) : json_null(),
      "last_error", sv->last_error ? json_string(sv->last_error) : json_null());
  pthread_mutex_unlock(&sv->lock);
  if (out && info && json_object_set_new(out, "info", info) == 0)
    return out;
  json_decref(info);
  json_decref(out);
  return NULL;
}

void supervisor_abort(struct supervisor *sv) {
  if (!sv)
    return;
  pthread_mutex_lock(&sv->lock);
  atomic_store(&sv->aborted, true);
  long pid = sv->shown_pid;
  /* Under the lock: the request thread reaps and clears shown_pid under it too, so the
   * group id is still ours. */
  if (pid > 0)
    kill(-(pid_t)pid, SIGKILL);
  pthread_mutex_unlock(&sv->lock);
}
