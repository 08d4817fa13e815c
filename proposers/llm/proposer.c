/* The LLM proposer: a large step asks the endpoint for a new kernel and launch plan, a
 * small step for old/new edits of the region's current kernel (proposers/llm/prompt.h);
 * the answer is parsed strictly (proposers/llm/answer.h), and what each call cost is added
 * to the request's usage. The task's "llm" options may choose the model (from those the
 * server allows), the temperature and the completion cap; the endpoint and the key are the
 * server's alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "proposers/family.h"
#include "proposers/llm/answer.h"
#include "proposers/llm/client.h"
#include "proposers/llm/prompt.h"
#include "proposers/llm/settings.h"
#include "proposers/llm/skills.h"
#include "proposers/llm/text.h"
#include "proposers/proposer.h"

/* A region longer than this many call nodes is left to shorter regions and library steps:
 * one prompt should describe one fusable piece of work. */
#define LLM_MAX_REGION_NODES 24
/* A prompt's tokens before it is sent, at worst: one per byte (a token is never shorter
 * than a byte) and the chat template's own tokens around the messages. */
#define PROMPT_OVERHEAD_TOKENS 64
/* Fewer completion tokens than this left in the budget is too few for an answer. */
#define MIN_COMPLETION_TOKENS 256
/* The completion cap of the local choice: an id on one line, a little thinking before it. */
#define LLM_LOCAL_CHOICE_MAX_TOKENS 1024

struct llm_proposer {
  struct llm_settings s;
  struct llm_client *client;
};

/* What one request sends: the server's defaults with the task's overrides. */
struct call_options {
  const char *model;  /* borrowed from the settings or the task's options */
  double temperature;
  int max_tokens;
};

static int failure(json_t **ret_failure, const char *cls, const char *message) {
  *ret_failure = json_pack("{s:s, s:s, s:s}", "stage", "parse", "class", cls, "message", message);
  return -1;
}

/* Ops whose results no kernel can reproduce (random numbers) stay library steps. */
static bool random_op(const char *target) {
  static const char *const needles[] = {"rand", "dropout", "Dropout", "bernoulli",
                                        "multinomial", "normal_", "uniform_", "poisson", NULL};
  for (const char *const *n = needles; *n; n++)
    if (strstr(target, *n))
      return true;
  return false;
}

static int llm_supports(void *self, json_t *profile, const char **ret_family, char *why,
                        size_t whylen) {
  (void)self;
  size_t calls = 0, i;
  json_t *node;
  json_array_foreach(json_object_get(profile, "graph"), i, node) {
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *target = json_string_value(json_object_get(node, "target"));
    if (!op || strncmp(op, "call_", 5) != 0)
      continue;
    calls++;
    if (target && random_op(target)) {
      snprintf(why, whylen, "the llm proposer leaves random ops (%s) to PyTorch", target);
      return -1;
    }
  }
  if (calls > LLM_MAX_REGION_NODES) {
    snprintf(why, whylen, "the llm proposer writes regions of at most %d ops", LLM_MAX_REGION_NODES);
    return -1;
  }
  *ret_family = family_of_profile(profile);
  return 0;
}

/* The task's llm options over the server's defaults; -1 with the failure when the task
 * names a model the server does not allow. */
static int call_options(const struct llm_proposer *p, json_t *task_options,
                        struct call_options *ret, json_t **ret_failure) {
  json_t *o = json_object_get(task_options, "llm");
  json_t *model = json_object_get(o, "model"), *temp = json_object_get(o, "temperature");
  json_t *max = json_object_get(o, "max_tokens");
  *ret = (struct call_options){p->s.model, p->s.temperature, p->s.max_tokens};
  if (json_is_string(model)) {
    if (!llm_settings_model_allowed(&p->s, json_string_value(model))) {
      char message[300];
      snprintf(message, sizeof message, "the task asks for model '%.128s', which this server "
               "does not allow (--llm-models)", json_string_value(model));
      return failure(ret_failure, "parse/llm_model_not_allowed", message);
    }
    ret->model = json_string_value(model);
  }
  if (json_is_number(temp))
    ret->temperature = json_number_value(temp);
  if (json_is_integer(max))
    ret->max_tokens = (int)json_integer_value(max);
  return 0;
}

/* Reserves one call of the step and fits the completion cap into what the task may
 * still spend, the prompt of prompt_bytes counted at its worst (a token a byte): the call
 * then cannot pass the budget whatever the endpoint answers. -1 with the failure when the
 * step's calls are used up or too little is left to ask at all. */
static int fit_budget(const struct llm_proposer *p, struct proposal_limit *limit,
                      size_t prompt_bytes, struct call_options *o, json_t **ret_failure) {
  if (!limit)
    return 0;
  if (limit->calls <= 0) {
    return failure(ret_failure, "parse/llm_call_limit", "the step made every paid call it "
                   "may (search.max_calls_per_step); the next step asks again");
  }
  double prompt_tokens = (double)prompt_bytes + PROMPT_OVERHEAD_TOKENS;
  double tokens_left = (double)limit->tokens - prompt_tokens;
  double usd_left = limit->cost_usd - prompt_tokens * p->s.price_in / 1e6;
  bool priced = p->s.price_in > 0 || p->s.price_out > 0;
  if (tokens_left < o->max_tokens)
    o->max_tokens = tokens_left > 0 ? (int)tokens_left : 0;
  if (priced && p->s.price_out > 0) {
    double affordable = usd_left > 0 ? usd_left / p->s.price_out * 1e6 : 0;
    if (affordable < o->max_tokens)
      o->max_tokens = (int)affordable;
  }
  if (o->max_tokens < MIN_COMPLETION_TOKENS || (priced && usd_left <= 0)) {
    char message[300];
    snprintf(message, sizeof message, "the task's LLM budget is used up: %lld tokens and "
             "%.6f USD were left, a prompt of up to %.0f tokens and an answer need more",
             limit->tokens, limit->cost_usd, prompt_tokens);
    return failure(ret_failure, "parse/llm_budget_exhausted", message);
  }
  limit->calls--;
  return 0;
}

/* Adds what reply cost to usage (may be NULL) and takes it from limit (may be NULL), so
 * the next call of the step sees what is left. */
static void account(const struct llm_proposer *p, const struct llm_reply *reply,
                    struct proposal_usage *usage, struct proposal_limit *limit) {
  double cost = (double)reply->prompt_tokens * p->s.price_in / 1e6 +
                (double)reply->completion_tokens * p->s.price_out / 1e6;
  if (usage) {
    usage->prompt_tokens += reply->prompt_tokens;
    usage->completion_tokens += reply->completion_tokens;
    usage->cost_usd += cost;
  }
  if (limit) {
    limit->tokens -= reply->prompt_tokens + reply->completion_tokens;
    limit->cost_usd -= cost;
  }
}

/* One paid call of prompt for req: the budget reserved (the worst case), the endpoint
 * asked, the cost spent from req's usage and limit. Returns 0 with *ret_reply (caller
 * clears), or -1 with *ret_failure; prompt is cleared either way. kind names the call in
 * the log. */
static int call(struct llm_proposer *p, const struct proposal_request *req,
                struct llm_prompt *prompt, struct call_options *o, const char *kind,
                struct llm_reply *ret_reply, json_t **ret_failure) {
  size_t prompt_bytes = strlen(prompt->system) + strlen(prompt->user);
  if (fit_budget(p, req->limit, prompt_bytes, o, ret_failure) != 0) {
    llm_prompt_clear(prompt);
    return -1;
  }
  struct llm_request rq = {o->model, prompt->system, prompt->user, o->temperature,
                           o->max_tokens};
  struct llm_error lerr;
  int rc = llm_chat(p->client, &rq, ret_reply, &lerr);
  llm_prompt_clear(prompt);
  if (rc != 0) {
    log_warn("llm: task %s step %d: %s: %s", req->task_id ? req->task_id : "?", req->step,
             lerr.cls, lerr.message);
    return failure(ret_failure, lerr.cls, lerr.message);
  }
  account(p, ret_reply, req->usage, req->limit);
  log_info("llm: task %s step %d: %s, model %s, %zu prompt bytes, %lld+%lld tokens%s, "
           "%.0f ms, %u attempt(s)", req->task_id ? req->task_id : "?", req->step, kind,
           ret_reply->model, prompt_bytes, ret_reply->prompt_tokens,
           ret_reply->completion_tokens, ret_reply->usage_estimated ? " (estimated)" : "",
           ret_reply->latency_ms, ret_reply->attempts);
  return 0;
}

/* The reviser's advice of a two-call small step (caller frees), or NULL with *ret_failure. */
static char *revise(struct llm_proposer *p, const struct proposal_request *req,
                    struct call_options o, json_t **ret_failure) {
  struct llm_prompt prompt = {0};
  char err[256];
  if (llm_prompt_build_reviser(req, &prompt, err, sizeof err) != 0) {
    failure(ret_failure, "parse/llm_prompt", err);
    return NULL;
  }
  struct llm_reply reply;
  if (call(p, req, &prompt, &o, "review (two-call small step)", &reply, ret_failure) != 0)
    return NULL;
  size_t len = strlen(reply.content);
  char *advice = strndup(reply.content, len > LLM_FAILURE_LOG_MAX ? LLM_FAILURE_LOG_MAX : len);
  llm_reply_clear(&reply);
  if (!advice)
    failure(ret_failure, "parse/llm_prompt", "out of memory");
  return advice;
}

static int llm_propose(struct llm_proposer *p, const struct proposal_request *req, bool small,
                       json_t **ret_candidate, json_t **ret_failure) {
  struct call_options o;
  if (call_options(p, req->task_options, &o, ret_failure) != 0)
    return -1;
  small = small && json_is_string(json_object_get(req->parent, "source"));
  char *advice = small && req->two_call ? revise(p, req, o, ret_failure) : NULL;
  if (small && req->two_call && !advice)
    return -1;
  struct llm_prompt prompt = {0};
  char err[256];
  int rc = advice ? llm_prompt_build_tuner(req, advice, &prompt, err, sizeof err)
                  : llm_prompt_build(req, small, &prompt, err, sizeof err);
  free(advice);
  if (rc != 0)
    return failure(ret_failure, "parse/llm_prompt", err);
  struct llm_reply reply;
  if (call(p, req, &prompt, &o, small ? "small step" : "large step", &reply, ret_failure) != 0)
    return -1;
  struct answer_error aerr;
  json_t *cand = small ? answer_parse_small(reply.content, req->parent, req->profile, &aerr)
                       : answer_parse_large(reply.content, req->profile, &aerr);
  if (!cand) {
    if (reply.truncated) {
      size_t used = strlen(aerr.message);
      snprintf(aerr.message + used, sizeof aerr.message - used,
               " (the answer stopped at max_tokens %d)", o.max_tokens);
    }
    log_debug("llm: task %s step %d: %s; the answer began: %.1500s",
              req->task_id ? req->task_id : "?", req->step, aerr.cls, reply.content);
    llm_reply_clear(&reply);
    return failure(ret_failure, aerr.cls, aerr.message);
  }
  llm_reply_clear(&reply);
  *ret_candidate = cand;
  return 0;
}

/* HTAM's local choice: a short call listing the direction's strategies with their records;
 * the answer must name one of them. Its completion is capped short. */
static int llm_choose_strategy(void *self, const struct proposal_request *req,
                               const char **ret_id, json_t **ret_failure) {
  struct llm_proposer *p = self;
  struct call_options o;
  if (json_array_size(req->strategies) == 0)
    return failure(ret_failure, "parse/llm_prompt", "no strategy to choose from");
  if (call_options(p, req->task_options, &o, ret_failure) != 0)
    return -1;
  if (o.max_tokens > LLM_LOCAL_CHOICE_MAX_TOKENS)
    o.max_tokens = LLM_LOCAL_CHOICE_MAX_TOKENS;
  struct llm_prompt prompt = {0};
  char err[256];
  if (llm_prompt_build_local_choice(req, &prompt, err, sizeof err) != 0)
    return failure(ret_failure, "parse/llm_prompt", err);
  struct llm_reply reply;
  if (call(p, req, &prompt, &o, "local choice", &reply, ret_failure) != 0)
    return -1;
  const char *id = llm_local_choice_parse(reply.content, req->strategies);
  llm_reply_clear(&reply);
  if (!id)
    return failure(ret_failure, "parse/llm_no_choice",
                   "the answer names none of the direction's strategies");
  *ret_id = id;
  return 0;
}

static int llm_large(void *self, const struct proposal_request *req, json_t **ret_candidate,
                     json_t **ret_failure) {
  return llm_propose(self, req, false, ret_candidate, ret_failure);
}

static int llm_small(void *self, const struct proposal_request *req, json_t **ret_candidate,
                     json_t **ret_failure) {
  return llm_propose(self, req, true, ret_candidate, ret_failure);
}

/* The system message of every prompt (prompts/system.txt) into *ret (caller frees). */
static int render_system(char **ret, char *err, size_t errlen) {
  const char *text = llm_prompt_template("system.txt");
  size_t len = text ? strlen(text) : 0;
  while (len > 0 && text[len - 1] == '\n')
    len--;
  *ret = text ? strndup(text, len) : NULL;
  if (!*ret)
    snprintf(err, errlen, "no system prompt");
  return *ret ? 0 : -1;
}

/* One call of the skill memory's prompts: the answer's content (caller frees) with its
 * cost added to usage, or NULL with why. */
static char *skill_call(struct llm_proposer *p, const struct skill_reflection *req,
                        const char *user, char *why, size_t whylen) {
  struct call_options o;
  json_t *failure = NULL;
  char *system = NULL, err[256];
  if (call_options(p, req->task_options, &o, &failure) == 0 && o.max_tokens > LLM_SKILL_MAX_TOKENS)
    o.max_tokens = LLM_SKILL_MAX_TOKENS;
  if (!failure && render_system(&system, err, sizeof err) != 0)
    failure = json_pack("{s:s}", "message", err);
  if (!failure)
    fit_budget(p, req->limit, strlen(system) + strlen(user), &o, &failure);
  if (failure) {
    snprintf(why, whylen, "%s", json_string_value(json_object_get(failure, "message")));
    json_decref(failure);
    free(system);
    return NULL;
  }
  struct llm_request call = {o.model, system, user, o.temperature, o.max_tokens};
  struct llm_reply reply;
  struct llm_error lerr;
  int rc = llm_chat(p->client, &call, &reply, &lerr);
  free(system);
  if (rc != 0) {
    snprintf(why, whylen, "%s: %s", lerr.cls, lerr.message);
    return NULL;
  }
  account(p, &reply, req->usage, req->limit);
  char *content = reply.content;
  reply.content = NULL;
  llm_reply_clear(&reply);
  return content;
}

/* Extraction, then dedup against req->rules (AdaExplore's skill memory). A dedup call
 * that fails leaves the rule new, as AdaExplore's does. */
static int llm_reflect(void *self, const struct skill_reflection *req, struct skill_verdict *ret,
                       char *why, size_t whylen) {
  struct llm_proposer *p = self;
  char *user = NULL, err[256];
  *ret = (struct skill_verdict){.kind = SKILL_VERDICT_NONE};
  if (llm_skill_extract_prompt(req, &user, err, sizeof err) != 0) {
    snprintf(why, whylen, "%s", err);
    return -1;
  }
  char *answer = skill_call(p, req, user, why, whylen);
  free(user);
  if (!answer)
    return -1;
  int found = llm_skill_parse_rule(answer, ret->rule);
  free(answer);
  if (!found)
    return 0;
  ret->kind = SKILL_VERDICT_NEW;
  long same = llm_skill_same_text(ret->rule, req->rules);
  size_t match = same >= 0 ? (size_t)same + 1 : 0;
  if (same < 0 && json_array_size(req->rules) > 0) {
    if (llm_skill_dedup_prompt(ret->rule, req->rules, &user, err, sizeof err) != 0) {
      snprintf(why, whylen, "%s", err);
      return -1;
    }
    char dedup_why[256];
    answer = skill_call(p, req, user, dedup_why, sizeof dedup_why);
    free(user);
    if (answer)
      match = llm_skill_parse_dedup(answer, json_array_size(req->rules));
    else
      log_warn("llm: task %s: the dedup prompt failed (%s); the rule counts as new",
               req->task_id ? req->task_id : "?", dedup_why);
    free(answer);
  }
  if (match > 0) {
    ret->kind = SKILL_VERDICT_DUPLICATE;
    ret->match_id = json_integer_value(json_object_get(json_array_get(req->rules, match - 1), "id"));
  }
  return 0;
}

static void llm_free(void *self) {
  struct llm_proposer *p = self;
  if (!p)
    return;
  llm_client_free(p->client);
  memset(p->s.key, 0, sizeof p->s.key);
  free(p);
}

int proposer_llm_new(const struct llm_settings *settings, struct proposer *ret, char *why,
                     size_t whylen) {
  if (!settings || !settings->base_url[0]) {
    snprintf(why, whylen, "the 'llm' proposer has no endpoint: start the server with "
             "--llm-base-url and --llm-model (or OPFORGE_LLM_BASE_URL and OPFORGE_LLM_MODEL)");
    return -1;
  }
  struct llm_proposer *p = calloc(1, sizeof *p);
  if (!p || llm_client_new(settings, NULL, &p->client) != 0) {
    free(p);
    snprintf(why, whylen, "the 'llm' proposer cannot start its HTTP client (libcurl or memory)");
    return -1;
  }
  p->s = *settings;
  *ret = (struct proposer){.name = "llm", .self = p, .prompted = true,
                           .choose_strategy = llm_choose_strategy,
                           .supports = llm_supports,
                           .propose_large = llm_large, .propose_small = llm_small,
                           .reflect = llm_reflect, .free = llm_free};
  return 0;
}
