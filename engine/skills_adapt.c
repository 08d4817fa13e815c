/* The adaptation pass of POST /v1/skills/adapt: what the failures of finished tasks teach
 * the skill memory, through the LLM proposer's prompts when an endpoint is configured,
 * else by grouping signatures. Each failure is recorded in its own transaction and at most
 * once (a candidate examined before is skipped), so passes may be repeated. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/skills.h"
#include "store/candidates.h"
#include "store/memory.h"
#include "store/tasks.h"

/* What the pass saw and did. */
struct pass {
  struct store *s;
  struct proposer proposer;     /* the LLM proposer, or zeroed */
  bool llm;
  struct proposal_usage usage;
  long long failures, examined, skipped, llm_calls;
  json_t *added, *confirmed;    /* {"<id>": true} */
};

/* The knob the strategy (a local memory node id of namespace ns) moves, into out ("" when
 * none). */
static void moved_knob(struct store *s, const char *ns, const char *strategy, char *out,
                       size_t len) {
  out[0] = '\0';
  json_t *node = NULL;
  if (strategy && store_memory_local_get(s, ns, strategy, &node) == STORE_OK) {
    const char *knob = json_string_value(json_object_get(json_object_get(node, "knob_move"), "knob"));
    snprintf(out, len, "%s", knob ? knob : "");
  }
  json_decref(node);
}

static void note(json_t *set, long long id) {
  char key[24];
  snprintf(key, sizeof key, "%lld", id);
  json_object_set_new(set, key, json_true());
}

/* Learns from one failed candidate of task. */
static void one(struct pass *p, json_t *task, json_t *profile, json_t *c) {
  const char *id = json_string_value(json_object_get(c, "id"));
  json_t *result = json_object_get(c, "result");
  json_t *failure = json_object_get(result, "failure");
  const char *stage = json_string_value(json_object_get(failure, "stage"));
  if (!json_is_object(failure))
    return;
  p->failures++;
  bool seen = false;
  if (!id || !skills_learns_from(stage) || json_object_get(result, "reused_from") ||
      store_skills_examined(p->s, id, &seen) != STORE_OK || seen ||
      (p->llm && p->llm_calls >= SKILLS_ADAPT_LLM_MAX &&
       !skills_numeric_mismatch(json_string_value(json_object_get(failure, "class"))))) {
    p->skipped++;
    return;
  }
  char moved[40];
  const char *ns = json_string_value(json_object_get(json_object_get(task, "options"), "memory"));
  moved_knob(p->s, ns ? ns : MEMORY_DEFAULT_NAMESPACE, json_string_value(json_object_get(c, "strategy")), moved,
             sizeof moved);
  struct skill_run sr = {.on = true};
  struct proposal_limit limit = {.tokens = 1LL << 62, .cost_usd = 1e300, .calls = INT_MAX};
  const char *family = json_string_value(json_object_get(json_object_get(task, "baselines"), "family"));
  struct skills_failure f = {
    .task_id = json_string_value(json_object_get(task, "id")), .candidate_id = id,
    .family = family, .candidate = c, .result = result, .task_profile = profile,
    .moved = moved[0] ? moved : NULL, .task_options = json_object_get(task, "options"),
    .proposer = p->llm ? &p->proposer : NULL, .usage = &p->usage, .limit = &limit,
  };
  struct skills_step st;
  long long before = p->usage.prompt_tokens + p->usage.completion_tokens;
  skills_step_prepare(&sr, p->s, &f, &st);
  if (p->usage.prompt_tokens + p->usage.completion_tokens > before)
    p->llm_calls++;
  if (st.update.action == SKILL_ACTION_NONE) {
    p->skipped++;
  } else if (store_skills_record(p->s, &st.update) == STORE_OK) {
    p->examined++;
    if (st.result.outcome == SKILL_OUTCOME_ADDED)
      note(p->added, st.result.skill_id);
    else if (st.result.outcome == SKILL_OUTCOME_CONFIRMED)
      note(p->confirmed, st.result.skill_id);
  }
  skills_step_clear(&st);
  skills_run_clear(&sr);
}

/* Every candidate of one task, in pages. */
static int one_task(struct pass *p, json_t *task) {
  const char *tid = json_string_value(json_object_get(task, "id"));
  json_t *profile = NULL;
  if (store_task_profile_get(p->s, tid, &profile) != STORE_OK)
    return STORE_ERROR;
  int64_t after = 0;
  int status = STORE_OK;
  for (;;) {
    json_t *items = NULL;
    status = store_candidates_list(p->s, tid, 200, after, &items);
    if (status != STORE_OK || json_array_size(items) == 0) {
      json_decref(items);
      break;
    }
    size_t i;
    json_t *c;
    json_array_foreach(items, i, c) {
      one(p, task, profile, c);
      after = json_integer_value(json_object_get(c, "seq"));
    }
    bool last = json_array_size(items) < 200;
    json_decref(items);
    if (last)
      break;
  }
  json_decref(profile);
  return status;
}

/* The rules of ids ({"<id>": true}) in their current state, without examples; those added
 * are left out of confirmed. Caller owns. */
static json_t *rules_of(struct store *s, json_t *ids, json_t *except) {
  json_t *out = json_array();
  const char *key;
  json_t *v;
  json_object_foreach(ids, key, v) {
    json_t *skill = NULL;
    if (except && json_object_get(except, key))
      continue;
    if (store_skill_get(s, strtoll(key, NULL, 10), &skill) == STORE_OK) {
      json_object_del(skill, "examples");
      json_array_append_new(out, skill);
    }
  }
  return out;
}

/* Checks that every task exists and is finished; loads them into *ret_tasks. */
static int load_tasks(struct store *s, json_t *task_ids, json_t **ret_tasks,
                      const char **ret_missing) {
  json_t *tasks = json_array();
  size_t i;
  json_t *id;
  json_array_foreach(task_ids, i, id) {
    json_t *task = NULL;
    int status = store_task_get(s, json_string_value(id), false, &task);
    if (status == STORE_OK &&
        !store_status_is_final(json_string_value(json_object_get(task, "status"))))
      status = STORE_CONFLICT;
    if (status != STORE_OK) {
      if (ret_missing)
        *ret_missing = json_string_value(id);
      json_decref(task);
      json_decref(tasks);
      return status;
    }
    json_array_append_new(tasks, task);
  }
  *ret_tasks = tasks;
  return STORE_OK;
}

int skills_adapt(struct store *s, const struct llm_settings *llm, json_t *task_ids,
                 json_t **ret_report, const char **ret_missing) {
  json_t *tasks = NULL;
  int status = load_tasks(s, task_ids, &tasks, ret_missing);
  if (status != STORE_OK)
    return status;
  struct pass p = {.s = s, .added = json_object(), .confirmed = json_object()};
  char why[512] = "";
  struct proposer_config cfg = {.llm = llm};
  if (proposer_open("llm", &cfg, &p.proposer, why, sizeof why) == 0 && p.proposer.reflect)
    p.llm = true;
  else
    log_debug("skills: adapt groups signatures: %s", why);
  size_t i;
  json_t *task;
  json_array_foreach(tasks, i, task) {
    if (status == STORE_OK)
      status = one_task(&p, task);
  }
  if (status == STORE_OK) {
    *ret_report = json_pack(
        "{s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:{s:I, s:I}}", "method", p.llm ? "llm" : "grouping",
        "tasks", (json_int_t)json_array_size(tasks), "failures", (json_int_t)p.failures,
        "examined", (json_int_t)p.examined, "skipped", (json_int_t)p.skipped, "added",
        rules_of(s, p.added, NULL), "confirmed", rules_of(s, p.confirmed, p.added), "llm",
        "prompt_tokens", (json_int_t)p.usage.prompt_tokens, "completion_tokens",
        (json_int_t)p.usage.completion_tokens);
    status = *ret_report ? STORE_OK : STORE_ERROR;
    log_info("skills: adapted over %zu task(s): %lld failure(s), %lld examined, %zu rule(s) "
             "added, %zu confirmed", json_array_size(tasks), p.failures, p.examined,
             json_object_size(p.added), json_object_size(p.confirmed));
  }
  proposer_clear(&p.proposer);
  json_decref(p.added);
  json_decref(p.confirmed);
  json_decref(tasks);
  return status;
}
