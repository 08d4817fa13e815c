/* Skill constraints as proposers apply them: features, knobs, and the check. */
#include "proposers/skill_constraint.h"

#include <stdio.h>
#include <string.h>

json_t *skill_profile_features(json_t *profile) {
  json_t *out = json_object();
  json_t *in = json_array_get(json_object_get(profile, "inputs"), 0);
  json_t *shape = json_object_get(in, "shape");
  size_t rank = json_array_size(shape);
  json_t *last = rank ? json_array_get(shape, rank - 1) : NULL;
  if (out && json_is_integer(last) && json_integer_value(last) > 0)
    json_object_set_new(out, "inner", json_integer(json_integer_value(last)));
  json_t *first_out = json_array_get(json_object_get(profile, "outputs"), 0);
  json_t *numel = json_object_get(first_out, "numel");
  if (!json_is_integer(numel) && json_is_array(json_object_get(first_out, "shape"))) {
    json_int_t n = 1;
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(first_out, "shape"), i, d) n *= json_integer_value(d);
    numel = json_integer(n);
    if (out && numel && n > 0)
      json_object_set(out, "numel", numel);
    json_decref(numel);
  } else if (out && json_is_integer(numel) && json_integer_value(numel) > 0) {
    json_object_set(out, "numel", numel);
  }
  return out;
}

json_t *skill_knobs_of_options(json_t *options) {
  json_t *out = json_object();
  size_t i;
  json_t *opt;
  json_array_foreach(options, i, opt) {
    const char *text = json_string_value(opt);
    char name[32];
    long long value;
    int used = 0;
    if (!text || !out)
      continue;
    if (sscanf(text, "-DMODE_%31[A-Z0-9_]=1%n", name, &used) == 1 && text[used] == '\0') {
      for (char *c = name; *c; c++)
        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
      json_object_set_new(out, "MODE", json_string(name));
    } else if (sscanf(text, "-D%31[A-Z0-9_]=%lld%n", name, &value, &used) == 2 &&
               text[used] == '\0') {
      json_object_set_new(out, name, json_integer(value));
    }
  }
  return out;
}

/* Whether "<feature>_<predicate>": bound holds for features; false when the feature is
 * unknown or the condition is not one of the vocabulary. */
static bool condition_holds(const char *key, const json_t *bound, json_t *features) {
  static const char *const preds[] = {"not_multiple_of", "multiple_of", "lt", "ge", NULL};
  const char *sep = strchr(key, '_');
  if (!sep || !json_is_integer(bound))
    return false;
  char feature[16];
  size_t n = (size_t)(sep - key);
  if (n >= sizeof feature)
    return false;
  memcpy(feature, key, n);
  feature[n] = '\0';
  json_t *fv = json_object_get(features, feature);
  if (!json_is_integer(fv))
    return false;
  long long f = json_integer_value(fv), b = json_integer_value(bound);
  for (size_t i = 0; preds[i]; i++) {
    if (strcmp(sep + 1, preds[i]) != 0)
      continue;
    switch (i) {
    case 0: return b > 0 && f % b != 0;
    case 1: return b > 0 && f % b == 0;
    case 2: return f < b;
    default: return f >= b;
    }
  }
  return false;
}

/* Compares a with b under op (eq ne gt ge lt le); false for an unknown op. */
static bool compare(long long a, const char *op, long long b) {
  if (strcmp(op, "eq") == 0) return a == b;
  if (strcmp(op, "ne") == 0) return a != b;
  if (strcmp(op, "gt") == 0) return a > b;
  if (strcmp(op, "ge") == 0) return a >= b;
  if (strcmp(op, "lt") == 0) return a < b;
  if (strcmp(op, "le") == 0) return a <= b;
  return false;
}

bool skill_constraint_forbids(const json_t *constraint, const char *family, json_t *features,
                              const json_t *knobs) {
  const char *knob = json_string_value(json_object_get(constraint, "knob"));
  const char *op = json_string_value(json_object_get(constraint, "op"));
  const json_t *value = json_object_get(constraint, "value");
  if (!knob || !op || !value)
    return false;
  const char *key;
  json_t *cond;
  json_object_foreach(json_object_get(constraint, "when"), key, cond) {
    if (strcmp(key, "family") == 0) {
      if (!family || !json_is_string(cond) || strcmp(json_string_value(cond), family) != 0)
        return false;
    } else if (!condition_holds(key, cond, features)) {
      return false;
    }
  }
  const json_t *have = json_object_get(knobs, knob);
  if (strcmp(knob, "MODE") == 0) {
    const char *mode = json_is_string(have) ? json_string_value(have) : "";
    if (!json_is_string(value))
      return false;
    bool same = strcmp(mode, json_string_value(value)) == 0;
    return strcmp(op, "eq") == 0 ? same : strcmp(op, "ne") == 0 ? !same : false;
  }
  if (!json_is_integer(value))
    return false;
  long long v = json_is_integer(have) ? json_integer_value(have) : 0;
  return compare(v, op, json_integer_value(value));
}

json_t *skill_refusing_rule(json_t *skills, const char *family, json_t *profile,
                            const json_t *knobs) {
  json_t *features = NULL, *found = NULL;
  size_t i;
  json_t *rule;
  json_array_foreach(skills, i, rule) {
    json_t *constraint = json_object_get(rule, "constraint");
    if (!json_is_object(constraint))
      continue;
    if (!features)
      features = skill_profile_features(profile);
    if (skill_constraint_forbids(constraint, family, features, knobs)) {
      found = rule;
      break;
    }
  }
  json_decref(features);
  return found;
}

/* A string member of obj, or "?". */
static const char *str(const json_t *obj, const char *key) {
  const char *s = json_string_value(json_object_get(obj, key));
  return s ? s : "?";
}

json_t *skill_refusal_failure(json_t *rule) {
  const json_t *c = json_object_get(rule, "constraint");
  const json_t *value = json_object_get(c, "value");
  char setting[96], message[512];
  if (json_is_string(value))
    snprintf(setting, sizeof setting, "%s %s %s", str(c, "knob"), str(c, "op"),
             json_string_value(value));
  else
    snprintf(setting, sizeof setting, "%s %s %lld", str(c, "knob"), str(c, "op"),
             (long long)json_integer_value(value));
  json_int_t id = json_integer_value(json_object_get(rule, "id"));
  snprintf(message, sizeof message, "skill rule %lld refuses %s: %s", (long long)id, setting,
           str(rule, "rule"));
  return json_pack("{s:s, s:s, s:s, s:I}", "stage", "parse", "class", "parse/invalid_move",
                   "message", message, "skill", id);
}

long long skill_refusal_id(json_t *failure) {
  json_t *id = json_object_get(failure, "skill");
  return json_is_integer(id) && json_integer_value(id) > 0 ? json_integer_value(id) : 0;
}
