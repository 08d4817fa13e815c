/* Knob sets of the builtin templates: moves from the seed memory, -D options, JSON. */
#include <stdio.h>
#include <string.h>

#include "proposers/builtin/builtin.h"

/* Where each numeric knob lives, its -D name, and its allowed range. */
static const struct knob_field {
  const char *name;   /* as in seed-memory moves and -D options */
  size_t offset;
  int lo, hi;
} fields[] = {
  {"BLOCK", offsetof(struct knob_set, block), 32, 1024},
  {"VEC", offsetof(struct knob_set, vec), 1, 8},
  {"ITEMS", offsetof(struct knob_set, items), 1, 64},
  {"ROWS", offsetof(struct knob_set, rows), 1, 64},
  {"BM", offsetof(struct knob_set, bm), 8, 256},
  {"BN", offsetof(struct knob_set, bn), 8, 256},
  {"BK", offsetof(struct knob_set, bk), 4, 128},
  {"TM", offsetof(struct knob_set, tm), 1, 16},
  {"TN", offsetof(struct knob_set, tn), 1, 16},
  {"STAGES", offsetof(struct knob_set, stages), 1, 6},
  {"UNROLL", offsetof(struct knob_set, unroll), 1, 16},
  {"MINB", offsetof(struct knob_set, minb), 0, 32},
  {"SPLIT", offsetof(struct knob_set, split), 1, 1024},
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

static int *field_ptr(struct knob_set *k, const struct knob_field *f) {
  return (int *)((char *)k + f->offset);
}

static const struct knob_field *find_field(const char *name) {
  for (size_t i = 0; name && i < N_FIELDS; i++)
    if (strcmp(fields[i].name, name) == 0)
      return &fields[i];
  return NULL;
}

int *knob_slot(struct knob_set *knobs, const char *name) {
  const struct knob_field *f = find_field(name);
  return f ? field_ptr(knobs, f) : NULL;
}

const char *knob_name(size_t i) {
  return i < N_FIELDS ? fields[i].name : NULL;
}

/* Applies a MODE move: only "set" with a name of [a-z0-9_]. */
static int apply_mode(struct knob_set *knobs, const char *op, const json_t *value, char *why,
                      size_t whylen) {
  const char *mode = json_string_value(value);
  size_t n = mode ? strlen(mode) : 0;
  if (strcmp(op, "set") != 0 || n == 0 || n >= sizeof knobs->mode ||
      strspn(mode, "abcdefghijklmnopqrstuvwxyz0123456789_") != n) {
    snprintf(why, whylen, "MODE moves must set a short lowercase name");
    return -1;
  }
  memcpy(knobs->mode, mode, n + 1);
  return 0;
}

int knob_apply_move(struct knob_set *knobs, const json_t *move, char *why, size_t whylen) {
  const char *knob = json_string_value(json_object_get(move, "knob"));
  const char *op = json_string_value(json_object_get(move, "op"));
  const json_t *value = json_object_get(move, "value");
  if (!knob || !op || !value) {
    snprintf(why, whylen, "a knob move needs knob, op and value");
    return -1;
  }
  if (strcmp(knob, "MODE") == 0)
    return apply_mode(knobs, op, value, why, whylen);
  const struct knob_field *f = find_field(knob);
  if (!f || !json_is_integer(value)) {
    snprintf(why, whylen, f ? "%s: the value must be an integer" : "unknown knob %s", knob);
    return -1;
  }
  long long v = json_integer_value(value), cur = *field_ptr(knobs, f), next;
  if (strcmp(op, "set") == 0)
    next = v;
  else if (strcmp(op, "mul") == 0)
    next = (cur ? cur : 1) * v;
  else if (strcmp(op, "div") == 0 && v > 0)
    next = (cur ? cur : 1) / v;
  else {
    snprintf(why, whylen, "%s: unknown op %s", knob, op);
    return -1;
  }
  if (next < f->lo || next > f->hi) {
    snprintf(why, whylen, "%s would become %lld, outside [%d, %d]", knob, next, f->lo, f->hi);
    return -1;
  }
  *field_ptr(knobs, f) = (int)next;
  return 0;
}

json_t *knob_options(const struct knob_set *knobs) {
  json_t *opts = json_array();
  for (size_t i = 0; opts && i < N_FIELDS; i++) {
    int v = *field_ptr((struct knob_set *)knobs, &fields[i]);
    if (v)
      json_array_append_new(opts, json_sprintf("-D%s=%d", fields[i].name, v));
  }
  if (opts && knobs->mode[0]) {
    char upper[sizeof knobs->mode];
    size_t n = strlen(knobs->mode);
    for (size_t i = 0; i <= n; i++)
      upper[i] = (char)(knobs->mode[i] >= 'a' && knobs->mode[i] <= 'z' ? knobs->mode[i] - 32
                                                                       : knobs->mode[i]);
    json_array_append_new(opts, json_sprintf("-DMODE_%s=1", upper));
  }
  return opts;
}

json_t *knob_to_json(const struct knob_set *knobs) {
  json_t *obj = json_object();
  for (size_t i = 0; obj && i < N_FIELDS; i++)
    json_object_set_new(obj, fields[i].name,
                        json_integer(*field_ptr((struct knob_set *)knobs, &fields[i])));
  if (obj)
    json_object_set_new(obj, "MODE", json_string(knobs->mode));
  return obj;
}

int knob_from_json(const json_t *obj, struct knob_set *ret_knobs) {
  struct knob_set k = {0};
  for (size_t i = 0; i < N_FIELDS; i++) {
    json_t *v = json_object_get(obj, fields[i].name);
    if (v && !json_is_integer(v))
      return -1;
    *field_ptr(&k, &fields[i]) = v ? (int)json_integer_value(v) : 0;
  }
  const char *mode = json_string_value(json_object_get(obj, "MODE"));
  if (mode && strlen(mode) >= sizeof k.mode)
    return -1;
  snprintf(k.mode, sizeof k.mode, "%s", mode ? mode : "");
  *ret_knobs = k;
  return 0;
}
