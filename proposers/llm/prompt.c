/* The prompts of the LLM proposer (see prompt.h): each section rendered from its template,
 * then the large or the small step's skeleton. Sections a request has nothing for (no
 * skill rules, no direction, no pool) are left out whole. */
#include "proposers/llm/prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_VARS(v) (sizeof(v) / sizeof((v)[0]))
#define STRATEGIES_MAX 8
#define EVIDENCE_MAX 3
#define ITEM_MAX 400   /* bytes of one memory or skill text shown */

/* Renders template name with vars into *ret (caller frees), ending in exactly one
 * newline. Returns 0, or -1 with err. */
static int render(const char *name, const struct tvar *vars, size_t n, char **ret, char *err,
                  size_t errlen) {
  const char *tmpl = llm_prompt_template(name);
  if (!tmpl) {
    snprintf(err, errlen, "no prompt template %s", name);
    return -1;
  }
  struct ltext t = {0};
  if (llm_template_render(tmpl, vars, n, &t, err, errlen) != 0) {
    ltext_clear(&t);
    return -1;
  }
  while (t.len > 0 && t.s[t.len - 1] == '\n')
    t.s[--t.len] = '\0';
  ltext_puts(&t, "\n");
  if (t.oom) {
    ltext_clear(&t);
    snprintf(err, errlen, "out of memory rendering %s", name);
    return -1;
  }
  *ret = ltext_take(&t);
  return 0;
}

/* Appends s as one line of at most ITEM_MAX bytes. */
static void item(struct ltext *out, const char *s) {
  size_t n = strlen(s);
  for (size_t i = 0; i < n && i < ITEM_MAX; i++)
    ltext_add(out, (unsigned char)s[i] < ' ' ? " " : &s[i], 1);
  if (n > ITEM_MAX)
    ltext_puts(out, "...");
}

/* "- a\n- b\n" from an array of strings, after a heading line; nothing when empty. */
static void bullets(struct ltext *out, const char *heading, json_t *list) {
  if (!json_array_size(list))
    return;
  ltext_printf(out, "%s\n", heading);
  size_t i;
  json_t *v;
  json_array_foreach(list, i, v) if (json_is_string(v)) {
    ltext_puts(out, "- ");
    item(out, json_string_value(v));
    ltext_puts(out, "\n");
  }
}

/* A memory node's record: "3 tries, 2 correct, mean reward 0.21" or "not tried yet". */
static void record(struct ltext *out, json_t *node) {
  json_t *stats = json_object_get(node, "stats");
  long long n = (long long)json_integer_value(json_object_get(stats, "n"));
  if (n <= 0) {
    ltext_puts(out, "not tried yet");
    return;
  }
  ltext_printf(out, "%lld tries, %lld correct", n,
               (long long)json_integer_value(json_object_get(stats, "successes")));
  json_t *mean = json_object_get(stats, "mean");
  if (json_is_number(mean))
    ltext_printf(out, ", mean reward %.3f", json_number_value(mean));
}

/* The newest evidence rows of a strategy: "reward 0.22 (correct): note". */
static void evidence(struct ltext *out, json_t *node) {
  json_t *rows = json_object_get(node, "evidence");
  size_t i;
  json_t *row;
  json_array_foreach(rows, i, row) {
    if (i == EVIDENCE_MAX)
      break;
    const char *outcome = json_string_value(json_object_get(row, "outcome"));
    const char *note = json_string_value(json_object_get(row, "note"));
    ltext_printf(out, "  - evidence: reward %.3f (%s)",
                 json_number_value(json_object_get(row, "reward")), outcome ? outcome : "?");
    if (note && *note) {
      ltext_puts(out, ": ");
      item(out, note);
    }
    ltext_puts(out, "\n");
  }
}

static const char *node_name(json_t *node) {
  const char *name = json_string_value(json_object_get(node, "name"));
  return name ? name : json_string_value(json_object_get(node, "id"));
}

static int section_rules(const struct proposal_request *req, char **ret, char *err,
                         size_t errlen) {
  struct ltext accuracy = {0};
  prompt_accuracy(req, &accuracy);
  struct tvar vars[] = {{"accuracy", ltext_str(&accuracy)}};
  int rc = render("rules.txt", vars, N_VARS(vars), ret, err, errlen);
  ltext_clear(&accuracy);
  return rc;
}

/* Skill rules scored LLM_PITFALL_MIN_SCORE or more, highest score first (ties in the
 * request's order), at most LLM_PITFALLS_MAX; "" when none. */
static int section_pitfalls(json_t *skills, char **ret, char *err, size_t errlen) {
  struct ltext rules = {0};
  size_t shown = 0, n = json_array_size(skills);
  for (long long score = 1000000; score >= LLM_PITFALL_MIN_SCORE && shown < LLM_PITFALLS_MAX;) {
    long long next = LLM_PITFALL_MIN_SCORE - 1;
    for (size_t i = 0; i < n && shown < LLM_PITFALLS_MAX; i++) {
      json_t *s = json_array_get(skills, i);
      const char *rule = json_string_value(json_object_get(s, "rule"));
      long long sc = (long long)json_number_value(json_object_get(s, "score"));
      if (rule && sc == score) {
        ltext_puts(&rules, "- ");
        item(&rules, rule);
        ltext_puts(&rules, "\n");
        shown++;
      } else if (rule && sc < score && sc > next) {
        next = sc;
      }
    }
    score = next;
  }
  int rc = 0;
  if (shown) {
    struct tvar vars[] = {{"rules", ltext_str(&rules)}};
    rc = render("pitfalls.txt", vars, N_VARS(vars), ret, err, errlen);
  } else {
    *ret = strdup("");
  }
  ltext_clear(&rules);
  return rc;
}

static int section_region(const struct proposal_request *req, char **ret, char *err,
                          size_t errlen) {
  struct ltext scope = {0}, ref = {0}, graph = {0}, tensors = {0}, facts = {0};
  const char *name = json_string_value(json_object_get(req->profile, "name"));
  if (name && strchr(name, '/')) {
    ltext_puts(&scope, "The region is one part of the task's program: the nodes of the graph "
                       "below. The rest runs separately. Your kernels read the region's inputs "
                       "and write its output.\n");
  } else {
    ltext_puts(&scope, "The region is the whole task: your kernels compute every output of "
                       "the program.\n");
  }
  if (req->reference && *req->reference) {
    size_t len = strlen(req->reference);
    while (len > 0 && req->reference[len - 1] == '\n')
      len--;
    ltext_printf(&ref, "The task's PyTorch program:\n\n```python\n%.*s\n```\n", (int)len,
                 req->reference);
  }
  prompt_graph(req->profile, &graph);
  prompt_tensors(req->profile, &tensors);
  prompt_facts(req->profile, &facts);
  struct tvar vars[] = {{"scope", ltext_str(&scope)},   {"reference", ltext_str(&ref)},
                        {"graph", ltext_str(&graph)},   {"tensors", ltext_str(&tensors)},
                        {"facts", ltext_str(&facts)}};
  int rc = render("region.txt", vars, N_VARS(vars), ret, err, errlen);
  ltext_clear(&scope);
  ltext_clear(&ref);
  ltext_clear(&graph);
  ltext_clear(&tensors);
  ltext_clear(&facts);
  return rc;
}

/* The chosen strategy: its edit pattern, its checks, its record and evidence. */
static void strategy_text(json_t *node, struct ltext *out) {
  const char *pattern = json_string_value(json_object_get(node, "edit_pattern"));
  ltext_printf(out, "Strategy to apply: %s. ", node_name(node) ? node_name(node) : "?");
  item(out, pattern ? pattern : "");
  ltext_puts(out, "\n");
  bullets(out, "Check before relying on it:", json_object_get(node, "checks"));
  ltext_puts(out, "Its record so far: ");
  record(out, node);
  ltext_puts(out, ".\n");
  evidence(out, node);
}

/* The direction's other strategies, with their records. */
static void strategies_text(const struct proposal_request *req, struct ltext *out) {
  size_t shown = 0, i;
  json_t *node;
  json_array_foreach(req->strategies, i, node) {
    const char *id = json_string_value(json_object_get(node, "id"));
    if (shown == STRATEGIES_MAX || (id && req->strategy && strcmp(id, req->strategy) == 0))
      continue;
    if (!shown++)
      ltext_puts(out, "Other strategies of this direction, with their records:\n");
    const char *pattern = json_string_value(json_object_get(node, "edit_pattern"));
    ltext_printf(out, "- %s (", node_name(node) ? node_name(node) : "?");
    record(out, node);
    ltext_puts(out, "): ");
    item(out, pattern ? pattern : "");
    ltext_puts(out, "\n");
    evidence(out, node);
  }
}

static int section_direction(const struct proposal_request *req, char **ret, char *err,
                             size_t errlen) {
  json_t *d = req->direction_node;
  if (!json_is_object(d)) {
    *ret = strdup("");
    return 0;
  }
  struct ltext objectives = {0}, triggers = {0}, risks = {0}, strategy = {0}, others = {0},
               intent = {0};
  const char *intent_s = json_string_value(json_object_get(d, "intent"));
  item(&intent, intent_s ? intent_s : "");
  bullets(&objectives, "Its objectives:", json_object_get(d, "objectives"));
  json_t *trig = json_object_get(d, "triggers");
  size_t i;
  json_t *t;
  json_array_foreach(trig, i, t) ltext_printf(&triggers, "%s%s", i ? ", " : "It suits tasks with: ",
                                              json_string_value(t) ? json_string_value(t) : "?");
  if (triggers.len)
    ltext_puts(&triggers, ".\n");
  bullets(&risks, "Its risks:", json_object_get(d, "risks"));
  if (json_is_object(req->strategy_node))
    strategy_text(req->strategy_node, &strategy);
  strategies_text(req, &others);
  struct tvar vars[] = {{"name", node_name(d) ? node_name(d) : "?"},
                        {"intent", ltext_str(&intent)},
                        {"objectives", ltext_str(&objectives)},
                        {"triggers", ltext_str(&triggers)},
                        {"risks", ltext_str(&risks)},
                        {"strategy", ltext_str(&strategy)},
                        {"strategies", ltext_str(&others)}};
  int rc = render("direction.txt", vars, N_VARS(vars), ret, err, errlen);
  ltext_clear(&objectives);
  ltext_clear(&triggers);
  ltext_clear(&risks);
  ltext_clear(&strategy);
  ltext_clear(&others);
  ltext_clear(&intent);
  return rc;
}

/* A kernel's source and plan as fenced blocks; the source cut at LLM_SHOWN_SOURCE_MAX. */
static void kernel_blocks(json_t *cand, struct ltext *out) {
  const char *src = json_string_value(json_object_get(cand, "source"));
  size_t len = src ? strlen(src) : 0;
  while (len > 0 && src[len - 1] == '\n')
    len--;
  bool cut = len > LLM_SHOWN_SOURCE_MAX;
  ltext_printf(out, "```cuda\n%.*s\n```\n", (int)(cut ? LLM_SHOWN_SOURCE_MAX : len),
               src ? src : "");
  if (cut)
    ltext_puts(out, "(the source is cut here)\n");
  char *plan = json_dumps(json_object_get(cand, "plan"), JSON_COMPACT | JSON_ENCODE_ANY);
  ltext_printf(out, "\nIts plan: `%s`\n", plan ? plan : "null");
  free(plan);
  json_t *opts = json_object_get(cand, "options");
  if (json_array_size(opts)) {
    char *o = json_dumps(opts, JSON_COMPACT);
    ltext_printf(out, "Its options: `%s`\n", o ? o : "");
    free(o);
  }
}

/* The pool: each candidate's kernel (or, for a program, its region steps) and verdict. */
static int section_pool(json_t *context, char **ret, char *err, size_t errlen) {
  struct ltext kernels = {0};
  size_t shown = 0, i;
  json_t *cand;
  json_array_foreach(context, i, cand) {
    json_t *steps = json_object_get(json_object_get(cand, "program"), "steps");
    bool has_source = json_is_string(json_object_get(cand, "source")) &&
                      json_string_length(json_object_get(cand, "source")) > 0;
    size_t regions = 0, k;
    json_t *step;
    json_array_foreach(steps, k, step) regions += json_is_string(json_object_get(step, "source"));
    if (shown == LLM_POOL_MAX || (!has_source && !regions))
      continue;  /* the reference program, all library steps, is no kernel to show */
    ltext_printf(&kernels, "%s### Kernel %zu (", shown ? "\n" : "", shown + 1);
    prompt_origin(cand, &kernels);
    ltext_puts(&kernels, "): ");
    prompt_verdict(cand, &kernels);
    ltext_puts(&kernels, "\n\n");
    if (has_source)
      kernel_blocks(cand, &kernels);
    json_array_foreach(steps, k, step) if (json_is_string(json_object_get(step, "source"))) {
      char *nodes = json_dumps(json_object_get(step, "nodes"), JSON_COMPACT | JSON_ENCODE_ANY);
      ltext_printf(&kernels, "Its region for the nodes %s (tensor names of the whole "
                   "program):\n\n", nodes ? nodes : "?");
      free(nodes);
      kernel_blocks(step, &kernels);
    }
    shown++;
  }
  int rc = 0;
  if (shown) {
    struct tvar vars[] = {{"kernels", ltext_str(&kernels)}};
    rc = render("pool.txt", vars, N_VARS(vars), ret, err, errlen);
  } else {
    *ret = strdup("");
  }
  ltext_clear(&kernels);
  return rc;
}

/* The metrics of an evaluated candidate: its time, speed-ups and floor fraction as the
 * verdict gives them, and its compile's registers and spills where known. */
static void metrics(json_t *cand, struct ltext *out) {
  json_t *compile = json_object_get(json_object_get(cand, "result"), "compile");
  json_t *regs = json_object_get(compile, "registers");
  json_t *spills = json_object_get(compile, "spills");
  if (json_is_integer(regs) && json_integer_value(regs) > 0)
    ltext_printf(out, "; %lld registers", (long long)json_integer_value(regs));
  if (json_is_integer(spills) && json_integer_value(spills) > 0)
    ltext_printf(out, ", %lld bytes spilled", (long long)json_integer_value(spills));
}

/* The recent work, newest first in the request, listed oldest first: every candidate's
 * verdict and metrics, and each ancestor's source (the newest is the current kernel,
 * shown above) as far as req->context_bytes allows, the nearest ancestors first. */
static int section_history(const struct proposal_request *req, char **ret, char *err,
                           size_t errlen) {
  json_t *context = req->context;
  size_t n = json_array_size(context), budget = req->context_bytes;
  bool *shown = calloc(n ? n : 1, sizeof *shown);
  if (!shown) {
    snprintf(err, errlen, "out of memory building the prompt");
    return -1;
  }
  for (size_t i = 1; i < n; i++) {  /* nearest ancestors first */
    const char *src = json_string_value(json_object_get(json_array_get(context, i), "source"));
    size_t len = src ? strlen(src) : 0;
    if (len > 0 && len + 64 <= budget) {
      shown[i] = true;
      budget -= len + 64;
    }
  }
  struct ltext attempts = {0};
  for (size_t i = n; i-- > 0;) {
    json_t *cand = json_array_get(context, i);
    ltext_puts(&attempts, "- ");
    prompt_origin(cand, &attempts);
    ltext_puts(&attempts, ": ");
    prompt_verdict(cand, &attempts);
    metrics(cand, &attempts);
    ltext_puts(&attempts, "\n");
    if (shown[i])
      kernel_blocks(cand, &attempts);
  }
  free(shown);
  int rc = 0;
  if (attempts.len) {
    struct tvar vars[] = {{"attempts", ltext_str(&attempts)}};
    rc = render("history.txt", vars, N_VARS(vars), ret, err, errlen);
  } else {
    *ret = strdup("");
  }
  ltext_clear(&attempts);
  return rc;
}

/* A failed current kernel's failure message and compile log, in full up to
 * LLM_FAILURE_LOG_MAX bytes each (a one-line verdict is too little to fix it from). */
static void failure_log(json_t *result, struct ltext *out) {
  json_t *failure = json_object_get(result, "failure");
  const char *msg = json_string_value(json_object_get(failure, "message"));
  const char *log = json_string_value(json_object_get(json_object_get(result, "compile"), "log"));
  if (msg && *msg) {
    size_t len = strlen(msg);
    ltext_printf(out, "Its failure, in full:\n\n```\n%.*s\n```\n", (int)(len > LLM_FAILURE_LOG_MAX
                 ? LLM_FAILURE_LOG_MAX : len), msg);
  }
  if (log && *log) {
    size_t len = strlen(log);
    ltext_printf(out, "Its compile log:\n\n```\n%.*s\n```\n", (int)(len > LLM_FAILURE_LOG_MAX
                 ? LLM_FAILURE_LOG_MAX : len), log);
  }
}

/* What to do: fix a failed kernel first; apply the strategy under its direction. */
static int section_guidance(const struct proposal_request *req, const char *advice, char **ret,
                            char *err, size_t errlen) {
  struct ltext g = {0};
  json_t *last = json_array_get(req->context, 0);
  json_t *failure = json_object_get(json_object_get(last, "result"), "failure");
  if (json_is_object(failure)) {
    ltext_puts(&g, "The current kernel failed (see above): fix that first, with the smallest "
                   "change that does it.\n");
    failure_log(json_object_get(last, "result"), &g);
  }
  if (json_is_object(req->direction_node)) {
    const char *intent = json_string_value(json_object_get(req->direction_node, "intent"));
    ltext_printf(&g, "Direction: %s. ", node_name(req->direction_node)
                                            ? node_name(req->direction_node) : "?");
    item(&g, intent ? intent : "");
    ltext_puts(&g, "\n");
  }
  if (json_is_object(req->strategy_node))
    strategy_text(req->strategy_node, &g);
  if (!g.len)
    ltext_puts(&g, "Make the kernel faster without changing what it computes.\n");
  if (advice && *advice) {
    char *text = NULL;
    struct tvar avars[] = {{"advice", advice}};
    if (render("advice.txt", avars, N_VARS(avars), &text, err, errlen) != 0) {
      ltext_clear(&g);
      return -1;
    }
    ltext_puts(&g, "\n");
    ltext_puts(&g, text);
    free(text);
  }
  struct tvar vars[] = {{"guidance", ltext_str(&g)}};
  int rc = render("guidance.txt", vars, N_VARS(vars), ret, err, errlen);
  ltext_clear(&g);
  return rc;
}

void llm_prompt_clear(struct llm_prompt *p) {
  free(p->system);
  free(p->user);
  p->system = p->user = NULL;
}

enum { S_RULES, S_PITFALLS, S_REGION, S_DIRECTION, S_POOL, S_HISTORY, S_GUIDANCE, S_ANSWER,
       S_SOURCE, S_PLAN, S_OPTIONS, S_COUNT };

/* A plan as JSON with one launch a line (caller frees), or NULL when out of memory. */
static char *plan_text(json_t *plan) {
  struct ltext t = {0};
  json_t *list = json_object_get(plan, "buffers");
  char *buffers = list ? json_dumps(list, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  ltext_printf(&t, "{\"buffers\": %s,\n \"launches\": [", buffers ? buffers : "[]");
  free(buffers);
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(plan, "launches"), i, l) {
    char *one = json_dumps(l, JSON_COMPACT);
    ltext_printf(&t, "%s\n  %s", i ? "," : "", one ? one : "{}");
    free(one);
  }
  ltext_puts(&t, "]}");
  return ltext_take(&t);
}

/* The small step's view of the parent: its source without trailing newlines, its plan
 * (indented JSON) and its options. */
static void parent_parts(json_t *parent, char **s) {
  const char *src = json_string_value(json_object_get(parent, "source"));
  size_t len = src ? strlen(src) : 0;
  while (len > 0 && src[len - 1] == '\n')
    len--;
  s[S_SOURCE] = strndup(src ? src : "", len);
  s[S_PLAN] = plan_text(json_object_get(parent, "plan"));
  json_t *opts = json_object_get(parent, "options");
  char *o = json_array_size(opts) ? json_dumps(opts, JSON_COMPACT) : NULL;
  struct ltext t = {0};
  if (o)
    ltext_printf(&t, "Its compiler options: `%s` (kept unless your plan block gives "
                     "\"options\").\n", o);
  free(o);
  s[S_OPTIONS] = ltext_take(&t);
}

/* What a prompt asks for: a large step, a small step's edits, a small step's review in
 * words (two_call's first call), or its edits after that review. */
enum prompt_mode { MODE_LARGE, MODE_SMALL, MODE_REVISER, MODE_TUNER };

static int build(const struct proposal_request *req, enum prompt_mode mode, const char *advice,
                 struct llm_prompt *ret, char *err, size_t errlen) {
  bool small = mode != MODE_LARGE;
  char *s[S_COUNT] = {0};
  int rc = section_rules(req, &s[S_RULES], err, errlen);
  if (rc == 0)
    rc = section_pitfalls(req->skills, &s[S_PITFALLS], err, errlen);
  if (rc == 0)
    rc = section_region(req, &s[S_REGION], err, errlen);
  if (rc == 0 && !small)
    rc = section_direction(req, &s[S_DIRECTION], err, errlen);
  if (rc == 0 && !small)
    rc = section_pool(req->context, &s[S_POOL], err, errlen);
  if (rc == 0 && small)
    rc = section_history(req, &s[S_HISTORY], err, errlen);
  if (rc == 0 && small)
    rc = section_guidance(req, mode == MODE_TUNER ? advice : NULL, &s[S_GUIDANCE], err, errlen);
  if (rc == 0)
    rc = render(mode == MODE_REVISER ? "answer_reviser.txt"
                : small              ? "answer_small.txt"
                                     : "answer_large.txt",
                NULL, 0, &s[S_ANSWER], err, errlen);
  if (rc == 0 && small)
    parent_parts(req->parent, s);
  unsigned need = small ? (1u << S_RULES | 1u << S_PITFALLS | 1u << S_REGION | 1u << S_HISTORY |
                           1u << S_GUIDANCE | 1u << S_ANSWER | 1u << S_SOURCE | 1u << S_PLAN |
                           1u << S_OPTIONS)
                        : (1u << S_RULES | 1u << S_PITFALLS | 1u << S_REGION |
                           1u << S_DIRECTION | 1u << S_POOL | 1u << S_ANSWER);
  for (size_t i = 0; rc == 0 && i < S_COUNT; i++)
    if (!s[i] && (need & (1u << i))) {
      snprintf(err, errlen, "out of memory building the prompt");
      rc = -1;
    }
  struct tvar vars[] = {
    {"rules", s[S_RULES]},       {"pitfalls", s[S_PITFALLS]}, {"region", s[S_REGION]},
    {"direction", s[S_DIRECTION]}, {"pool", s[S_POOL]},       {"history", s[S_HISTORY]},
    {"guidance", s[S_GUIDANCE]}, {"answer", s[S_ANSWER]},     {"source", s[S_SOURCE]},
    {"plan", s[S_PLAN]},         {"options", s[S_OPTIONS]},
  };
  char *user = NULL, *system = NULL;
  if (rc == 0)
    rc = render(small ? "small.txt" : "large.txt", vars, N_VARS(vars), &user, err, errlen);
  if (rc == 0)
    rc = render("system.txt", NULL, 0, &system, err, errlen);
  for (size_t i = 0; i < S_COUNT; i++)
    free(s[i]);
  if (rc != 0) {
    free(user);
    free(system);
    return -1;
  }
  ret->system = system;
  ret->user = user;
  return 0;
}

int llm_prompt_build(const struct proposal_request *req, bool small, struct llm_prompt *ret,
                     char *err, size_t errlen) {
  return build(req, small ? MODE_SMALL : MODE_LARGE, NULL, ret, err, errlen);
}

int llm_prompt_build_reviser(const struct proposal_request *req, struct llm_prompt *ret,
                             char *err, size_t errlen) {
  return build(req, MODE_REVISER, NULL, ret, err, errlen);
}

int llm_prompt_build_tuner(const struct proposal_request *req, const char *advice,
                           struct llm_prompt *ret, char *err, size_t errlen) {
  return build(req, MODE_TUNER, advice, ret, err, errlen);
}

/* The strategies with their ids, names, records and edit patterns. */
static void choice_list(const struct proposal_request *req, struct ltext *out) {
  size_t i;
  json_t *node;
  json_array_foreach(req->strategies, i, node) {
    const char *id = json_string_value(json_object_get(node, "id"));
    const char *pattern = json_string_value(json_object_get(node, "edit_pattern"));
    if (!id)
      continue;
    ltext_printf(out, "- id `%s`: %s (", id, node_name(node) ? node_name(node) : id);
    record(out, node);
    ltext_puts(out, "). ");
    item(out, pattern ? pattern : "");
    ltext_puts(out, "\n");
  }
}

int llm_prompt_build_local_choice(const struct proposal_request *req, struct llm_prompt *ret,
                                  char *err, size_t errlen) {
  struct ltext list = {0};
  choice_list(req, &list);
  char *region = NULL, *user = NULL, *system = NULL;
  const char *dir = node_name(req->direction_node);
  int rc = section_region(req, &region, err, errlen);
  struct tvar vars[] = {{"direction", dir ? dir : (req->direction ? req->direction : "?")},
                        {"region", region ? region : ""},
                        {"strategies", ltext_str(&list)}};
  if (rc == 0)
    rc = render("local_choice.txt", vars, N_VARS(vars), &user, err, errlen);
  if (rc == 0)
    rc = render("system.txt", NULL, 0, &system, err, errlen);
  free(region);
  ltext_clear(&list);
  if (rc != 0) {
    free(user);
    free(system);
    return -1;
  }
  ret->system = system;
  ret->user = user;
  return 0;
}

const char *llm_local_choice_parse(const char *answer, json_t *strategies) {
  for (const char *line = answer; line && *line;) {
    size_t len = strcspn(line, "\n");
    const char *a = line, *b = line + len;
    while (a < b && strchr(" \t`*-", *a))
      a++;
    while (b > a && strchr(" \t`*.\r", b[-1]))
      b--;
    size_t i;
    json_t *node;
    json_array_foreach(strategies, i, node) {
      const char *id = json_string_value(json_object_get(node, "id"));
      if (id && strlen(id) == (size_t)(b - a) && strncmp(id, a, (size_t)(b - a)) == 0)
        return id;
    }
    line = line[len] ? line + len + 1 : NULL;
  }
  return NULL;
}
