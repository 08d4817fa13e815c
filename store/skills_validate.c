/* Validation of skill rules, their builtin constraints and skill import documents: every
 * field, its bounds, and the JSON path of the first problem. */
#include "store/skills_validate.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ids.h"
#include "schema/memory_vocab.h"
#include "store/util.h"

const char *const skill_knobs[] = {"BLOCK", "VEC", "ITEMS", "ROWS",   "BM",   "BN",    "BK",
                                   "TM",    "TN",  "STAGES", "UNROLL", "MINB", "SPLIT", "MODE",
                                   NULL};
const char *const skill_ops[] = {"eq", "ne", "gt", "ge", "lt", "le", NULL};
const char *const skill_features[] = {"inner", "numel", NULL};
const char *const skill_predicates[] = {"multiple_of", "not_multiple_of", "lt", "ge", NULL};

static const char *const origins[] = {"grouping", "llm", "user", "import", NULL};

/* How a key is treated in each enum memory_mode (CREATE, PATCH, IMPORT): required,
 * optional, read-only (present is an error that says so), or unknown. */
enum presence { P_REQUIRED = 'R', P_OPTIONAL = 'O', P_READONLY = 'X', P_UNKNOWN = '-' };

enum kind {
  K_ID, K_RULE, K_SCORE, K_FAMILY, K_BOOL, K_CONSTRAINT, K_ORIGIN, K_SIGNATURE,
  K_EXAMPLE_SIGNATURE, K_COUNT, K_EXAMPLES, K_TIME, K_REF, K_CLASS, K_MESSAGE, K_DERIVED,
};

static const struct memory_field skill_rules[] = {
  {"id", K_ID, "XXO"},           {"rule", K_RULE, "ROR"},
  {"score", K_SCORE, "OOO"},     {"family", K_FAMILY, "OOO"},
  {"enabled", K_BOOL, "OOO"},    {"constraint", K_CONSTRAINT, "OOO"},
  {"origin", K_ORIGIN, "XXO"},   {"signature", K_SIGNATURE, "XXO"},
  {"refusals", K_COUNT, "XXO"},  {"examples", K_EXAMPLES, "XXO"},
  {"example_count", K_DERIVED, "XX-"},
  {"created_at", K_TIME, "XXO"}, {"updated_at", K_TIME, "XXO"},
  {NULL, K_ID, ""},
};

/* Examples exist only in import documents. */
static const struct memory_field example_rules[] = {
  {"task_id", K_REF, "--O"},     {"candidate_id", K_REF, "--O"},
  {"class", K_CLASS, "--R"},     {"signature", K_EXAMPLE_SIGNATURE, "--R"},
  {"message", K_MESSAGE, "--O"}, {"created_at", K_TIME, "--O"},
  {NULL, K_ID, ""},
};

/* prefix + key as a JSON path, as memory_validate.c writes them; a path longer than 127
 * bytes is cut (it only names the field in an error message). */
static void path_join(char out[128], const char *prefix, const char *key) {
  size_t n = 0;
  const char *parts[3] = {prefix && *prefix ? prefix : "",
                          prefix && *prefix && *key && key[0] != '[' ? "." : "",
                          prefix && *prefix && !*key ? "" : key};
  for (size_t i = 0; i < 3; i++)
    for (const char *p = parts[i]; *p && n < 127; p++)
      out[n++] = *p;
  out[n] = '\0';
}


static bool in_list(const char *const *list, const char *s) {
  for (size_t i = 0; s && list[i]; i++)
    if (strcmp(list[i], s) == 0)
      return true;
  return false;
}



static bool int_in(const json_t *v, json_int_t lo, json_int_t hi) {
  return json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi;
}

bool skill_rule_valid(const char *rule) {
  size_t n = rule ? strlen(rule) : 0;
  if (n < SKILL_RULE_MIN || n > SKILL_RULE_MAX ||
      strncmp(rule, SKILL_RULE_PREFIX, strlen(SKILL_RULE_PREFIX)) != 0 || rule[n - 1] != '.')
    return false;
  for (size_t i = 0; i < n; i++)  /* printable ASCII: bytes are characters */
    if (rule[i] < ' ' || rule[i] > '~')
      return false;
  return true;
}

/* A mode name: [a-z0-9_]{1,SKILL_MODE_MAX}. */
static bool mode_ok(const json_t *v) {
  if (!memory_string_valid(v, 1, SKILL_MODE_MAX))
    return false;
  const char *s = json_string_value(v);
  return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(s);
}

/* One condition of "when": "family", or "<feature>_<predicate>" with its bound. */
static int check_condition(const char *key, const json_t *v, const char *path,
                           struct memory_invalid *why) {
  if (strcmp(key, "family") == 0)
    return json_is_string(v) && htam_family_known(json_string_value(v))
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, key, "must be an op family");
  for (size_t f = 0; skill_features[f]; f++) {
    size_t n = strlen(skill_features[f]);
    if (strncmp(key, skill_features[f], n) != 0 || key[n] != '_' ||
        !in_list(skill_predicates, key + n + 1))
      continue;
    bool multiple = strstr(key + n + 1, "multiple_of") != NULL;
    if (multiple ? int_in(v, 2, SKILL_MULTIPLE_MAX) : int_in(v, 1, SKILL_BOUND_MAX))
      return 0;
    return multiple ? memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, key,
                                        "must be an integer 2..%d", SKILL_MULTIPLE_MAX)
                    : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, key,
                                        "must be an integer 1..%lld", (long long)SKILL_BOUND_MAX);
  }
  return memory_invalid_at(
      why, MEMORY_PROBLEM_UNKNOWN, path, key,
      "unknown condition (family, or <inner|numel>_<multiple_of|not_multiple_of|lt|ge>)");
}

static int check_when(const json_t *v, const char *path, struct memory_invalid *why) {
  if (!json_is_object(v) || json_object_size(v) > SKILL_WHEN_MAX)
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, "when",
                             "must be an object of at most %d conditions", SKILL_WHEN_MAX);
  char when_path[128];
  path_join(when_path, path, "when");
  const char *key;
  const json_t *c;
  json_object_foreach((json_t *)v, key, c) {
    if (check_condition(key, c, when_path, why) != 0)
      return -1;
  }
  return 0;
}

int skill_check_constraint(const json_t *v, const char *prefix, const char *key,
                           struct memory_invalid *why) {
  if (json_is_null(v))
    return 0;
  if (!json_is_object(v))
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key, "must be an object or null");
  char path[128];
  path_join(path, prefix, key);
  const char *k;
  const json_t *m;
  json_object_foreach((json_t *)v, k, m) {
    if (strcmp(k, "knob") && strcmp(k, "op") && strcmp(k, "value") && strcmp(k, "when"))
      return memory_invalid_at(why, MEMORY_PROBLEM_UNKNOWN, path, k, "unknown key");
  }
  const json_t *knob = json_object_get(v, "knob"), *op = json_object_get(v, "op");
  const json_t *value = json_object_get(v, "value"), *when = json_object_get(v, "when");
  const char *missing = !knob ? "knob" : !op ? "op" : !value ? "value" : NULL;
  if (missing)
    return memory_invalid_at(why, MEMORY_PROBLEM_MISSING, path, missing, "is required");
  const char *kn = json_string_value(knob), *o = json_string_value(op);
  if (!in_list(skill_knobs, kn))
    return memory_invalid_at(
        why, MEMORY_PROBLEM_INVALID, path, "knob",
        "must be one of BLOCK, VEC, ITEMS, ROWS, BM, BN, BK, TM, TN, STAGES, UNROLL, "
        "MINB, SPLIT, MODE");
  bool mode = strcmp(kn, "MODE") == 0;
  if (!in_list(skill_ops, o) || (mode && strcmp(o, "eq") && strcmp(o, "ne")))
    return memory_invalid_at(
        why, MEMORY_PROBLEM_INVALID, path, "op",
        mode ? "must be eq or ne for MODE" : "must be eq, ne, gt, ge, lt or le");
  if (mode ? !mode_ok(value) : !int_in(value, 0, SKILL_KNOB_VALUE_MAX))
    return mode
               ? memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, "value",
                                   "must be a mode name matching ^[a-z0-9_]{1,%d}$", SKILL_MODE_MAX)
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, path, "value",
                                   "must be an integer 0..%d", SKILL_KNOB_VALUE_MAX);
  return when ? check_when(when, path, why) : 0;
}

static int check_value(const json_t *v, int kind, const char *prefix, const char *key,
                       struct memory_invalid *why) {
  switch (kind) {
  case K_ID:
    return int_in(v, 1, (json_int_t)1 << 53)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be an integer >= 1");
  case K_RULE:
    return json_is_string(v) && memory_string_valid(v, 0, SKILL_RULE_MAX) &&
                   skill_rule_valid(json_string_value(v))
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be one sentence of %d..%d printable ASCII characters that "
                                   "starts with \"You cannot \" and "
                                   "ends with \".\"",
                                   SKILL_RULE_MIN, SKILL_RULE_MAX);
  case K_SCORE:
    return int_in(v, 0, SKILL_SCORE_MAX)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be an integer 0..%d", SKILL_SCORE_MAX);
  case K_FAMILY:
    return json_is_null(v) || (json_is_string(v) && htam_family_known(json_string_value(v)))
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be an op family or null");
  case K_BOOL:
    return json_is_boolean(v)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key, "must be a boolean");
  case K_CONSTRAINT:
    return skill_check_constraint(v, prefix, key, why);
  case K_ORIGIN:
    return json_is_string(v) && in_list(origins, json_string_value(v))
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be grouping, llm, user or import");
  case K_SIGNATURE:
  case K_EXAMPLE_SIGNATURE:
    return (kind == K_SIGNATURE && json_is_null(v)) ||
                   memory_string_valid(v, 1, SKILL_SIGNATURE_MAX)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be a string of 1..%d characters%s", SKILL_SIGNATURE_MAX,
                                   kind == K_SIGNATURE ? " or null" : "");
  case K_COUNT:
    return int_in(v, 0, SKILL_REFUSALS_MAX) ? 0
                                            : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix,
                                                                key, "must be an integer >= 0");
  case K_EXAMPLES:
    return memory_check_records(v, SKILL_EXAMPLES_KEEP, "examples", example_rules, prefix,
                                key, check_value, why);
  case K_TIME:
    return memory_time_valid(v)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be a UTC time like 2026-11-29T07:42:04.123Z");
  case K_REF:
    return json_is_null(v) || (json_is_string(v) && id_valid(json_string_value(v)))
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be a UUID or null");
  case K_CLASS:
    return memory_string_valid(v, 1, SKILL_CLASS_MAX)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be a string of 1..%d characters", SKILL_CLASS_MAX);
  case K_MESSAGE:
    return memory_string_valid(v, 0, SKILL_MESSAGE_MAX)
               ? 0
               : memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key,
                                   "must be a string of at most %d characters", SKILL_MESSAGE_MAX);
  case K_DERIVED:
    break;
  }
  return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, prefix, key, "cannot be set here");
}

int skill_check(const json_t *obj, enum memory_mode mode, const char *prefix,
                struct memory_invalid *ret_why) {
  return memory_check_fields(obj, skill_rules, mode, prefix, check_value, ret_why);
}

/* ---- the whole document ---- */

static int check_top(const json_t *doc, struct memory_invalid *why) {
  if (!json_is_object(doc))
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, "", "", "must be a JSON object");
  const char *k;
  const json_t *v;
  json_object_foreach((json_t *)doc, k, v) {
    if (strcmp(k, "version") && strcmp(k, "exported_at") && strcmp(k, "skills"))
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
  const json_t *skills = json_object_get(doc, "skills");
  if (!skills)
    return memory_invalid_at(why, MEMORY_PROBLEM_MISSING, "", "skills", "is required");
  if (!json_is_array(skills) || json_array_size(skills) > SKILL_MAX_IMPORT)
    return memory_invalid_at(why, MEMORY_PROBLEM_INVALID, "", "skills",
                             "must be an array of at most %d rules", SKILL_MAX_IMPORT);
  char prefix[64];
  for (size_t i = 0; i < json_array_size(skills); i++) {
    snprintf(prefix, sizeof prefix, "skills[%zu]", i);
    if (skill_check(json_array_get(skills, i), MEMORY_IMPORT, prefix, why) != 0)
      return -1;
  }
  return 0;
}

/* One key of the uniqueness checks and where it came from. */
struct key {
  char text[SKILL_SIGNATURE_MAX + 48];
  char field[96];
  size_t order;  /* position in the document, so the later of two equal keys is named */
};

static int key_cmp(const void *a, const void *b) {
  const struct key *p = a, *q = b;
  int c = strcmp(p->text, q->text);
  return c ? c : p->order < q->order ? -1 : p->order > q->order;
}

/* Collects the keys (ids, signature and family, candidate ids) of the document. */
static size_t collect_keys(const json_t *skills, struct key *keys) {
  size_t n = 0, i, j;
  const json_t *s, *ex;
  json_array_foreach(skills, i, s) {
    const json_t *id = json_object_get(s, "id");
    const char *sig = json_string_value(json_object_get(s, "signature"));
    const char *fam = json_string_value(json_object_get(s, "family"));
    if (id) {
      snprintf(keys[n].text, sizeof keys[n].text, "i:%lld", (long long)json_integer_value(id));
      snprintf(keys[n].field, sizeof keys[n].field, "skills[%zu].id", i);
      keys[n].order = n;
      n++;
    }
    if (sig) {
      snprintf(keys[n].text, sizeof keys[n].text, "s:%s\n%s", sig, fam ? fam : "");
      snprintf(keys[n].field, sizeof keys[n].field, "skills[%zu].signature", i);
      keys[n].order = n;
      n++;
    }
    json_array_foreach(json_object_get(s, "examples"), j, ex) {
      const char *cand = json_string_value(json_object_get(ex, "candidate_id"));
      if (!cand)
        continue;
      snprintf(keys[n].text, sizeof keys[n].text, "c:%s", cand);
      snprintf(keys[n].field, sizeof keys[n].field, "skills[%zu].examples[%zu].candidate_id", i, j);
      keys[n].order = n;
      n++;
    }
  }
  return n;
}

int skill_check_document(const json_t *doc, struct memory_invalid *ret_why) {
  if (check_top(doc, ret_why) != 0)
    return -1;
  const json_t *skills = json_object_get(doc, "skills");
  size_t most = json_array_size(skills) * (2 + SKILL_EXAMPLES_KEEP);
  struct key *keys = st_calloc(most ? most : 1, sizeof *keys);
  if (!keys)
    return -ENOMEM;
  size_t n = collect_keys(skills, keys);
  qsort(keys, n, sizeof *keys, key_cmp);
  int rc = 0;
  for (size_t i = 1; i < n && rc == 0; i++)
    if (strcmp(keys[i - 1].text, keys[i].text) == 0)
      rc = memory_invalid_at(
          ret_why, MEMORY_PROBLEM_DUPLICATE, keys[i].field, "",
          "appears twice (ids, a signature within a family, and candidate ids are unique)");
  free(keys);
  return rc;
}
