/* The supervisor's state machine (see supervisor.h): start, requests and their
 * failures, kill/restart/reload, the restart storm guard, and shutdown. */
#include "gpu/supervisor/internal.h"
#include "base/log.h"

#include <unistd.h>

/* ---- start ---- */

/* Spawns a process and waits for its ready line; on failure nothing is left running. */
static int sv_launch(struct supervisor *sv, char *err, size_t errlen) {
  sv_set_state(sv, SUPERVISOR_STARTING);
  int rc = sv_spawn(sv, err, errlen);
  if (rc < 0)
    return rc;
  double deadline = now_s() + sv->cfg.start_deadline_s;
  char *line;
  size_t len;
  enum io_result io = sv_read_line(sv, deadline, &line, &len);
  if (io == IO_OK) {
    rc = sv_take_ready_line(sv, line, len, err, errlen);
    sv_consume_line(sv);
  } else if (io == IO_TIMEOUT) {
    set_err(err, errlen, "no ready line within %g s (timeout/start)",
            sv->cfg.start_deadline_s);
    rc = -ETIMEDOUT;
  } else if (io == IO_EOF) {
    char cls[64];
    sv_explain_eof(sv, cls, sizeof cls);
    set_err(err, errlen, "evaluator ended before its ready line (%s); see its stderr", cls);
    rc = -ECHILD;
  } else {
    set_err(err, errlen, "ready line unreadable or longer than %zu bytes "
            "(crash/garbage_output)", sv->cfg.max_line_bytes);
    rc = -EPROTO;
  }
  if (rc < 0) {
    sv_kill_and_reap(sv);
    return rc;
  }
  sv_set_state(sv, SUPERVISOR_READY);
  return 0;
}

/* Copies cfg into sv, strings included (sv->cfg's pointers then name the copies).
 * False when out of memory. */
static bool copy_config(struct supervisor *sv, const struct supervisor_config *cfg) {
  sv->cfg = *cfg;
  sv->python = (cfg->python && cfg->python[0]) ? strdup(cfg->python) : NULL;
  sv->evaluator_path = dup_or_null(cfg->evaluator_path);
  sv->gpu_lib_path = dup_or_null(cfg->gpu_lib_path);
  sv->cache_dir = dup_or_null(cfg->cache_dir);
  sv->device = strdup(cfg->device ? cfg->device : "cpu");
  sv->stderr_path = dup_or_null(cfg->stderr_path);
  sv->cfg.python = sv->python;
  sv->cfg.evaluator_path = sv->evaluator_path;
  sv->cfg.gpu_lib_path = sv->gpu_lib_path;
  sv->cfg.cache_dir = sv->cache_dir;
  sv->cfg.device = sv->device;
  sv->cfg.stderr_path = sv->stderr_path;
  return sv->device && (sv->python || !cfg->python || !cfg->python[0]) &&
         (sv->evaluator_path || !cfg->evaluator_path) &&
         (sv->gpu_lib_path || !cfg->gpu_lib_path) && (sv->cache_dir || !cfg->cache_dir) &&
         (sv->stderr_path || !cfg->stderr_path);
}

/* Replaces the numbers of c left at zero (or negative) by the defaults. */
static void apply_defaults(struct supervisor_config *c) {
  struct supervisor_config d;
  supervisor_config_defaults(&d);
  if (c->compile_eval_deadline_s <= 0)
    c->compile_eval_deadline_s = d.compile_eval_deadline_s;
  if (c->profile_deadline_s <= 0)
    c->profile_deadline_s = d.profile_deadline_s;
  if (c->load_deadline_s <= 0)
    c->load_deadline_s = d.load_deadline_s;
  if (c->start_deadline_s <= 0)
    c->start_deadline_s = d.start_deadline_s;
  if (c->shutdown_deadline_s <= 0)
    c->shutdown_deadline_s = d.shutdown_deadline_s;
  if (c->max_line_bytes == 0)
    c->max_line_bytes = d.max_line_bytes;
  if (c->restart_limit <= 0)
    c->restart_limit = d.restart_limit;
  if (c->restart_limit > MAX_RESTART_LIMIT)
    c->restart_limit = MAX_RESTART_LIMIT;
  if (c->restart_window_s <= 0)
    c->restart_window_s = d.restart_window_s;
}

/* Allocates a supervisor with no process (caller owns; NULL when out of memory). */
static struct supervisor *sv_alloc(const struct supervisor_config *cfg) {
  struct supervisor *sv = calloc(1, sizeof *sv);
  if (!sv)
    return NULL;
  pthread_mutex_init(&sv->lock, NULL);
  atomic_init(&sv->restarts, 0);
  atomic_init(&sv->aborted, false);
  sv->pid = -1;
  sv->shown_pid = -1;
  sv->to_child = sv->from_child = sv->pidfd = -1;
  sv->next_id = 1;
  sv->state = SUPERVISOR_STARTING;
  if (!copy_config(sv, cfg)) {
    supervisor_free(sv);
    return NULL;
  }
  apply_defaults(&sv->cfg);
  return sv;
}

void supervisor_config_defaults(struct supervisor_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->compile_eval_deadline_s = 60;
  cfg->profile_deadline_s = 600;
  cfg->load_deadline_s = 120;
  cfg->start_deadline_s = 120;
  cfg->shutdown_deadline_s = 2;
  cfg->max_line_bytes = 16u << 20;
  cfg->restart_limit = 5;
  cfg->restart_window_s = 60;
}

int supervisor_start(const struct supervisor_config *cfg, struct supervisor **ret_sv,
                     char *err, size_t errlen) {
  if (!cfg || !ret_sv || !cfg->evaluator_path) {
    set_err(err, errlen, "no evaluator path configured");
    return -EINVAL;
  }
  struct supervisor *sv = sv_alloc(cfg);
  if (!sv) {
    set_err(err, errlen, "out of memory");
    return -ENOMEM;
  }
  int rc = sv_launch(sv, err, errlen);
  if (rc < 0) {
    supervisor_free(sv);
    return rc;
  }
  *ret_sv = sv;
  return 0;
}

int supervisor_new_disabled(const struct supervisor_config *cfg, const char *reason,
                            struct supervisor **ret_sv) {
  if (!cfg || !ret_sv)
    return -EINVAL;
  struct supervisor *sv = sv_alloc(cfg);
  if (!sv)
    return -ENOMEM;
  sv->state = SUPERVISOR_DISABLED;
  sv->last_error = dup_or_null(reason ? reason : "disabled");
  *ret_sv = sv;
  return 0;
}

/* ---- restarts ---- */

/* The storm guard: true when restart_limit restarts already happened inside the window
 * without a normal reply since. Forgets restarts that fell out of the window. */
static bool storm_exceeded(struct supervisor *sv, double now) {
  size_t kept = 0;
  for (size_t i = 0; i < sv->n_restart_times; i++)
    if (now - sv->restart_times[i] < sv->cfg.restart_window_s)
      sv->restart_times[kept++] = sv->restart_times[i];
  sv->n_restart_times = kept;
  return kept >= (size_t)sv->cfg.restart_limit;
}

/* Any reply in the protocol's shape proves the evaluator works: the storm is over. */
static void storm_reset(struct supervisor *sv) {
  sv->n_restart_times = 0;
}

/* Replays the last successful load_task in the fresh process. True when it loaded. A
 * process that fails the replay by timeout, death or garbage is killed and left down
 * (the next request restarts it, under the storm guard); a normal ok:false keeps it. */
static bool sv_reload(struct supervisor *sv) {
  size_t len;
  json_int_t id = sv->next_id++;
  char *line = sv_request_line("load_task", sv->last_load, id, &len);
  if (!line)
    return false;
  json_t *reply = NULL;
  char why[512] = "";
  enum exchange ex = sv_exchange(sv, line, len, id, now_s() + sv->cfg.load_deadline_s,
                                 &reply, why, sizeof why);
  free(line);
  char msg[700];
  if (ex == EX_REPLY && json_is_true(json_object_get(reply, "ok"))) {
    storm_reset(sv);
    json_decref(reply);
    return true;
  }
  if (ex == EX_REPLY && !json_is_true(json_object_get(reply, "fatal"))) {
    storm_reset(sv);
    json_t *e = json_object_get(reply, "error");
    snprintf(msg, sizeof msg, "replaying load_task after a restart failed: %s: %s",
             str_or(json_object_get(e, "class")),
             str_or(json_object_get(e, "message")));
    json_decref(sv->last_load);
    sv->last_load = NULL;
  } else {
    char cls[64];
    if (ex == EX_EOF)
      sv_explain_eof(sv, cls, sizeof cls);
    snprintf(msg, sizeof msg, "replaying load_task after a restart failed: %s",
             ex == EX_TIMEOUT ? "timeout/load_task"
             : ex == EX_REPLY ? "fatal reply"
             : ex == EX_EOF   ? cls
                              : why);
    sv_kill_and_reap(sv);
  }
  json_decref(reply);
  sv_log(sv, "%s", msg);
  sv_set_last_error(sv, msg);
  return false;
}

/* Kills what is left of the process, then (storm guard permitting) starts a new one and
 * replays the last load_task. reason (NULL: the process is already down and last_error
 * says why) is recorded as the last error. Returns 0 when a new process was started
 * (*ret_reloaded says whether the task is loaded in it; the process may have been lost
 * again during the replay), or a negative errno with the reason in err. */
static int sv_restart(struct supervisor *sv, const char *reason, bool *ret_reloaded,
                      char *err, size_t errlen) {
  sv_kill_and_reap(sv);
  if (reason)
    sv_set_last_error(sv, reason);
  if (!reason)
    reason = "evaluator down";
  if (sv->cfg.no_restart) {
    set_err(err, errlen, "evaluator down and restarts are disabled (%s)", reason);
    sv_set_state(sv, SUPERVISOR_RESTARTING);
    return -ECANCELED;
  }
  double now = now_s();
  if (storm_exceeded(sv, now)) {
    set_err(err, errlen, "%d restarts within %g s; evaluator marked failed",
            sv->cfg.restart_limit, sv->cfg.restart_window_s);
    sv_log(sv, "%s (last: %s)", err, reason);
    sv_set_state(sv, SUPERVISOR_FAILED);
    return -EAGAIN;
  }
  sv->restart_times[sv->n_restart_times++] = now;
  atomic_fetch_add(&sv->restarts, 1);
  sv_log(sv, "%s; restarting", reason);
  sv_set_state(sv, SUPERVISOR_RESTARTING);
  int rc = sv_launch(sv, err, errlen);
  if (rc < 0) {
    sv_log(sv, "restart failed: %s", err);
    sv_set_last_error(sv, err);
    sv_set_state(sv, SUPERVISOR_RESTARTING);
    return rc;
  }
  bool reloaded = sv->last_load ? sv_reload(sv) : false;
  sv_set_state(sv, sv->pid > 0 ? SUPERVISOR_READY : SUPERVISOR_RESTARTING);
  *ret_reloaded = reloaded;
  return 0;
}

/* The reply of a request to an aborted supervisor (see supervisor_abort). */
static json_t *sv_aborted_reply(json_int_t id) {
  return sv_synthetic_reply(id, EVAL_CRASH, SUPERVISOR_SHUTDOWN_CLASS,
                            "the server is shutting down: the evaluator was stopped", false,
                            false);
}

/* Turns a failed exchange into a synthetic reply, after kill, restart and reload. */
static json_t *sv_fail_request(struct supervisor *sv, json_int_t id, enum eval_stage stage,
                               const char *cls, const char *message) {
  if (atomic_load(&sv->aborted)) {
    sv_kill_and_reap(sv);
    return sv_aborted_reply(id);
  }
  char reason[800], err[512] = "";
  snprintf(reason, sizeof reason, "%s: %s", cls, message);
  bool reloaded = false;
  int rc = sv_restart(sv, reason, &reloaded, err, sizeof err);
  bool restarted = rc == 0;
  char full[1400];
  if (restarted)
    snprintf(full, sizeof full, "%s; evaluator restarted%s", message,
             reloaded ? ", task reloaded" : "");
  else if (rc == -ECANCELED)
    snprintf(full, sizeof full, "%s; evaluator stopped (restarts disabled)", message);
  else
    snprintf(full, sizeof full, "%s; restart failed: %s", message, err);
  return sv_synthetic_reply(id, stage, cls, full, restarted, reloaded);
}

/* ---- requests ---- */

/* The configured deadline of op in seconds. */
static double default_deadline(const struct supervisor *sv, const char *op) {
  if (strcmp(op, "profile") == 0)
    return sv->cfg.profile_deadline_s;
  if (strcmp(op, "load_task") == 0)
    return sv->cfg.load_deadline_s;
  if (strcmp(op, "shutdown") == 0)
    return sv->cfg.shutdown_deadline_s;
  return sv->cfg.compile_eval_deadline_s;
}

/* Before a request: the process must exist and have said nothing since its last reply.
 * A process that died in between, or wrote stray output, is restarted (counted and
 * logged) so that this request does not inherit the blame. Returns NULL when ready to
 * send, or a failure reply (caller owns) when no process could be had. */
static json_t *sv_preflight(struct supervisor *sv, json_int_t id) {
  char reason[400] = "", err[512] = "";
  if (sv->pid > 0) {
    if (sv_stream_quiet(sv))
      return NULL;
    char *line;
    size_t len;
    enum io_result io = sv_read_line(sv, now_s(), &line, &len);
    if (io == IO_EOF) {
      char cls[64];
      sv_explain_eof(sv, cls, sizeof cls);
      snprintf(reason, sizeof reason, "%s: evaluator %s between requests", cls,
               strcmp(cls, "crash/garbage_output") == 0 ? "closed its stdout" : "died");
    } else {
      snprintf(reason, sizeof reason,
               "crash/garbage_output: evaluator wrote output between requests");
    }
  }
  bool reloaded = false;
  int rc = sv_restart(sv, reason[0] ? reason : NULL, &reloaded, err, sizeof err);
  if (rc == 0 && sv->pid > 0)
    return NULL;
  if (rc == -EAGAIN)
    return sv_synthetic_reply(id, EVAL_CRASH, "crash/restart_limit", err, false,
                              false);
  if (rc == 0) {
    pthread_mutex_lock(&sv->lock);
    snprintf(err, sizeof err, "evaluator lost again while reloading the task: %s",
             sv->last_error ? sv->last_error : "?");
    pthread_mutex_unlock(&sv->lock);
  }
  return sv_synthetic_reply(id, EVAL_CRASH, "crash/start_failed", err, false, false);
}

/* Requests refused without touching a process: failed, disabled or aborted slots. */
static json_t *sv_refuse(struct supervisor *sv, json_int_t id) {
  if (atomic_load(&sv->aborted))
    return sv_aborted_reply(id);
  pthread_mutex_lock(&sv->lock);
  enum supervisor_state state = sv->state;
  char msg[600];
  snprintf(msg, sizeof msg, "%s: %s",
           state == SUPERVISOR_FAILED ? "evaluator failed after repeated restarts"
                                      : "evaluator disabled",
           sv->last_error ? sv->last_error : "no detail");
  pthread_mutex_unlock(&sv->lock);
  if (state != SUPERVISOR_FAILED && state != SUPERVISOR_DISABLED)
    return NULL;
  const char *cls = state == SUPERVISOR_FAILED ? "crash/restart_limit" : "crash/disabled";
  return sv_synthetic_reply(id, EVAL_CRASH, cls, msg, false, false);
}

/* A "fatal":true reply: the process is on its way out; let it exit, then make sure of
 * the whole group, restart and reload. */
static void sv_after_fatal(struct supervisor *sv, json_t *reply) {
  sv_wait_exit(sv->pid, sv->cfg.shutdown_deadline_s, NULL);
  if (atomic_load(&sv->aborted)) {
    sv_kill_and_reap(sv);
    return;
  }
  json_t *e = json_object_get(reply, "error");
  char reason[600], err[512];
  snprintf(reason, sizeof reason, "fatal reply %s: %s",
           str_or(json_object_get(e, "class")),
           str_or(json_object_get(e, "message")));
  bool reloaded = false;
  sv_restart(sv, reason, &reloaded, err, sizeof err);
}

/* Handles a reply that arrived in time. Returns it (ownership passes through). */
static json_t *sv_took_reply(struct supervisor *sv, const char *op, json_t *args,
                             json_t *reply) {
  storm_reset(sv);
  if (json_is_true(json_object_get(reply, "fatal"))) {
    sv_after_fatal(sv, reply);
    return reply;
  }
  if (strcmp(op, "load_task") == 0 && json_is_true(json_object_get(reply, "ok")))
    sv->last_load = args ? json_deep_copy(args) : json_object();
  sv_set_state(sv, SUPERVISOR_READY);
  return reply;
}

/* Builds the synthetic reply of a failed exchange (and restarts). */
static json_t *sv_exchange_failed(struct supervisor *sv, enum exchange ex, const char *op,
                                  json_int_t id, double deadline_s, const char *why) {
  char cls[128], msg[700];
  if (ex == EX_TIMEOUT) {
    sv_kill_and_reap(sv);
    snprintf(cls, sizeof cls, "timeout/%s", op);
    snprintf(msg, sizeof msg, "no reply to %s within %g s", op, deadline_s);
    return sv_fail_request(sv, id, EVAL_TIMEOUT, cls, msg);
  }
  if (ex == EX_EOF) {
    sv_explain_eof(sv, cls, sizeof cls);
    if (strcmp(cls, "crash/garbage_output") == 0)
      snprintf(msg, sizeof msg, "during %s: %s but kept running", op, why);
    else
      snprintf(msg, sizeof msg, "evaluator died during %s", op);
    return sv_fail_request(sv, id, EVAL_CRASH, cls, msg);
  }
  snprintf(msg, sizeof msg, "during %s: %s", op, why);
  return sv_fail_request(sv, id, EVAL_CRASH, "crash/garbage_output", msg);
}

int supervisor_request(struct supervisor *sv, const char *op, json_t *args,
                       double deadline_s, json_t **ret_reply) {
  if (!sv || !op || !ret_reply || (args && !json_is_object(args)))
    return -EINVAL;
  if (deadline_s <= 0)
    deadline_s = default_deadline(sv, op);
  json_int_t id = sv->next_id++;
  json_t *reply = sv_refuse(sv, id);
  if (!reply)
    reply = sv_preflight(sv, id);
  if (reply) {
    *ret_reply = reply;
    return 0;
  }
  size_t len;
  char *line = sv_request_line(op, args, id, &len);
  if (!line)
    return -ENOMEM;
  if (strcmp(op, "load_task") == 0) {
    json_decref(sv->last_load);  /* a new task replaces the old even if it fails */
    sv->last_load = NULL;
  }
  sv_set_state(sv, SUPERVISOR_BUSY);
  char why[512] = "";
  enum exchange ex = sv_exchange(sv, line, len, id, now_s() + deadline_s, &reply, why,
                                 sizeof why);
  free(line);
  if (ex == EX_REPLY)
    reply = sv_took_reply(sv, op, args, reply);
  else
    reply = sv_exchange_failed(sv, ex, op, id, deadline_s, why);
  if (!reply)
    return -ENOMEM;
  *ret_reply = reply;
  return 0;
}

/* ---- shutdown ---- */

/* Asks politely (shutdown request, then EOF on stdin, then SIGTERM), then SIGKILLs the
 * group and reaps. Each polite step gets shutdown_deadline_s. */
static void sv_stop(struct supervisor *sv) {
  double grace = sv->cfg.shutdown_deadline_s;
  json_int_t id = sv->next_id++;
  size_t len;
  char *line = sv_request_line("shutdown", NULL, id, &len);
  bool answered = false;
  if (line && sv->len == 0) {
    json_t *reply = NULL;
    char why[256];
    answered = sv_exchange(sv, line, len, id, now_s() + grace, &reply, why, sizeof why) ==
               EX_REPLY;
    json_decref(reply);
  }
  free(line);
  sv_close_fd(&sv->to_child);
  bool exited = answered && sv_wait_exit(sv->pid, grace, NULL);
  if (!exited) {
    kill(-sv->pid, SIGTERM);
    sv_wait_exit(sv->pid, grace, NULL);
  }
  sv_kill_and_reap(sv);
}

void supervisor_free(struct supervisor *sv) {
  if (!sv)
    return;
  if (sv->pid > 0)
    sv_stop(sv);
  sv_reap_pending(sv, 5.0);
  if (sv->n_pending > 0)
    sv_log(sv, "%zu killed evaluator processes could not be reaped", sv->n_pending);
  sv_close_fd(&sv->to_child);
  sv_close_fd(&sv->from_child);
  sv_close_fd(&sv->pidfd);
  free(sv->buf);
  json_decref(sv->last_load);
  json_decref(sv->device_info);
  free(sv->current_task);
  free(sv->last_error);
  free(sv->python);
  free(sv->evaluator_path);
  free(sv->gpu_lib_path);
  free(sv->cache_dir);
  free(sv->device);
  free(sv->stderr_path);
  pthread_mutex_destroy(&sv->lock);
  free(sv);
}
