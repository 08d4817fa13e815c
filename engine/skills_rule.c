/* Failure signatures, and the sentence and constraint a group of failures becomes. */
#include "engine/skills_rule.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "base/utf8.h"

/* A growing output of at most cap - 1 bytes. */
struct out {
  char *s;
  size_t len, cap;
};

static void put(struct out *o, const char *s, size_t n) {
  if (o->len + 1 >= o->cap)
    return;
  if (n > o->cap - 1 - o->len)
    n = utf8_cut(s, o->cap - 1 - o->len);
  memcpy(o->s + o->len, s, n);
  o->len += n;
  o->s[o->len] = '\0';
}

static void puts_out(struct out *o, const char *s) {
  put(o, s, strlen(s));
}

/* One blank between tokens, none at the start. */
static void blank(struct out *o) {
  if (o->len > 0 && o->s[o->len - 1] != ' ')
    put(o, " ", 1);
}

static bool starts_with(const char *s, const char *prefix) {
  return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The start and end of the first line of text holding "error" or "fatal" then blanks and
 * ':' (NVRTC's "error:", ptxas's "error   :"), pointing just past that ':'; false when
 * none. */
static bool error_line(const char *text, const char **ret_start, const char **ret_end) {
  for (const char *line = text; line && *line;) {
    const char *end = strchr(line, '\n');
    if (!end)
      end = line + strlen(line);
    for (const char *p = line; p + 5 <= end; p++) {
      if (strncmp(p, "error", 5) != 0 && strncmp(p, "fatal", 5) != 0)
        continue;
      const char *q = p + 5;
      while (q < end && (*q == ' ' || *q == '\t'))
        q++;
      if (q < end && *q == ':') {
        *ret_start = q + 1;
        *ret_end = end;
        return true;
      }
    }
    line = *end ? end + 1 : NULL;
  }
  return false;
}

/* The first non-empty line of text. */
static void first_line(const char *text, const char **ret_start, const char **ret_end) {
  const char *p = text ? text : "";
  while (*p == '\n' || *p == '\r' || *p == ' ' || *p == '\t')
    p++;
  const char *end = strchr(p, '\n');
  *ret_start = p;
  *ret_end = end ? end : p + strlen(p);
}

/* Skips a program's "step <n> (region <n>): " prefix. */
static const char *skip_step_prefix(const char *p, const char *end) {
  int used = 0, a, b;
  char line[64];
  size_t n = (size_t)(end - p) < sizeof line - 1 ? (size_t)(end - p) : sizeof line - 1;
  memcpy(line, p, n);
  line[n] = '\0';
  if (sscanf(line, "step %d (region %d): %n", &a, &b, &used) == 2 && used > 0)
    return p + used;
  return p;
}

static bool cuda_error_name(const char *w, size_t n) {
  return (n > 11 && strncmp(w, "CUDA_ERROR_", 11) == 0) ||
         (n > 9 && strncmp(w, "cudaError", 9) == 0);
}

/* True for a word that names something (has '_', a digit, or a capital after a small
 * letter) rather than being an English word. */
static bool identifier(const char *w, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (w[i] == '_' || isdigit((unsigned char)w[i]))
      return true;
    if (i > 0 && isupper((unsigned char)w[i]) && islower((unsigned char)w[i - 1]))
      return true;
  }
  return false;
}

/* Appends the normalized text of [p, end): tokens replaced where they stand, each run of
 * blanks as one space. */
static void normalize(const char *p, const char *end, struct out *o) {
  while (p < end) {
    unsigned char c = (unsigned char)*p;
    if (c == '"' || c == '\'') {
      const char *close = memchr(p + 1, c, (size_t)(end - p - 1));
      puts_out(o, "<id>");
      p = close ? close + 1 : end;
    } else if (isdigit(c)) {
      const char *start = p;
      while (p < end && (isalnum((unsigned char)*p) || *p == '_' || *p == '.' ||
                         ((*p == '-' || *p == '+') && p > start &&
                          (p[-1] == 'e' || p[-1] == 'E'))))
        p++;
      puts_out(o, "<n>");
    } else if (isalpha(c) || c == '_') {
      const char *w = p;
      while (p < end && (isalnum((unsigned char)*p) || *p == '_'))
        p++;
      size_t n = (size_t)(p - w);
      if (cuda_error_name(w, n)) {
        put(o, w, n);
      } else if (identifier(w, n)) {
        puts_out(o, "<id>");
      } else {
        for (size_t i = 0; i < n; i++) {
          char lower = (char)tolower((unsigned char)w[i]);
          put(o, &lower, 1);
        }
      }
    } else if (isspace(c) || c < ' ' || c == 0x7f) {
      while (p < end && (isspace((unsigned char)*p) || (unsigned char)*p < ' ' || *p == 0x7f))
        p++;
      blank(o);
    } else {
      put(o, p, 1);
      p++;
    }
  }
  while (o->len > 0 && o->s[o->len - 1] == ' ')
    o->s[--o->len] = '\0';
}

void skills_signature(const char *stage, const char *cls, const char *message, char *out,
                      size_t outlen) {
  if (outlen == 0)
    return;
  size_t cap = outlen < SKILL_SIGNATURE_MAX + 1 ? outlen : SKILL_SIGNATURE_MAX + 1;
  struct out o = {out, 0, cap};
  out[0] = '\0';
  const char *c = cls && *cls ? cls : stage && *stage ? stage : "failed";
  puts_out(&o, c);
  bool class_only = starts_with(c, "correctness") || starts_with(c, "timeout") ||
                    starts_with(c, "crash") ||
                    (stage && (strcmp(stage, "correctness") == 0 || strcmp(stage, "timeout") == 0 ||
                               strcmp(stage, "crash") == 0));
  if (class_only || !message || !*message)
    return;
  const char *start, *end;
  bool compile = (stage && strcmp(stage, "compile") == 0) || starts_with(c, "compile");
  if (!(compile && error_line(message, &start, &end)))
    first_line(message, &start, &end);
  start = skip_step_prefix(start, end);
  char text[SKILL_SIGNATURE_MAX + 1];
  struct out t = {text, 0, sizeof text};
  text[0] = '\0';
  normalize(start, end, &t);
  if (t.len == 0)
    return;
  puts_out(&o, ": ");
  puts_out(&o, text);
}

bool skills_numeric_mismatch(const char *cls) {
  return cls && (strcmp(cls, "correctness/mismatch") == 0 ||
                 strcmp(cls, "correctness/robust_mismatch") == 0 ||
                 strcmp(cls, "correctness/accuracy_budget") == 0);
}

bool skills_learns_from(const char *stage) {
  return stage && strcmp(stage, "parse") != 0 && strcmp(stage, "protocol") != 0 &&
         strcmp(stage, "profile") != 0 && strcmp(stage, "correct") != 0;
}

/* ---- the constraint of a group ---- */

/* True when (knob, value) is a setting a constraint may name: a vocabulary knob with a
 * value in range, other than unset (0, or MODE ""). */
static bool setting_ok(const char *knob, const json_t *value) {
  bool known = false;
  for (size_t i = 0; skill_knobs[i]; i++)
    known = known || strcmp(skill_knobs[i], knob) == 0;
  if (!known)
    return false;
  if (strcmp(knob, "MODE") == 0) {
    const char *m = json_string_value(value);
    size_t n = m ? strlen(m) : 0;
    return n >= 1 && n <= SKILL_MODE_MAX && strspn(m, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
  }
  return json_is_integer(value) && json_integer_value(value) >= 1 &&
         json_integer_value(value) <= SKILL_KNOB_VALUE_MAX;
}

/* True when every knob set of sets has knob at value. */
static bool all_have(json_t *sets, const char *knob, const json_t *value, const char *member) {
  size_t i;
  json_t *s;
  json_array_foreach(sets, i, s) {
    json_t *k = member ? json_object_get(s, member) : s;
    if (!json_equal(json_object_get(k, knob), (json_t *)value))
      return false;
  }
  return json_array_size(sets) > 0;
}

static bool any_has(json_t *sets, const char *knob, const json_t *value) {
  size_t i;
  json_t *s;
  json_array_foreach(sets, i, s) if (json_equal(json_object_get(s, knob), (json_t *)value))
    return true;
  return false;
}

static bool moved_by_some(json_t *examples, const char *knob) {
  size_t i;
  json_t *e;
  json_array_foreach(examples, i, e) {
    const char *moved = json_string_value(json_object_get(e, "moved"));
    if (moved && strcmp(moved, knob) == 0)
      return true;
  }
  return false;
}

/* True when every example's inner size is known and not a multiple of v. */
static bool inner_never_multiple(json_t *examples, json_int_t v) {
  size_t i;
  json_t *e;
  json_array_foreach(examples, i, e) {
    json_t *inner = json_object_get(json_object_get(e, "features"), "inner");
    if (!json_is_integer(inner) || json_integer_value(inner) % v == 0)
      return false;
  }
  return json_array_size(examples) > 0;
}

json_t *skills_group_constraint(json_t *examples, json_t *contrast, const char *family) {
  json_t *first = json_object_get(json_array_get(examples, 0), "knobs");
  if (!json_is_object(first) || json_object_size(first) == 0)
    return NULL;
  const char *kept[16];
  size_t n = 0, n_moved = 0;
  for (size_t i = 0; skill_knobs[i] && n < 16; i++) {
    const json_t *v = json_object_get(first, skill_knobs[i]);
    if (v && setting_ok(skill_knobs[i], v) && all_have(examples, skill_knobs[i], v, "knobs") &&
        !any_has(contrast, skill_knobs[i], v))
      kept[n++] = skill_knobs[i];
  }
  for (size_t i = 0; i < n; i++)
    n_moved += moved_by_some(examples, kept[i]);
  const char *knob = NULL;
  for (size_t i = 0; i < n; i++)
    if (n_moved == 0 || moved_by_some(examples, kept[i])) {
      if (knob)
        return NULL; /* more than one setting: the failures do not say which */
      knob = kept[i];
    }
  if (!knob)
    return NULL;
  json_t *value = json_object_get(first, knob);
  json_t *when = json_pack("{s:s}", "family", family ? family : "");
  if (!family)
    json_object_del(when, "family");
  if (when && strcmp(knob, "VEC") == 0 && json_integer_value(value) > 1 &&
      inner_never_multiple(examples, json_integer_value(value)))
    json_object_set_new(when, "inner_not_multiple_of", json_integer(json_integer_value(value)));
  return when ? json_pack("{s:s, s:s, s:O, s:o}", "knob", knob, "op", "eq", "value", value,
                          "when", when)
              : NULL;
}

/* ---- sentences ---- */

/* "VEC=4" or "MODE=online" of a constraint. */
static void setting_text(const json_t *c, char *out, size_t len) {
  const json_t *v = json_object_get(c, "value");
  const char *op = json_string_value(json_object_get(c, "op"));
  static const char *const ops[][2] = {{"eq", "="}, {"ne", "!="}, {"gt", ">"},
                                       {"ge", ">="}, {"lt", "<"},  {"le", "<="}};
  const char *sym = "=";
  for (size_t i = 0; op && i < sizeof ops / sizeof ops[0]; i++)
    if (strcmp(ops[i][0], op) == 0)
      sym = ops[i][1];
  const char *knob = json_string_value(json_object_get(c, "knob"));
  if (json_is_string(v))
    snprintf(out, len, "%s%s%s", knob ? knob : "?", sym, json_string_value(v));
  else
    snprintf(out, len, "%s%s%lld", knob ? knob : "?", sym, (long long)json_integer_value(v));
}

/* The conditions of "when" other than the family, as "when the inner size is not a
 * multiple of 4 and ...". */
static void when_text(const json_t *when, struct out *o) {
  static const char *const preds[][2] = {{"_not_multiple_of", "is not a multiple of"},
                                         {"_multiple_of", "is a multiple of"},
                                         {"_lt", "is below"},
                                         {"_ge", "is at least"}};
  const char *key;
  json_t *v;
  bool first = true;
  json_object_foreach((json_t *)when, key, v) {
    if (strcmp(key, "family") == 0)
      continue;
    for (size_t i = 0; i < sizeof preds / sizeof preds[0]; i++) {
      const char *at = strstr(key, preds[i][0]);
      if (!at || strcmp(at, preds[i][0]) != 0)
        continue;
      char part[160];
      snprintf(part, sizeof part, " %s the %s %s %lld", first ? "when" : "and",
               strncmp(key, "inner", 5) == 0 ? "inner size" : "element count", preds[i][1],
               (long long)json_integer_value(v));
      puts_out(o, part);
      first = false;
      break;
    }
  }
}

void skills_rule_sentence(const json_t *constraint, const char *signature, const char *family,
                          char out[SKILL_RULE_MAX + 1]) {
  struct out o = {out, 0, SKILL_RULE_MAX}; /* room for the final period */
  out[0] = '\0';
  char kind[64];
  snprintf(kind, sizeof kind, "%s %s kernel", family && strchr("aeiou", family[0]) ? "an" : "a",
           family ? family : "CUDA");
  if (json_is_object(constraint)) {
    char setting[64];
    setting_text(constraint, setting, sizeof setting);
    puts_out(&o, "You cannot use ");
    puts_out(&o, setting);
    puts_out(&o, " in ");
    puts_out(&o, family ? family : "CUDA");
    puts_out(&o, " kernels");
    when_text(json_object_get(constraint, "when"), &o);
  } else {
    const char *sig = signature ? signature : "a failure";
    const char *colon = strstr(sig, ": ");
    char cls[SKILL_SIGNATURE_MAX + 1];
    snprintf(cls, sizeof cls, "%.*s", colon ? (int)(colon - sig) : (int)strlen(sig), sig);
    const char *text = colon ? colon + 2 : NULL;
    puts_out(&o, "You cannot write ");
    puts_out(&o, kind);
    if (starts_with(cls, "compile")) {
      puts_out(&o, " that fails to compile with \"");
      puts_out(&o, text ? text : cls);
      puts_out(&o, "\"");
    } else if (starts_with(cls, "cuda/")) {
      puts_out(&o, " whose launch fails with ");
      puts_out(&o, cls + 5);
    } else if (starts_with(cls, "correctness")) {
      puts_out(&o, " whose outputs fail the correctness check (");
      puts_out(&o, cls);
      puts_out(&o, ")");
    } else if (starts_with(cls, "timeout")) {
      puts_out(&o, " that runs past its time limit");
    } else if (starts_with(cls, "crash")) {
      puts_out(&o, " that crashes the evaluator (");
      puts_out(&o, cls);
      puts_out(&o, ")");
    } else {
      puts_out(&o, " that fails with \"");
      puts_out(&o, sig);
      puts_out(&o, "\"");
    }
  }
  /* A cut text may have lost its closing quote; the sentence still ends with a period. */
  while (o.len > 0 && (o.s[o.len - 1] == '.' || o.s[o.len - 1] == ' '))
    o.s[--o.len] = '\0';
  out[o.len++] = '.';
  out[o.len] = '\0';
}
