/* The typed evaluation outcome (see outcome.h). */
#include "base/outcome.h"

#include <stdio.h>
#include <string.h>

static const char *const stage_names[EVAL_STAGE__COUNT] = {
  [EVAL_CORRECT] = "correct",         [EVAL_PARSE] = "parse",
  [EVAL_COMPILE] = "compile",         [EVAL_LOAD] = "load",
  [EVAL_LAUNCH] = "launch",           [EVAL_CORRECTNESS] = "correctness",
  [EVAL_CHECK] = "check",             [EVAL_TIMEOUT] = "timeout",
  [EVAL_CRASH] = "crash",             [EVAL_PROTOCOL] = "protocol",
  [EVAL_PROFILE] = "profile",
};

const char *eval_stage_name(enum eval_stage stage) {
  return (unsigned)stage < EVAL_STAGE__COUNT ? stage_names[stage] : "correctness";
}

int eval_stage_from_name(const char *name, enum eval_stage *ret) {
  if (!name)
    return -1;
  for (int i = EVAL_PARSE; i < EVAL_STAGE__COUNT; i++)
    if (strcmp(stage_names[i], name) == 0) {
      *ret = (enum eval_stage)i;
      return 0;
    }
  return -1;
}

bool eval_stage_environmental(enum eval_stage stage) {
  return stage == EVAL_CRASH || stage == EVAL_TIMEOUT || stage == EVAL_LOAD ||
         stage == EVAL_PROTOCOL || stage == EVAL_PROFILE;
}

void eval_outcome_read(json_t *result, struct eval_outcome *ret) {
  json_t *failure = json_object_get(result, "failure");
  *ret = (struct eval_outcome){.stage = EVAL_CORRECT};
  if (!json_is_true(json_object_get(result, "correct")) || json_is_object(failure)) {
    if (eval_stage_from_name(json_string_value(json_object_get(failure, "stage")),
                             &ret->stage) != 0)
      ret->stage = EVAL_CORRECTNESS;
    const char *cls = json_string_value(json_object_get(failure, "class"));
    snprintf(ret->cls, sizeof ret->cls, "%s", cls ? cls : "");
  }
  ret->time_ms = json_number_value(json_object_get(json_object_get(result, "time"), "median_ms"));
}
