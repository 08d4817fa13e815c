/* The skill memory in the loop and in the adaptation pass (see skills.h). */
#include "engine/skills.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/partition.h"
#include "proposers/skill_constraint.h"
#include "store/candidates.h"
#include "store/memory.h"
#include "store/tasks.h"

_Static_assert(PROPOSAL_RULE_MAX == SKILL_RULE_MAX, "one bound for a rule's sentence");

/* Tasks whose correct candidates are read for the contrast of a group. */
#define CONTRAST_TASKS 8

bool skills_enabled(json_t *options) {
  json_t *on = json_object_get(json_object_get(options, "search"), "skills");
  return !json_is_false(on);
}

void skills_run_init(struct skill_run *sr, json_t *options) {
  *sr = (struct skill_run){.on = skills_enabled(options)};
}

void skills_run_clear(struct skill_run *sr) {
  json_decref(sr->active);
  json_decref(sr->refusals);
  *sr = (struct skill_run){0};
}

int skills_load(struct store *s, struct skill_run *sr) {
  if (!sr->on)
    return 0;
  json_t *active = NULL;
  if (store_skills_active(s, SKILLS_MIN_SCORE, &active) != STORE_OK)
    return -1;
  json_decref(sr->active);
  sr->active = active;
  return 0;
}

json_t *skills_for(const struct skill_run *sr, const char *family) {
  if (!sr->on)
    return NULL;
  json_t *out = json_array();
  size_t i;
  json_t *rule;
  json_array_foreach(sr->active, i, rule) {
    const char *f = json_string_value(json_object_get(rule, "family"));
    if (out && (!f || (family && strcmp(f, family) == 0)))
      json_array_append(out, rule);
  }
  return out;
}

void skills_note_refusal(struct skill_run *sr, json_t *failure) {
  long long id = skill_refusal_id(failure);
  if (id <= 0)
    return;
  if (!sr->refusals)
    sr->refusals = json_object();
  char key[24];
  snprintf(key, sizeof key, "%lld", id);
  json_int_t n = json_integer_value(json_object_get(sr->refusals, key));
  json_object_set_new(sr->refusals, key, json_integer(n + 1));
}

int skills_flush_refusals(struct store *s, struct skill_run *sr) {
  if (!json_object_size(sr->refusals))
    return 0;
  int rc = store_skills_add_refusals(s, sr->refusals) == STORE_OK ? 0 : -1;
  if (rc == 0)
    json_object_clear(sr->refusals);
  return rc;
}

/* ---- what a failure teaches ---- */

/* The part of candidate that failed: the region step a program's "step i (region k): "
 * message names (or its only region step), or the candidate itself when it is no
 * program; NULL when it cannot tell (borrowed). *ret_region is the region, -1 for a
 * whole-task candidate. */
static json_t *failed_part(json_t *candidate, const char *message, long *ret_region) {
  *ret_region = -1;
  json_t *program = json_object_get(candidate, "program");
  if (!json_is_object(program))
    return json_string_length(json_object_get(candidate, "source")) ? candidate : NULL;
  int step = -1, region = -1;
  if (!message || sscanf(message, "step %d (region %d)", &step, &region) != 2)
    region = -1;
  json_t *found = NULL, *s;
  size_t i, generated = 0;
  json_array_foreach(json_object_get(program, "steps"), i, s) {
    if (!json_is_string(json_object_get(s, "source")))
      continue;
    generated++;
    if (region < 0 || json_integer_value(json_object_get(s, "region")) == region)
      found = s;
  }
  if (!found || (region < 0 && generated != 1))
    return NULL;
  *ret_region = (long)json_integer_value(json_object_get(found, "region"));
  return found;
}

/* The failure log a reflection reads: stage, class, message and the compile log (when it
 * says more). Caller frees. */
static char *failure_log(const char *stage, const char *cls, const char *message,
                         const char *log) {
  size_t n = strlen(message) + (log ? strlen(log) : 0) + 256;
  char *text = malloc(n);
  if (!text)
    return NULL;
  bool extra = log && *log && !strstr(message, log);
  snprintf(text, n, "stage: %s\nclass: %s\n%s%s%s", stage, cls, message,
           extra ? "\ncompile log:\n" : "", extra ? log : "");
  return text;
}

/* Orders rules by score, highest first, then by position. */
static int by_score(const void *a, const void *b) {
  json_t *const *p = a, *const *q = b;
  json_int_t x = json_integer_value(json_object_get(*p, "score"));
  json_int_t y = json_integer_value(json_object_get(*q, "score"));
  if (x != y)
    return x < y ? 1 : -1;
  json_int_t i = json_integer_value(json_object_get(*p, "id"));
  json_int_t j = json_integer_value(json_object_get(*q, "id"));
  return (i > j) - (i < j);
}

/* The rules a reflection matches against: those of the family (or of none), highest score
 * first, as [{"id","rule","score"}] (caller owns). */
static json_t *dedup_rules(struct store *s, const char *family) {
  json_t *items = NULL, *out = json_array();
  if (!out || store_skills_list(s, family, -1, &items) != STORE_OK) {
    json_decref(out);
    return NULL;
  }
  size_t n = json_array_size(items);
  json_t **sorted = calloc(n ? n : 1, sizeof *sorted);
  for (size_t i = 0; sorted && i < n; i++)
    sorted[i] = json_array_get(items, i);
  if (sorted)
    qsort(sorted, n, sizeof *sorted, by_score);
  for (size_t i = 0; sorted && i < n; i++)
    json_array_append_new(out, json_pack("{s:O, s:O, s:O}", "id", json_object_get(sorted[i], "id"),
                                         "rule", json_object_get(sorted[i], "rule"), "score",
                                         json_object_get(sorted[i], "score")));
  free(sorted);
  json_decref(items);
  if (!sorted) {
    json_decref(out);
    return NULL;
  }
  return out;
}

/* Knob sets of correct candidates of family in the tasks of examples (caller owns). */
static json_t *contrast_of(struct store *s, json_t *examples, const char *family) {
  json_t *out = json_array(), *tasks = json_object();
  size_t i, j;
  json_t *e, *c;
  json_array_foreach(examples, i, e) {
    const char *task = json_string_value(json_object_get(e, "task_id"));
    if (!task || json_object_get(tasks, task) || json_object_size(tasks) >= CONTRAST_TASKS)
      continue;
    json_object_set_new(tasks, task, json_true());
    json_t *items = NULL;
    if (store_candidates_list(s, task, 200, 0, &items) != STORE_OK)
      continue;
    json_array_foreach(items, j, c) {
      if (!json_is_true(json_object_get(json_object_get(c, "result"), "correct")))
        continue;
      json_t *program = json_object_get(c, "program");
      if (!json_is_object(program)) {
        json_array_append_new(out, skill_knobs_of_options(json_object_get(c, "options")));
        continue;
      }
      size_t k;
      json_t *st;
      json_array_foreach(json_object_get(program, "steps"), k, st) {
        const char *f = json_string_value(json_object_get(st, "family"));
        if (f && family && strcmp(f, family) == 0)
          json_array_append_new(out, skill_knobs_of_options(json_object_get(st, "options")));
      }
    }
    json_decref(items);
  }
  json_decref(tasks);
  return out;
}

/* skill_group_fn: the templated rule of a group, with its constraint. */
static json_t *group_rule(void *ctx, struct store *s, json_t *examples, const char *signature,
                          const char *family) {
  (void)ctx;
  json_t *contrast = contrast_of(s, examples, family);
  json_t *constraint = skills_group_constraint(examples, contrast, family);
  json_decref(contrast);
  char rule[SKILL_RULE_MAX + 1];
  skills_rule_sentence(constraint, signature, family, rule);
  return json_pack("{s:s, s:o}", "rule", rule, "constraint",
                   constraint ? constraint : json_null());
}

/* Asks the proposer for its verdict on the failure and sets the update's action. */
static void reflect(struct store *s, const struct skills_failure *f, json_t *part,
                    const char *stage, const char *cls, const char *message, const char *log,
                    struct skills_step *st) {
  if (skills_numeric_mismatch(cls))
    return;
  json_t *rules = dedup_rules(s, st->update.example.family);
  char *text = failure_log(stage, cls, message, log);
  struct skill_reflection req = {
    .task_id = f->task_id, .task_options = f->task_options, .family = st->update.example.family,
    .source = json_string_value(json_object_get(part, "source")), .failure = text,
    .rules = rules, .usage = f->usage, .limit = f->limit,
  };
  struct skill_verdict v;
  char why[512];
  if (!rules || !text) {
    log_error("skills: out of memory reflecting on task %s", f->task_id);
  } else if (f->proposer->reflect(f->proposer->self, &req, &v, why, sizeof why) != 0) {
    log_warn("skills: task %s: no reflection on candidate %s: %s", f->task_id,
             f->candidate_id ? f->candidate_id : "?", why);
  } else if (v.kind == SKILL_VERDICT_NONE) {
    st->update.action = SKILL_ACTION_EXAMINED;
  } else {
    snprintf(st->rule, sizeof st->rule, "%s", v.rule);
    st->update.rule = st->rule;
    st->update.origin = "llm";
    st->update.action = v.kind == SKILL_VERDICT_DUPLICATE ? SKILL_ACTION_CONFIRM : SKILL_ACTION_NEW;
    st->update.match_id = v.match_id;
  }
  json_decref(rules);
  free(text);
}

void skills_step_prepare(struct skill_run *sr, struct store *s, const struct skills_failure *f,
                         struct skills_step *ret) {
  memset(ret, 0, sizeof *ret);
  ret->refusals = sr->refusals;
  sr->refusals = NULL;
  ret->update = (struct skill_update){.action = SKILL_ACTION_NONE, .refusals = ret->refusals,
                                      .result = &ret->result};
  json_t *failure = json_object_get(f->result, "failure");
  const char *stage = json_string_value(json_object_get(failure, "stage"));
  const char *cls = json_string_value(json_object_get(failure, "class"));
  const char *message = json_string_value(json_object_get(failure, "message"));
  if (!sr->on || !json_is_object(failure) || !skills_learns_from(stage) ||
      json_object_get(f->result, "reused_from"))
    return;
  message = message ? message : "";
  const char *log = json_string_value(json_object_get(json_object_get(f->result, "compile"), "log"));
  long region = -1;
  json_t *part = failed_part(f->candidate, message, &region);
  const char *family = json_string_value(json_object_get(part, "family"));
  snprintf(ret->family, sizeof ret->family, "%s", family ? family : f->family ? f->family : "");
  bool compile = strcmp(stage, "compile") == 0;
  skills_signature(stage, cls, compile && log && *log && !strstr(message, "error") ? log : message,
                   ret->signature, sizeof ret->signature);
  json_t *profile = NULL;
  if (f->partition && region >= 0 && (size_t)region < f->partition->n)
    profile = f->partition->regions[region].profile;
  else if (f->partition && region < 0 && part && f->partition->n == 1)
    profile = f->partition->regions[0].profile;
  else if (region < 0 && part)
    profile = f->task_profile;
  ret->knobs = part ? skill_knobs_of_options(json_object_get(part, "options")) : NULL;
  ret->features = profile ? skill_profile_features(profile) : NULL;
  ret->message = strdup(message);
  ret->update.example = (struct skill_example){
    .task_id = f->task_id, .candidate_id = f->candidate_id,
    .family = ret->family[0] ? ret->family : NULL, .failure_class = cls ? cls : stage,
    .signature = ret->signature, .message = ret->message, .moved = f->moved,
    .knobs = ret->knobs, .features = ret->features,
  };
  if (f->proposer && f->proposer->reflect) {
    reflect(s, f, part, stage, cls ? cls : stage, message, log, ret);
  } else {
    ret->update.action = SKILL_ACTION_GROUP;
    ret->update.group_tasks = SKILLS_GROUP_TASKS;
    ret->update.make_rule = group_rule;
  }
}

void skills_step_clear(struct skills_step *st) {
  free(st->message);
  json_decref(st->knobs);
  json_decref(st->features);
  json_decref(st->refusals);
  memset(st, 0, sizeof *st);
}
