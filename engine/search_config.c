/* Every tunable constant of the search (HTAM policy, AdaExplore tree), with defaults and
 * a JSON override parser. */
#include "engine/search_config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

enum key_kind { K_DOUBLE, K_UINT, K_BOOL };

/* One configurable field: its key, where it lives, its default and inclusive range
 * (lo_open excludes lo, for constants that divide). */
struct key_spec {
  const char *key;
  enum key_kind kind;
  size_t offset;
  double def, lo, hi;
  bool lo_open;
};

#define D(name, def, lo, hi, open) \
  {#name, K_DOUBLE, offsetof(struct search_config, name), def, lo, hi, open}
#define U(name, def, lo, hi) {#name, K_UINT, offsetof(struct search_config, name), def, lo, hi, false}
#define B(name, def) {#name, K_BOOL, offsetof(struct search_config, name), def, 0, 1, false}

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
  D(c, 0.3, 0, 100, false),
  D(tau, 0.1, 0, 100, true),
  D(ema_alpha, 0.3, 0, 1, true),
  B(deterministic, 0),
  D(local_c, 0.3, 0, 100, false),
  D(tree_c, 0.3, 0, 100, false),
  D(large_step_prob, 0.2, 0, 1, false),
  U(small_children_before_large, 2, 1, 1000),
  U(pool_size, 5, 1, SEARCH_MAX_POOL),
  U(recent_window, 5, 1, SEARCH_MAX_POOL),
  D(tree_reward_incorrect, 0.05, 0, 10, false),
  D(tree_reward_base, 0.4, 0, 10, false),
  D(tree_reward_span, 1.2, 0, 10, false),
  D(speedup_min, 0.1, 0, 1e6, true),
  D(speedup_max, 10, 0, 1e6, true),
};
#undef D
#undef U
#undef B

#define N_KEYS (sizeof keys / sizeof keys[0])

void search_config_defaults(struct search_config *ret_cfg) {
  struct search_config cfg;
  memset(&cfg, 0, sizeof cfg);
  for (size_t i = 0; i < N_KEYS; i++) {
    char *field = (char *)&cfg + keys[i].offset;
    if (keys[i].kind == K_DOUBLE)
      *(double *)(void *)field = keys[i].def;
    else if (keys[i].kind == K_UINT)
      *(unsigned *)(void *)field = (unsigned)keys[i].def;
    else
      *(bool *)(void *)field = keys[i].def != 0;
  }
  *ret_cfg = cfg;
}

static const struct key_spec *find_key(const char *key) {
  for (size_t i = 0; i < N_KEYS; i++)
    if (strcmp(keys[i].key, key) == 0)
      return &keys[i];
  return NULL;
}

/* Checks value against spec and stores it into cfg. Returns 0, or -1 with err filled. */
static int apply_one(struct search_config *cfg, const struct key_spec *spec,
                     const json_t *value, char *err, size_t errlen) {
  char *field = (char *)cfg + spec->offset;
  if (spec->kind == K_BOOL) {
    if (!json_is_boolean(value)) {
      snprintf(err, errlen, "%s: must be a boolean", spec->key);
      return -1;
    }
    *(bool *)(void *)field = json_is_true(value);
    return 0;
  }
  if (spec->kind == K_UINT && !json_is_integer(value)) {
    snprintf(err, errlen, "%s: must be an integer", spec->key);
    return -1;
  }
  if (!json_is_number(value)) {
    snprintf(err, errlen, "%s: must be a number", spec->key);
    return -1;
  }
  double v = json_number_value(value);
  bool below = spec->lo_open ? !(v > spec->lo) : !(v >= spec->lo);
  if (!isfinite(v) || below || !(v <= spec->hi)) {
    snprintf(err, errlen, "%s: must be in %s%g, %g]", spec->key, spec->lo_open ? "(" : "[",
             spec->lo, spec->hi);
    return -1;
  }
  if (spec->kind == K_UINT)
    *(unsigned *)(void *)field = (unsigned)json_integer_value(value);
  else
    *(double *)(void *)field = v;
  return 0;
}

int search_config_apply_json(struct search_config *cfg, const json_t *obj, char *err,
                             size_t errlen) {
  if (!json_is_object(obj)) {
    snprintf(err, errlen, "search configuration: must be a JSON object");
    return -1;
  }
  struct search_config next = *cfg;
  const char *key;
  json_t *value;
  json_object_foreach((json_t *)obj, key, value) {
    const struct key_spec *spec = find_key(key);
    if (!spec) {
      snprintf(err, errlen, "%s: unknown search configuration key", key);
      return -1;
    }
    if (apply_one(&next, spec, value, err, errlen) < 0)
      return -1;
  }
  if (!(next.speedup_min < next.speedup_max)) {
    snprintf(err, errlen, "speedup_min: must be below speedup_max (%g)", next.speedup_max);
    return -1;
  }
  *cfg = next;
  return 0;
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
    else
      v = json_boolean(*(const bool *)(const void *)field);
    if (json_object_set_new(obj, keys[i].key, v) < 0) {
      json_decref(obj);
      return NULL;
    }
  }
  return obj;
}
