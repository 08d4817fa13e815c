/* Validation of memory records and import documents: every field, its bounds, and the
 * JSON path of the first problem. */
#include "store/memory_validate.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schema/memory_vocab.h"
#include "store/util.h"

#define KNOB_NAME_MAX 32

/* How a key is treated in one mode: required, optional, read-only (present is an
 * error that says so), or unknown. */
enum presence { P_REQUIRED = 'R', P_OPTIONAL = 'O', P_READONLY = 'X', P_UNKNOWN = '-' };

enum kind {
  K_ID, K_NAME, K_TEXT, K_LIST, K_TRIGGERS, K_FAMILIES, K_PRIOR, K_KNOB,
  K_GLOBAL_STATS, K_LOCAL_STATS, K_EDGE_STATS, K_EVIDENCE, K_TIME,
  K_REF, K_NULLABLE_REF, K_REWARD, K_OUTCOME, K_NOTE,
};

static const struct memory_field global_rules[] = {
  {"id", K_ID, "OXR"},           {"name", K_NAME, "ROR"},
  {"intent", K_TEXT, "OOO"},     {"objectives", K_LIST, "OOO"},
  {"triggers", K_TRIGGERS, "OOO"}, {"risks", K_LIST, "OOO"},
  {"prior", K_PRIOR, "OOO"},     {"stats", K_GLOBAL_STATS, "XXO"},
  {"local_count", K_ID, "XX-"}, /* derived: only ever refused, never checked */  {"created_at", K_TIME, "XXO"},
  {"updated_at", K_TIME, "XXO"}, {NULL, K_ID, ""},
};

static const struct memory_field local_rules[] = {
  {"id", K_ID, "OXR"},             {"global", K_ID, "XOR"},
  {"name", K_NAME, "ROR"},         {"edit_pattern", K_TEXT, "OOO"},
  {"knob_move", K_KNOB, "OOO"},    {"checks", K_LIST, "OOO"},
  {"families", K_FAMILIES, "OOO"}, {"stats", K_LOCAL_STATS, "XXO"},
  {"evidence", K_EVIDENCE, "XXO"}, {"created_at", K_TIME, "XXO"},
  {"updated_at", K_TIME, "XXO"},   {NULL, K_ID, ""},
};

static const struct memory_field edge_rules[] = {
  {"from", K_ID, "RXR"},         {"to", K_ID, "RXR"},
  {"when", K_TEXT, "OOO"},       {"rationale", K_TEXT, "OOO"},
  {"risks", K_LIST, "OOO"},      {"stats", K_EDGE_STATS, "XXO"},
  {"created_at", K_TIME, "XXO"}, {"updated_at", K_TIME, "XXO"},
  {NULL, K_ID, ""},
};

/* Evidence rows exist only in import documents. */
static const struct memory_field evidence_rules[] = {
  {"task_id", K_NULLABLE_REF, "--O"}, {"candidate_id", K_NULLABLE_REF, "--O"},
  {"reward", K_REWARD, "--R"},        {"outcome", K_OUTCOME, "--R"},
  {"note", K_NOTE, "--O"},            {"created_at", K_TIME, "--O"},
  {NULL, K_ID, ""},
};

void memory_why(struct memory_invalid *why, enum memory_problem problem, const char *field,
                const char *fmt, ...) {
  if (!why)
    return;
  why->problem = problem;
  snprintf(why->field, sizeof why->field, "%s", field ? field : "");
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why->message, sizeof why->message, fmt, ap);
  va_end(ap);
}

/* prefix + key as a JSON path: "key", "prefix.key", "prefix[3]" for key "[3]", or
 * prefix alone for key "". */
static void path_join(char out[128], const char *prefix, const char *key) {
  if (!prefix || !*prefix || !*key)
    snprintf(out, 128, "%s", prefix && *prefix ? prefix : key);
  else
    snprintf(out, 128, "%s%s%s", prefix, key[0] == '[' ? "" : ".", key);
}

int memory_invalid_at(struct memory_invalid *why, enum memory_problem problem, const char *prefix,
                      const char *key, const char *fmt, ...) {
  char path[128], msg[256];
  path_join(path, prefix, key);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  memory_why(why, problem, path, "%s: %s", *path ? path : "document", msg);
  return -1;
}

bool memory_id_valid(const char *id) {
  if (!id || !(id[0] >= 'a' && id[0] <= 'z'))
    return false;
  size_t n = 1;
  for (const char *p = id + 1; *p; p++, n++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
      return false;
  return n >= 2 && n <= MEMORY_ID_MAX;
}

/* A JSON string without NUL bytes of min..max characters (code points, as the spec's
 * minLength and maxLength count them; Jansson holds valid UTF-8). */
bool memory_string_valid(const json_t *v, size_t min, size_t max) {
  if (!json_is_string(v))
    return false;
  size_t len = json_string_length(v), chars = 0;
  const char *s = json_string_value(v);
  if (len != strlen(s))
    return false;
  for (size_t i = 0; i < len; i++)
    chars += ((unsigned char)s[i] & 0xC0) != 0x80;
  return chars >= min && chars <= max;
}

/* The two digits at s as a number. */
static int two_digits(const char *s) {
  return (s[0] - '0') * 10 + (s[1] - '0');
}

/* The form store_time_now writes, YYYY-MM-DDTHH:MM:SS.mmmZ, and a real instant (an RFC
 * 3339 date-time, years 0001-9999): exports hand it back, and the spec's date-time
 * format holds them to it. */
bool memory_time_valid(const json_t *v) {
  static const char form[] = "dddd-dd-ddTdd:dd:dd.dddZ";
  if (!memory_string_valid(v, sizeof form - 1, sizeof form - 1))
    return false;
  const char *s = json_string_value(v);
  for (size_t i = 0; form[i]; i++)
    if (form[i] == 'd' ? !(s[i] >= '0' && s[i] <= '9') : s[i] != form[i])
      return false;
  int year = two_digits(s) * 100 + two_digits(s + 2), month = two_digits(s + 5);
  int day = two_digits(s + 8);
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  return year >= 1 && month >= 1 && month <= 12 && day >= 1 &&
         day <= days[month - 1] + (month == 2 && leap) && two_digits(s + 11) <= 23 &&
         two_digits(s + 14) <= 59 && two_digits(s + 17) <= 59;
}

/* A knob mode name: [a-z0-9_]{1,64} (modes may start with a digit, e.g. "3xtf32"). */
static bool mode_ok(const json_t *v) {
  if (!memory_string_valid(v, 1, MEMORY_ID_MAX))
    return false;
  for (const char *c = json_string_value(v); *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_'))
      return false;
  return true;
}

static bool finite_number(const json_t *v) {
  return json_is_number(v) && isfinite(json_number_value(v));
}

/* A list of strings; vocab (may be NULL) must know each, and then none may repeat. */
static int check_list(const json_t *v, bool (*vocab)(const char *), const char *prefix,
                      const char *key, struct memory_invalid *why) {
  if (!json_is_array(v) || json_array_size(v) > MEMORY_LIST_MAX)
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                             "must be an array of at most %d strings", MEMORY_LIST_MAX);
  char path[128], item[32];
  path_join(path, prefix, key);
  for (size_t i = 0; i < json_array_size(v); i++) {
    const json_t *s = json_array_get(v, i);
    snprintf(item, sizeof item, "[%zu]", i);
    if (!memory_string_valid(s, 1, MEMORY_ITEM_MAX))
      return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, item,
                               "must be a string of 1..%d characters", MEMORY_ITEM_MAX);
    if (vocab && !vocab(json_string_value(s)))
      return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, item, "unknown value '%s'",
                               json_string_value(s));
    for (size_t j = 0; vocab && j < i; j++)
      if (strcmp(json_string_value(json_array_get(v, j)), json_string_value(s)) == 0)
        return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, item, "'%s' is listed twice",
                                 json_string_value(s));
  }
  return 0;
}

/* knob_move: null, or {"knob": NAME, "op": set|mul|div, "value": 1..1024, or a mode
 * name for set}. mul and div need a factor of at least 2. */
static int check_knob(const json_t *v, const char *prefix, const char *key,
                      struct memory_invalid *why) {
  if (json_is_null(v))
    return 0;
  char path[128];
  path_join(path, prefix, key);
  if (!json_is_object(v))
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key, "must be an object or null");
  const char *k;
  const json_t *m;
  json_object_foreach((json_t *)v, k, m) {
    if (strcmp(k, "knob") != 0 && strcmp(k, "op") != 0 && strcmp(k, "value") != 0)
      return memory_invalid_at(why, MEMORY_PROBLEM_UNKNOWN, path, k, "unknown key");
  }
  const json_t *knob = json_object_get(v, "knob"), *op = json_object_get(v, "op");
  const json_t *value = json_object_get(v, "value");
  const char *missing = !knob ? "knob" : !op ? "op" : !value ? "value" : NULL;
  if (missing)
    return memory_invalid_at(why, MEMORY_PROBLEM_MISSING, path, missing, "is required");
  bool name_ok = memory_string_valid(knob, 1, KNOB_NAME_MAX) && json_string_value(knob)[0] >= 'A' &&
                 json_string_value(knob)[0] <= 'Z';
  for (const char *c = name_ok ? json_string_value(knob) : ""; *c; c++)
    name_ok = name_ok && ((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_');
  if (!name_ok)
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, "knob",
                             "must match ^[A-Z][A-Z0-9_]{0,31}$");
  const char *o = json_is_string(op) ? json_string_value(op) : "";
  bool set = strcmp(o, "set") == 0;
  if (!set && strcmp(o, "mul") != 0 && strcmp(o, "div") != 0)
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, "op", "must be set, mul or div");
  if (json_is_integer(value)) {
    json_int_t x = json_integer_value(value);
    if (x >= (set ? 1 : 2) && x <= MEMORY_KNOB_VALUE_MAX)
      return 0;
  } else if (set && mode_ok(value)) {
    return 0;
  }
  return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, "value",
                           "must be an integer %s..%d%s", set ? "1" : "2", MEMORY_KNOB_VALUE_MAX,
                           set ? " or a [a-z0-9_]{1,64} string" : "");
}

/* A stats object: exactly the keys of the shape, each present. */
static int stats_keys(const json_t *v, const char *const *keys, const char *path,
                      struct memory_invalid *why) {
  if (!json_is_object(v))
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, "", "must be an object");
  const char *k;
  const json_t *m;
  json_object_foreach((json_t *)v, k, m) {
    size_t i = 0;
    while (keys[i] && strcmp(keys[i], k) != 0)
      i++;
    if (!keys[i])
      return memory_invalid_at(why, MEMORY_PROBLEM_UNKNOWN, path, k, "unknown key");
  }
  for (size_t i = 0; keys[i]; i++)
    if (!json_object_get(v, keys[i]))
      return memory_invalid_at(why, MEMORY_PROBLEM_MISSING, path, keys[i], "is required");
  return 0;
}

/* A count in [0, max]. */
static bool count_ok(const json_t *v, json_int_t max) {
  return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= max;
}

static int check_stats(const json_t *v, enum kind kind, const char *prefix, const char *key,
                       struct memory_invalid *why) {
  static const char *const gkeys[] = {"n", "successes", "improvements", "reward_sum", "ema",
                                      NULL};
  static const char *const lkeys[] = {"n", "successes", "reward_sum", NULL};
  static const char *const ekeys[] = {"n", "reward_sum", NULL};
  char path[128];
  path_join(path, prefix, key);
  const char *const *keys = kind == K_GLOBAL_STATS ? gkeys : kind == K_LOCAL_STATS ? lkeys : ekeys;
  if (stats_keys(v, keys, path, why) != 0)
    return -1;
  const json_t *n = json_object_get(v, "n");
  if (!finite_number(json_object_get(v, "reward_sum")))
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, "reward_sum",
                             "must be a finite number");
  if (kind == K_EDGE_STATS)
    return finite_number(n) && json_number_value(n) >= 0
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, "n", "must be a number >= 0");
  if (!count_ok(n, (json_int_t)1 << 53))
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, "n", "must be an integer >= 0");
  json_int_t tries = json_integer_value(n);
  for (size_t i = 1; keys[i] && strcmp(keys[i], "reward_sum") != 0; i++)
    if (!count_ok(json_object_get(v, keys[i]), tries))
      return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, keys[i],
                               "must be an integer in 0..n");
  if (kind == K_GLOBAL_STATS) {
    const json_t *ema = json_object_get(v, "ema");
    if (tries == 0 ? !json_is_null(ema) : !finite_number(ema))
      return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, "ema",
                               "must be null when n is 0 and a finite number otherwise");
  }
  return 0;
}

int memory_check_records(const json_t *v, size_t max, const char *what,
                         const struct memory_field *fields, const char *prefix,
                         const char *key, memory_value_check check,
                         struct memory_invalid *why) {
  if (!json_is_array(v) || json_array_size(v) > max)
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                             "must be an array of at most %zu %s", max, what);
  char path[128], item[160];
  path_join(path, prefix, key);
  for (size_t i = 0; i < json_array_size(v); i++) {
    snprintf(item, sizeof item, "%s[%zu]", path, i);
    if (memory_check_fields(json_array_get(v, i), fields, MEMORY_IMPORT, item, check, why) != 0)
      return -1;
  }
  return 0;
}

/* Checks one present value of a rule's kind. */
static int check_value(const json_t *v, int kind, const char *prefix, const char *key,
                       struct memory_invalid *why) {
  switch (kind) {
  case K_ID:
    return json_is_string(v) && memory_id_valid(json_string_value(v))
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be an id matching ^[a-z][a-z0-9_]{1,63}$");
  case K_NAME:
    return memory_string_valid(v, 1, MEMORY_NAME_MAX)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be a string of 1..%d characters", MEMORY_NAME_MAX);
  case K_TEXT:
    return memory_string_valid(v, 0, MEMORY_TEXT_MAX)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be a string of at most %d characters", MEMORY_TEXT_MAX);
  case K_LIST:
    return check_list(v, NULL, prefix, key, why);
  case K_TRIGGERS:
    return check_list(v, htam_trigger_known, prefix, key, why);
  case K_FAMILIES: return check_list(v, htam_family_known, prefix, key, why);
  case K_PRIOR:
    return finite_number(v) && fabs(json_number_value(v)) <= MEMORY_PRIOR_ABS_MAX
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be a number in [-%g, %g]", MEMORY_PRIOR_ABS_MAX,
                                   MEMORY_PRIOR_ABS_MAX);
  case K_KNOB:
    return check_knob(v, prefix, key, why);
  case K_GLOBAL_STATS:
  case K_LOCAL_STATS:
  case K_EDGE_STATS: return check_stats(v, kind, prefix, key, why);
  case K_EVIDENCE:
    return memory_check_records(v, MEMORY_EVIDENCE_KEEP, "rows", evidence_rules, prefix, key,
                                check_value, why);
  case K_TIME:
    return memory_time_valid(v)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be a UTC time like 2026-11-29T07:42:04.123Z");
  case K_REF:
  case K_NULLABLE_REF:
    return (kind == K_NULLABLE_REF && json_is_null(v)) || memory_string_valid(v, 1, MEMORY_REF_MAX)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be a string of 1..%d characters or null", MEMORY_REF_MAX);
  case K_REWARD:
    return finite_number(v) ? 0
                            : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                                "must be a finite number");
  case K_OUTCOME:
    return memory_string_valid(v, 1, MEMORY_OUTCOME_MAX)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be a string of 1..%d characters", MEMORY_OUTCOME_MAX);
  case K_NOTE:
    return json_is_null(v) || memory_string_valid(v, 0, MEMORY_NOTE_MAX)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be a string of at most %d characters or null",
                                   MEMORY_NOTE_MAX);
  }
  return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key, "unchecked kind");
}

int memory_check_fields(const json_t *obj, const struct memory_field *fields, enum memory_mode mode,
                        const char *prefix, memory_value_check check, struct memory_invalid *why) {
  if (!json_is_object(obj))
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, "", "must be an object");
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)obj, key, v) {
    const struct memory_field *r = fields;
    while (r->key && strcmp(r->key, key) != 0)
      r++;
    if (!r->key || r->modes[mode] == P_UNKNOWN)
      return memory_invalid_at(why, MEMORY_PROBLEM_UNKNOWN, prefix, key, "unknown key");
    if (r->modes[mode] == P_READONLY)
      return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key, "cannot be set here");
  }
  for (const struct memory_field *r = fields; r->key; r++) {
    v = json_object_get(obj, r->key);
    if (!v && r->modes[mode] == P_REQUIRED)
      return memory_invalid_at(why, MEMORY_PROBLEM_MISSING, prefix, r->key, "is required");
    if (v && check(v, r->kind, prefix, r->key, why) != 0)
      return -1;
  }
  return 0;
}

int memory_check_global(const json_t *obj, enum memory_mode mode, const char *prefix,
                        struct memory_invalid *ret_why) {
  return memory_check_fields(obj, global_rules, mode, prefix, check_value, ret_why);
}

int memory_check_local(const json_t *obj, enum memory_mode mode, const char *prefix,
                       struct memory_invalid *ret_why) {
  return memory_check_fields(obj, local_rules, mode, prefix, check_value, ret_why);
}

int memory_check_edge(const json_t *obj, enum memory_mode mode, const char *prefix,
                      struct memory_invalid *ret_why) {
  return memory_check_fields(obj, edge_rules, mode, prefix, check_value, ret_why);
}

/* ---- the whole document ---- */

/* A record's key for the uniqueness and reference checks: (a, b) and its position. */
struct key {
  const char *a, *b;
  size_t index;
};

static int key_cmp(const void *x, const void *y) {
  const struct key *p = x, *q = y;
  int c = strcmp(p->a, q->a);
  if (c == 0 && p->b && q->b)
    c = strcmp(p->b, q->b);
  if (c == 0)
    c = p->index < q->index ? -1 : p->index > q->index;
  return c;
}

/* True when (a, b) is in sorted keys[0..n-1]. */
static bool key_find(const struct key *keys, size_t n, const char *a, const char *b) {
  size_t lo = 0, hi = n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(keys[mid].a, a);
    if (c == 0 && b)
      c = strcmp(keys[mid].b, b);
    if (c == 0)
      return true;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return false;
}

/* Sorts keys and reports the later record of the first equal pair found. */
static int check_unique(struct key *keys, size_t n, const char *list, const char *field,
                        struct memory_invalid *why) {
  qsort(keys, n, sizeof *keys, key_cmp);
  for (size_t i = 1; i < n; i++) {
    bool same = strcmp(keys[i - 1].a, keys[i].a) == 0 &&
                (!keys[i].b || strcmp(keys[i - 1].b, keys[i].b) == 0);
    if (same) {
      char prefix[64];
      snprintf(prefix, sizeof prefix, "%s[%zu]", list, keys[i].index);
      return memory_invalid_at(why, MEMORY_PROBLEM_DUPLICATE, prefix, field,
                               "'%s%s%s' appears twice", keys[i].a, keys[i].b ? "' -> '" : "",
                               keys[i].b ? keys[i].b : "");
    }
  }
  return 0;
}

/* Checks every record of list (an array) with check, after the count bound. */
static int check_records(const json_t *doc, const char *list, size_t max,
                         int (*check)(const json_t *, enum memory_mode, const char *,
                                      struct memory_invalid *),
                         struct memory_invalid *why) {
  const json_t *a = json_object_get(doc, list);
  if (!a)
    return memory_invalid_at(why, MEMORY_PROBLEM_MISSING, "", list, "is required");
  if (!json_is_array(a) || json_array_size(a) > max)
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, "", list,
                             "must be an array of at most %zu records", max);
  char prefix[64];
  for (size_t i = 0; i < json_array_size(a); i++) {
    snprintf(prefix, sizeof prefix, "%s[%zu]", list, i);
    if (check(json_array_get(a, i), MEMORY_IMPORT, prefix, why) != 0)
      return -1;
  }
  return 0;
}

static int check_top(const json_t *doc, struct memory_invalid *why) {
  if (!json_is_object(doc))
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, "", "", "must be a JSON object");
  static const char *const keys[] = {"version", "exported_at", "globals", "locals", "edges", NULL};
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)doc, k, v) {
    size_t i = 0;
    while (keys[i] && strcmp(keys[i], k) != 0)
      i++;
    if (!keys[i])
      return memory_invalid_at(why, MEMORY_PROBLEM_UNKNOWN, "", k, "unknown key");
  }
  const json_t *version = json_object_get(doc, "version");
  if (!version)
    return memory_invalid_at(why, MEMORY_PROBLEM_MISSING, "", "version", "is required");
  if (!json_is_integer(version) || json_integer_value(version) != 1)
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, "", "version", "must be 1");
  const json_t *at = json_object_get(doc, "exported_at");
  if (at && !memory_time_valid(at))
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, "", "exported_at",
                             "must be a UTC time like 2026-11-29T07:42:04.123Z");
  if (check_records(doc, "globals", MEMORY_MAX_GLOBALS, memory_check_global, why) != 0 ||
      check_records(doc, "locals", MEMORY_MAX_LOCALS, memory_check_local, why) != 0 ||
      check_records(doc, "edges", MEMORY_MAX_EDGES, memory_check_edge, why) != 0)
    return -1;
  return 0;
}

/* Unique ids and pairs, and every reference naming a global of the document. keys has
 * room for the largest list. */
static int check_links(const json_t *doc, struct key *keys, struct key *globals,
                       struct memory_invalid *why) {
  const json_t *g = json_object_get(doc, "globals"), *l = json_object_get(doc, "locals");
  const json_t *e = json_object_get(doc, "edges");
  size_t ng = json_array_size(g), nl = json_array_size(l), ne = json_array_size(e);
  for (size_t i = 0; i < ng; i++)
    globals[i] = (struct key){json_string_value(json_object_get(json_array_get(g, i), "id")),
                              NULL, i};
  if (check_unique(globals, ng, "globals", "id", why) != 0)
    return -1;
  char prefix[64];
  for (size_t i = 0; i < nl; i++) {
    const json_t *rec = json_array_get(l, i);
    keys[i] = (struct key){json_string_value(json_object_get(rec, "id")), NULL, i};
    if (!key_find(globals, ng, json_string_value(json_object_get(rec, "global")), NULL)) {
      snprintf(prefix, sizeof prefix, "locals[%zu]", i);
      return memory_invalid_at(why, MEMORY_PROBLEM_REFERENCE, prefix, "global",
                               "names no global node");
    }
  }
  if (check_unique(keys, nl, "locals", "id", why) != 0)
    return -1;
  for (size_t i = 0; i < ne; i++) {
    const json_t *rec = json_array_get(e, i);
    const char *from = json_string_value(json_object_get(rec, "from"));
    const char *to = json_string_value(json_object_get(rec, "to"));
    snprintf(prefix, sizeof prefix, "edges[%zu]", i);
    if (!key_find(globals, ng, from, NULL))
      return memory_invalid_at(why, MEMORY_PROBLEM_REFERENCE, prefix, "from",
                               "names no global node");
    if (!key_find(globals, ng, to, NULL))
      return memory_invalid_at(why, MEMORY_PROBLEM_REFERENCE, prefix, "to", "names no global node");
    keys[i] = (struct key){from, to, i};
  }
  return check_unique(keys, ne, "edges", "", why);
}

int memory_check_document(const json_t *doc, struct memory_invalid *ret_why) {
  if (check_top(doc, ret_why) != 0)
    return -1;
  size_t ng = json_array_size(json_object_get(doc, "globals"));
  size_t nl = json_array_size(json_object_get(doc, "locals"));
  size_t ne = json_array_size(json_object_get(doc, "edges"));
  size_t most = nl > ne ? nl : ne;
  struct key *keys = st_calloc(most ? most : 1, sizeof *keys);
  struct key *globals = keys ? st_calloc(ng ? ng : 1, sizeof *globals) : NULL;
  if (!globals) {
    free(keys);
    return -ENOMEM;
  }
  int rc = check_links(doc, keys, globals, ret_why);
  free(keys);
  free(globals);
  return rc;
}

void memory_slug(const char *name, char out[MEMORY_ID_MAX + 1]) {
  enum { BASE_MAX = MEMORY_ID_MAX - 5 }; /* room for "_NNN" */
  size_t n = 0;
  bool gap = false;
  for (const unsigned char *p = (const unsigned char *)(name ? name : ""); *p && n < BASE_MAX; p++) {
    unsigned char c = *p >= 'A' && *p <= 'Z' ? (unsigned char)(*p - 'A' + 'a') : *p;
    bool keep = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!keep) {
      gap = n > 0;
      continue;
    }
    if (n == 0 && c >= '0' && c <= '9') {
      out[n++] = 'n';
      out[n++] = '_';
    }
    if (gap && n + 1 < BASE_MAX)
      out[n++] = '_';
    gap = false;
    if (n < BASE_MAX)
      out[n++] = (char)c;
  }
  out[n] = '\0';
  if (n == 0)
    snprintf(out, MEMORY_ID_MAX + 1, "node");
  else if (n == 1)
    snprintf(out + 1, MEMORY_ID_MAX, "_x");
}
