/* Every tunable constant of the search (HTAM policy, AdaExplore tree) and the ablation
 * switches, with defaults and a JSON override parser. */
#include "engine/search_config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum key_kind { K_DOUBLE, K_UINT, K_BOOL, K_ENUM };

static const char *const retrieval_names[] = {"hierarchical", "flat", NULL};
static const char *const steps_names[] = {"mixed", "large", "small", NULL};
static const char *const small_step_names[] = {"one_call", "two_call", NULL};
static const char *const local_choice_names[] = {"ucb", "llm", NULL};

/* One configurable field: its key, where it lives, its default and inclusive range
 * (lo_open excludes lo, for constants that divide). */
struct key_spec {
  const char *key;
  enum key_kind kind;
  size_t offset;
  double def, lo, hi;
  bool lo_open;
  const char *const *choices; /* K_ENUM: the names, NULL-terminated; def is an index */
};

#define D(name, def, lo, hi, open) \
  {#name, K_DOUBLE, offsetof(struct search_config, name), def, lo, hi, open, NULL}
#define U(name, def, lo, hi) \
  {#name, K_UINT, offsetof(struct search_config, name), def, lo, hi, false, NULL}
#define B(name, def) {#name, K_BOOL, offsetof(struct search_config, name), def, 0, 1, false, NULL}
#define E(name, def, names) \
  {#name, K_ENUM, offsetof(struct search_config, name), def, 0, 0, false, names}

static const struct key_spec keys[] = {
  D(penalty_compile, -0.5, -10, 0, false),
  D(penalty_incorrect, -0.3, -10, 0, false),
  D(penalty_timeout, -0.7, -10, 0, false),
  D(k0, 2, 0, 1e6, true),
  D(k_edge, 2, 0, 1e6, true),
  U(prefix_len, 3, 0, SEARCH_MAX_PREFIX),
  B(prefix_collapse_repeats, 1),
  D(lambda, 0.7, 0, 100, false),
  D(beta, 0.2, 0, 100, false),
  D(c, 0, 0, 100, false),
  D(tau, 0.1, 0, 100, true),
  D(ema_alpha, 0.3, 0, 1, true),
  B(deterministic, 0),
  D(local_c, 0.3, 0, 100, false),
  B(local_memory, 1),
  E(retrieval, SEARCH_RETRIEVAL_HIERARCHICAL, retrieval_names),
  B(skills, 1),
  B(learn, 1),
  D(tree_c, 0.3, 0, 100, false),
  D(expand_ratio, 1, 0, 100, false),
  D(reward_alpha, 0, 0, 1, false),
  D(large_step_prob, 0.2, 0, 1, false),
  U(small_children_before_large, 2, 1, 1000),
  U(pool_size, 5, 1, SEARCH_MAX_POOL),
  U(recent_window, 5, 1, SEARCH_MAX_POOL),
  D(tree_reward_incorrect, 0.05, 0, 10, false),
  D(tree_reward_base, 0.4, 0, 10, false),
  D(tree_reward_span, 1.2, 0, 10, false),
  D(speedup_min, 0.1, 0, 1, true),    /* (0, 1]: below speedup_max whatever it is */
  D(speedup_max, 10, 1, 1e6, true),   /* (1, 1e6] */
  U(max_calls_per_step, 4, 1, 64),
  E(steps, SEARCH_STEPS_MIXED, steps_names),
  E(small_step, SEARCH_SMALL_ONE_CALL, small_step_names),
  E(local_choice, SEARCH_LOCAL_UCB, local_choice_names),
  U(context_bytes, 24576, 0, 262144),
};
#undef D
#undef U
#undef B
#undef E

#define N_KEYS (sizeof keys / sizeof keys[0])

void search_config_defaults(struct search_config *ret_cfg) {
  struct search_config cfg;
  memset(&cfg, 0, sizeof cfg);
  for (size_t i = 0; i < N_KEYS; i++) {
    char *field = (char *)&cfg + keys[i].offset;
    if (keys[i].kind == K_DOUBLE)
      *(double *)(void *)field = keys[i].def;
    else if (keys[i].kind == K_UINT || keys[i].kind == K_ENUM)
      *(unsigned *)(void *)field = (unsigned)keys[i].def;
    else
      *(bool *)(void *)field = keys[i].def != 0;
  }
  *ret_cfg = cfg;
}

const char *search_retrieval_name(enum search_retrieval r) {
  return (unsigned)r < 2 ? retrieval_names[r] : "hierarchical";
}

static const struct key_spec *find_key(const char *key) {
  for (size_t i = 0; i < N_KEYS; i++)
    if (strcmp(keys[i].key, key) == 0)
      return &keys[i];
  return NULL;
}

/* Fills *err (may be NULL) for key and returns -1. */
__attribute__((format(printf, 4, 5))) static int refuse(struct search_config_error *err,
                                                        bool unknown, const char *key,
                                                        const char *fmt, ...) {
  if (!err)
    return -1;
  err->unknown = unknown;
  snprintf(err->key, sizeof err->key, "%s", key);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return -1;
}

/* Checks an enum value against spec's names and stores its index. */
static int apply_enum(struct search_config *cfg, const struct key_spec *spec,
                      const json_t *value, struct search_config_error *err) {
  char names[128] = "";
  size_t used = 0;
  for (unsigned i = 0; spec->choices[i]; i++) {
    if (json_is_string(value) && strcmp(spec->choices[i], json_string_value(value)) == 0) {
      *(unsigned *)(void *)((char *)cfg + spec->offset) = i;
      return 0;
    }
    used += (size_t)snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "",
                             spec->choices[i]);
  }
  return refuse(err, false, spec->key, "%s: must be one of: %s", spec->key, names);
}

/* Checks value against spec and stores it into cfg. Returns 0, or -1 with err filled. */
static int apply_one(struct search_config *cfg, const struct key_spec *spec,
                     const json_t *value, struct search_config_error *err) {
  char *field = (char *)cfg + spec->offset;
  if (spec->kind == K_ENUM)
    return apply_enum(cfg, spec, value, err);
  if (spec->kind == K_BOOL) {
    if (!json_is_boolean(value))
      return refuse(err, false, spec->key, "%s: must be a boolean", spec->key);
    *(bool *)(void *)field = json_is_true(value);
    return 0;
  }
  if (spec->kind == K_UINT && !json_is_integer(value))
    return refuse(err, false, spec->key, "%s: must be an integer", spec->key);
  if (!json_is_number(value))
    return refuse(err, false, spec->key, "%s: must be a number", spec->key);
  double v = json_number_value(value);
  bool below = spec->lo_open ? !(v > spec->lo) : !(v >= spec->lo);
  if (!isfinite(v) || below || !(v <= spec->hi))
    return refuse(err, false, spec->key, "%s: must be in %s%g, %g]", spec->key,
                  spec->lo_open ? "(" : "[", spec->lo, spec->hi);
  if (spec->kind == K_UINT)
    *(unsigned *)(void *)field = (unsigned)json_integer_value(value);
  else
    *(double *)(void *)field = v;
  return 0;
}

int search_config_apply(struct search_config *cfg, const json_t *obj,
                        struct search_config_error *ret_err) {
  if (!json_is_object(obj))
    return refuse(ret_err, false, "", "search configuration: must be a JSON object");
  struct search_config next = *cfg;
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)obj, key, value) {
    const struct key_spec *spec = find_key(key);
    if (!spec)
      return refuse(ret_err, true, key, "%s: unknown search configuration key", key);
    if (apply_one(&next, spec, value, ret_err) < 0)
      return -1;
  }
  *cfg = next;  /* speedup_min <= 1 < speedup_max by their bounds */
  return 0;
}

int search_config_apply_json(struct search_config *cfg, const json_t *obj, char *err,
                             size_t errlen) {
  struct search_config_error e;
  int rc = search_config_apply(cfg, obj, &e);
  if (rc != 0)
    snprintf(err, errlen, "%s", e.message);
  return rc;
}

json_t *search_config_to_json(const struct search_config *cfg) {
  json_t *obj = json_object();
  if (!obj)
    return NULL;
  for (size_t i = 0; i < N_KEYS; i++) {
    const char *field = (const char *)cfg + keys[i].offset;
    json_t *v;
    if (keys[i].kind == K_DOUBLE)
      v = json_real(*(const double *)(const void *)field);
    else if (keys[i].kind == K_UINT)
      v = json_integer(*(const unsigned *)(const void *)field);
    else if (keys[i].kind == K_ENUM)
      v = json_string(keys[i].choices[*(const unsigned *)(const void *)field]);
    else
      v = json_boolean(*(const bool *)(const void *)field);
    if (json_object_set_new(obj, keys[i].key, v) < 0) {
      json_decref(obj);
      return NULL;
    }
  }
  return obj;
}
