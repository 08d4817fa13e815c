/* What `opforge tune` knows of one task, from the server's replies and events. */
#include "cli/tune_task.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/bench_report.h"

static const char *const state_names[] = {
    [TUNE_PENDING] = "not_submitted", [TUNE_REFUSED] = "refused",
    [TUNE_QUEUED] = "queued",         [TUNE_RUNNING] = "running",
    [TUNE_SUCCEEDED] = "succeeded",   [TUNE_FAILED] = "failed",
    [TUNE_CANCELLED] = "cancelled",   [TUNE_LOST] = "lost",
};

void tune_task_init(struct tune_task *t, const char *file) {
  memset(t, 0, sizeof *t);
  t->file = file;
  cli_task_name(file, t->name);
  t->step = t->budget_steps = t->budget_seconds = -1;
  t->best_speedup = t->best_ms = t->eager_ms = t->library_share = NAN;
  t->created_s = t->running_s = t->finished_s = NAN;
}

enum tune_state tune_state_from_status(const char *status) {
  for (size_t i = TUNE_QUEUED; status && i < sizeof state_names / sizeof *state_names; i++)
    if (strcmp(status, state_names[i]) == 0)
      return (enum tune_state)i;
  return TUNE_PENDING;
}

const char *tune_state_name(enum tune_state state) {
  return (size_t)state < sizeof state_names / sizeof *state_names ? state_names[state] : "?";
}

bool tune_state_is_final(enum tune_state state) {
  return state == TUNE_REFUSED || state == TUNE_SUCCEEDED || state == TUNE_FAILED ||
         state == TUNE_CANCELLED || state == TUNE_LOST;
}

/* Copies obj[key] into out when it is a string. */
static void take_string(const json_t *obj, const char *key, char *out, size_t outlen) {
  const char *s = json_string_value(json_object_get(obj, key));
  if (s)
    snprintf(out, outlen, "%s", s);
}

/* Sets *out from obj[key] when it is an integer. */
static void take_long(const json_t *obj, const char *key, long *out) {
  const json_t *v = json_object_get(obj, key);
  if (json_is_integer(v))
    *out = (long)json_integer_value(v);
}

/* Sets *out from obj[key] when it is a positive number. */
static void take_positive(const json_t *obj, const char *key, double *out) {
  const json_t *v = json_object_get(obj, key);
  if (json_is_number(v) && json_number_value(v) > 0)
    *out = json_number_value(v);
}

/* Sets *out from an API time at obj[key], when it parses. */
static void take_time(const json_t *obj, const char *key, double *out) {
  const char *text = json_string_value(json_object_get(obj, key));
  double s;
  if (text && bench_parse_time(text, &s) == 0)
    *out = s;
}

/* Takes an error object {code, message} (borrowed, may be NULL). */
static void take_error(struct tune_task *t, const json_t *err) {
  if (!json_is_object(err))
    return;
  take_string(err, "code", t->error_code, sizeof t->error_code);
  take_string(err, "message", t->error_message, sizeof t->error_message);
}

void tune_task_take(struct tune_task *t, const json_t *task) {
  take_string(task, "id", t->id, sizeof t->id);
  enum tune_state state = tune_state_from_status(
      json_string_value(json_object_get(task, "status")));
  if (state != TUNE_PENDING)
    t->state = state;
  take_time(task, "created_at", &t->created_s);
  const json_t *progress = json_object_get(task, "progress");
  take_long(progress, "step", &t->step);
  take_long(progress, "budget_steps", &t->budget_steps);
  take_positive(progress, "best_speedup", &t->best_speedup);
  take_positive(progress, "best_ms", &t->best_ms);
  const json_t *share = json_object_get(progress, "library_share");
  if (json_is_number(share))
    t->library_share = json_number_value(share);
  take_positive(json_object_get(task, "baselines"), "eager_ms", &t->eager_ms);
  take_long(json_object_get(json_object_get(task, "options"), "budget"), "seconds",
            &t->budget_seconds);
  take_error(t, json_object_get(task, "error"));
}

void tune_task_take_event(struct tune_task *t, const json_t *event) {
  const char *type = json_string_value(json_object_get(event, "type"));
  const json_t *data = json_object_get(event, "data");
  if (!type)
    return;
  if (strcmp(type, "running") == 0 && isnan(t->running_s))
    take_time(event, "time", &t->running_s);
  if (strcmp(type, "step") == 0) {
    take_long(data, "step", &t->step);
    take_long(data, "budget_steps", &t->budget_steps);
    const char *outcome = json_string_value(json_object_get(data, "outcome"));
    if (json_object_get(data, "best_speedup"))
      take_positive(data, "best_speedup", &t->best_speedup);
    else if (outcome && strcmp(outcome, "correct") == 0) /* step 0 names no best */
      take_positive(data, "speedup", &t->best_speedup);
  } else if (strcmp(type, "profiled") == 0) {
    take_positive(json_object_get(data, "baselines"), "eager_ms", &t->eager_ms);
  } else if (strcmp(type, "finished") == 0) {
    take_time(event, "time", &t->finished_s);
    take_string(data, "stop_reason", t->stop_reason, sizeof t->stop_reason);
    take_long(data, "steps", &t->step);
    take_positive(data, "best_speedup", &t->best_speedup);
    take_positive(data, "best_ms", &t->best_ms);
  } else if (strcmp(type, "failed") == 0) {
    take_error(t, json_object_get(data, "error"));
  }
  enum tune_state state = tune_state_from_status(type);
  if (state != TUNE_PENDING)
    t->state = state;
}

void tune_task_take_refusal(struct tune_task *t, long status, const json_t *reply) {
  const json_t *err = json_object_get(reply, "error");
  t->state = TUNE_REFUSED;
  snprintf(t->error_code, sizeof t->error_code, "http_%ld", status);
  snprintf(t->error_message, sizeof t->error_message, "%s",
           "the server answered without an error body");
  take_error(t, err);
  take_string(err, "field", t->error_field, sizeof t->error_field);
}

bool tune_task_passes(const struct tune_task *t, double fail_under) {
  if (t->state != TUNE_SUCCEEDED)
    return false;
  return isnan(fail_under) || (!isnan(t->best_speedup) && t->best_speedup >= fail_under);
}

double tune_task_wall_s(const struct tune_task *t, double now_s) {
  double end = isnan(t->finished_s) ? now_s : t->finished_s;
  return isnan(t->created_s) ? NAN : end - t->created_s;
}
