/* Validates responses against the OpenAPI document and records the operations reached. */
#include "tests/api/spec_check.h"

#include <ctype.h>
#include <math.h>
#include <regex.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_STATUSES 32
#define MAX_DEPTH 64

/* A compiled `pattern`, cached because the same few patterns run for every response. */
struct regex_entry {
  char *pattern;
  regex_t re;
  struct regex_entry *next;
};

/* One operation of the document and what the tests did with it. */
struct op_cov {
  char method[8];        /* upper case */
  const char *tpl;       /* path template; borrowed from the document */
  const json_t *op;      /* the operation object; borrowed */
  bool pending;          /* x-opforge-pending on the path item or the operation */
  unsigned hits;
  long statuses[MAX_STATUSES];
  size_t n_statuses;
};

struct spec {
  json_t *doc;
  struct op_cov *ops;
  size_t n_ops;
  struct regex_entry *regexes;
};

/* Validation state: where the error goes and the instance path so far. */
struct vctx {
  struct spec *spec;
  char *err;
  size_t errlen;
  char path[512];
  size_t plen;
  int depth;
};

static const char *const http_methods[] = {"get", "put", "post", "delete", "options",
                                           "head", "patch", "trace", NULL};

/* Keywords the validator applies, then those it accepts as annotations. Anything else in
 * a schema is an error, so the spec cannot use a keyword that would go unchecked. */
static const char *const schema_keywords[] = {
  "$ref", "type", "properties", "required", "additionalProperties", "items", "enum",
  "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
  "maxLength", "minItems", "maxItems", "uniqueItems", "maxProperties", "pattern", "oneOf",
  "anyOf", "allOf", "not", "format",
  "description", "title", "default", "examples", "example", "deprecated", "readOnly",
  "writeOnly", "$comment", "contentMediaType", "contentSchema", NULL};

static bool in_list(const char *const *list, const char *s) {
  for (size_t i = 0; list[i]; i++)
    if (strcmp(list[i], s) == 0)
      return true;
  return false;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* ---------------------------------------------------------------- helpers */

/* Resolves a local reference ("#/components/schemas/Task") in doc; NULL when it does
 * not resolve. Borrowed. */
static const json_t *resolve_ref(const json_t *doc, const char *ref) {
  if (strncmp(ref, "#", 1) != 0)
    return NULL;
  const json_t *cur = doc;
  const char *p = ref + 1;
  while (*p == '/' && cur) {
    p++;
    char key[256];
    size_t k = 0;
    while (*p && *p != '/' && k + 1 < sizeof key) {
      if (p[0] == '~' && p[1] == '1') {
        key[k++] = '/';
        p += 2;
      } else if (p[0] == '~' && p[1] == '0') {
        key[k++] = '~';
        p += 2;
      } else {
        key[k++] = *p++;
      }
    }
    key[k] = '\0';
    cur = json_object_get(cur, key);
  }
  return *p == '\0' ? cur : NULL;
}

/* Follows $ref chains of a response or parameter object; NULL when one dangles. */
static const json_t *deref(const json_t *doc, const json_t *obj) {
  for (int i = 0; obj && i < 8; i++) {
    const char *ref = json_string_value(json_object_get(obj, "$ref"));
    if (!ref)
      return obj;
    obj = resolve_ref(doc, ref);
  }
  return NULL;
}

/* The spec's patterns are ECMA-262 regular expressions (what schemathesis and other
 * JSON Schema tools run); this validator runs POSIX EREs. The two agree on the subset
 * the spec uses except for escapes, which are rewritten here: \n, \r and \t become the
 * characters, and [^\x00] (any character but NUL, the spec's way of saying "no NUL")
 * becomes "." since a C string never holds NUL and POSIX "." matches a newline. Writes
 * the translation into out (out_len bytes); false when it does not fit. */
static bool posix_pattern(const char *pattern, char *out, size_t out_len) {
  size_t n = 0;
  for (const char *p = pattern; *p; p++) {
    char c = *p;
    if (strncmp(p, "[^\\x00]", 7) == 0) {
      p += 6;
      c = '.';
    } else if (p[0] == '\\' && (p[1] == 'n' || p[1] == 'r' || p[1] == 't')) {
      c = p[1] == 'n' ? '\n' : p[1] == 'r' ? '\r' : '\t';
      p++;
    }
    if (n + 1 >= out_len)
      return false;
    out[n++] = c;
  }
  out[n] = '\0';
  return true;
}

/* The compiled regex for pattern, compiling it on first use; NULL when it does not
 * compile. Owned by the spec. */
static const regex_t *get_regex(struct spec *spec, const char *pattern) {
  for (struct regex_entry *e = spec->regexes; e; e = e->next)
    if (strcmp(e->pattern, pattern) == 0)
      return &e->re;
  struct regex_entry *e = calloc(1, sizeof *e);
  if (!e)
    return NULL;
  e->pattern = strdup(pattern);
  char posix[1024];
  if (!e->pattern || !posix_pattern(pattern, posix, sizeof posix) ||
      regcomp(&e->re, posix, REG_EXTENDED | REG_NOSUB) != 0) {
    free(e->pattern);
    free(e);
    return NULL;
  }
  e->next = spec->regexes;
  spec->regexes = e;
  return &e->re;
}

static size_t utf8_length(const char *s, size_t n) {
  size_t count = 0;
  for (size_t i = 0; i < n; i++)
    if (((unsigned char)s[i] & 0xC0) != 0x80)
      count++;
  return count;
}

/* JSON equality where 1 and 1.0 are equal, as JSON Schema's enum and const require. */
static bool values_equal(const json_t *a, const json_t *b) {
  if (json_is_number(a) && json_is_number(b))
    return json_number_value(a) == json_number_value(b);
  if (json_is_array(a) && json_is_array(b)) {
    if (json_array_size(a) != json_array_size(b))
      return false;
    for (size_t i = 0; i < json_array_size(a); i++)
      if (!values_equal(json_array_get(a, i), json_array_get(b, i)))
        return false;
    return true;
  }
  if (json_is_object(a) && json_is_object(b)) {
    if (json_object_size(a) != json_object_size(b))
      return false;
    const char *key;
    json_t *va;
    json_object_foreach((json_t *)a, key, va) {
      const json_t *vb = json_object_get(b, key);
      if (!vb || !values_equal(va, vb))
        return false;
    }
    return true;
  }
  return json_equal((json_t *)a, (json_t *)b);
}

/* ---------------------------------------------------------------- validator */

static void verr(struct vctx *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void verr(struct vctx *v, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  set_err(v->err, v->errlen, "%s: %s", v->path, msg);
}

static size_t push_key(struct vctx *v, const char *key) {
  size_t old = v->plen;
  int n = snprintf(v->path + old, sizeof v->path - old, ".%s", key);
  if (n > 0)
    v->plen = old + (size_t)n < sizeof v->path ? old + (size_t)n : sizeof v->path - 1;
  return old;
}

static size_t push_index(struct vctx *v, size_t index) {
  size_t old = v->plen;
  int n = snprintf(v->path + old, sizeof v->path - old, "[%zu]", index);
  if (n > 0)
    v->plen = old + (size_t)n < sizeof v->path ? old + (size_t)n : sizeof v->path - 1;
  return old;
}

static void pop_to(struct vctx *v, size_t old) {
  v->plen = old;
  v->path[old] = '\0';
}

static int validate(struct vctx *v, const json_t *schema, const json_t *inst);

static bool type_matches(const char *t, const json_t *inst) {
  if (strcmp(t, "null") == 0)
    return json_is_null(inst);
  if (strcmp(t, "boolean") == 0)
    return json_is_boolean(inst);
  if (strcmp(t, "object") == 0)
    return json_is_object(inst);
  if (strcmp(t, "array") == 0)
    return json_is_array(inst);
  if (strcmp(t, "string") == 0)
    return json_is_string(inst);
  if (strcmp(t, "number") == 0)
    return json_is_number(inst);
  if (strcmp(t, "integer") == 0)
    return json_is_integer(inst) ||
           (json_is_real(inst) && floor(json_real_value(inst)) == json_real_value(inst));
  return false;
}

static const char *type_name(const json_t *inst) {
  switch (json_typeof(inst)) {
  case JSON_OBJECT: return "object";
  case JSON_ARRAY: return "array";
  case JSON_STRING: return "string";
  case JSON_INTEGER: return "integer";
  case JSON_REAL: return "number";
  case JSON_TRUE:
  case JSON_FALSE: return "boolean";
  default: return "null";
  }
}

static int check_type(struct vctx *v, const json_t *type, const json_t *inst) {
  if (json_is_string(type)) {
    if (type_matches(json_string_value(type), inst))
      return 0;
    verr(v, "expected type %s, got %s", json_string_value(type), type_name(inst));
    return -1;
  }
  size_t i;
  const json_t *t;
  json_array_foreach(type, i, t) {
    if (json_is_string(t) && type_matches(json_string_value(t), inst))
      return 0;
  }
  char *want = json_dumps(type, JSON_COMPACT);
  verr(v, "expected type %s, got %s", want ? want : "?", type_name(inst));
  free(want);
  return -1;
}

static int check_enum_const(struct vctx *v, const json_t *schema, const json_t *inst) {
  const json_t *c = json_object_get(schema, "const");
  if (c && !values_equal(c, inst)) {
    char *want = json_dumps(c, JSON_ENCODE_ANY | JSON_COMPACT);
    char *got = json_dumps(inst, JSON_ENCODE_ANY | JSON_COMPACT);
    verr(v, "expected const %s, got %.200s", want ? want : "?", got ? got : "?");
    free(want);
    free(got);
    return -1;
  }
  const json_t *e = json_object_get(schema, "enum");
  if (!e)
    return 0;
  size_t i;
  const json_t *item;
  json_array_foreach(e, i, item) {
    if (values_equal(item, inst))
      return 0;
  }
  char *got = json_dumps(inst, JSON_ENCODE_ANY | JSON_COMPACT);
  verr(v, "value %.200s is not in enum", got ? got : "?");
  free(got);
  return -1;
}

static int check_number(struct vctx *v, const json_t *schema, const json_t *inst) {
  if (!json_is_number(inst))
    return 0;
  double x = json_number_value(inst);
  const json_t *b;
  if ((b = json_object_get(schema, "minimum")) && x < json_number_value(b)) {
    verr(v, "%g is below minimum %g", x, json_number_value(b));
    return -1;
  }
  if ((b = json_object_get(schema, "maximum")) && x > json_number_value(b)) {
    verr(v, "%g is above maximum %g", x, json_number_value(b));
    return -1;
  }
  if ((b = json_object_get(schema, "exclusiveMinimum")) && x <= json_number_value(b)) {
    verr(v, "%g is not above exclusiveMinimum %g", x, json_number_value(b));
    return -1;
  }
  if ((b = json_object_get(schema, "exclusiveMaximum")) && x >= json_number_value(b)) {
    verr(v, "%g is not below exclusiveMaximum %g", x, json_number_value(b));
    return -1;
  }
  return 0;
}

/* Loose format checks: enough to catch a wrong field, not a full RFC parser. */
static int check_format(struct vctx *v, const char *format, const char *s) {
  const char *re = NULL;
  if (strcmp(format, "uuid") == 0)
    re = "^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
  else if (strcmp(format, "date-time") == 0)
    re = "^[0-9]{4}-[01][0-9]-[0-3][0-9][Tt][0-2][0-9]:[0-5][0-9]:[0-6][0-9](\\.[0-9]+)?"
         "([Zz]|[+-][0-2][0-9]:[0-5][0-9])$";
  if (!re)
    return 0; /* other formats are annotations */
  const regex_t *compiled = get_regex(v->spec, re);
  if (compiled && regexec(compiled, s, 0, NULL, 0) == 0)
    return 0;
  verr(v, "\"%.100s\" is not a valid %s", s, format);
  return -1;
}

static int check_string(struct vctx *v, const json_t *schema, const json_t *inst) {
  if (!json_is_string(inst))
    return 0;
  const char *s = json_string_value(inst);
  size_t len = utf8_length(s, json_string_length(inst));
  const json_t *b;
  if ((b = json_object_get(schema, "minLength")) && len < (size_t)json_integer_value(b)) {
    verr(v, "length %zu is below minLength %lld", len, (long long)json_integer_value(b));
    return -1;
  }
  if ((b = json_object_get(schema, "maxLength")) && len > (size_t)json_integer_value(b)) {
    verr(v, "length %zu is above maxLength %lld", len, (long long)json_integer_value(b));
    return -1;
  }
  const char *pattern = json_string_value(json_object_get(schema, "pattern"));
  if (pattern) {
    const regex_t *re = get_regex(v->spec, pattern);
    if (!re) {
      verr(v, "schema pattern '%s' does not compile", pattern);
      return -1;
    }
    if (strlen(s) != json_string_length(inst) || regexec(re, s, 0, NULL, 0) != 0) {
      verr(v, "\"%.100s\" does not match pattern '%s'", s, pattern);
      return -1;
    }
  }
  const char *format = json_string_value(json_object_get(schema, "format"));
  return format ? check_format(v, format, s) : 0;
}

static int check_array(struct vctx *v, const json_t *schema, const json_t *inst) {
  if (!json_is_array(inst))
    return 0;
  size_t n = json_array_size(inst);
  const json_t *b;
  if ((b = json_object_get(schema, "minItems")) && n < (size_t)json_integer_value(b)) {
    verr(v, "%zu items, below minItems %lld", n, (long long)json_integer_value(b));
    return -1;
  }
  if ((b = json_object_get(schema, "maxItems")) && n > (size_t)json_integer_value(b)) {
    verr(v, "%zu items, above maxItems %lld", n, (long long)json_integer_value(b));
    return -1;
  }
  if (json_is_true(json_object_get(schema, "uniqueItems")))
    for (size_t i = 1; i < n; i++)
      for (size_t j = 0; j < i; j++)
        if (values_equal(json_array_get(inst, i), json_array_get(inst, j))) {
          verr(v, "items %zu and %zu are equal, but uniqueItems is set", j, i);
          return -1;
        }
  const json_t *items = json_object_get(schema, "items");
  if (!items)
    return 0;
  for (size_t i = 0; i < n; i++) {
    size_t old = push_index(v, i);
    int rc = validate(v, items, json_array_get(inst, i));
    pop_to(v, old);
    if (rc != 0)
      return -1;
  }
  return 0;
}

static int check_object(struct vctx *v, const json_t *schema, const json_t *inst) {
  if (!json_is_object(inst))
    return 0;
  const json_t *most = json_object_get(schema, "maxProperties");
  if (most && json_object_size(inst) > (size_t)json_integer_value(most)) {
    verr(v, "%zu properties, above maxProperties %lld", json_object_size(inst),
         (long long)json_integer_value(most));
    return -1;
  }
  size_t i;
  const json_t *req;
  json_array_foreach(json_object_get(schema, "required"), i, req) {
    if (!json_object_get(inst, json_string_value(req))) {
      verr(v, "required property '%s' is missing", json_string_value(req));
      return -1;
    }
  }
  const json_t *props = json_object_get(schema, "properties");
  const json_t *additional = json_object_get(schema, "additionalProperties");
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)inst, key, val) {
    const json_t *sub = json_object_get(props, key);
    if (!sub && json_is_false(additional)) {
      verr(v, "property '%s' is not allowed", key);
      return -1;
    }
    if (!sub)
      sub = json_is_object(additional) ? additional : NULL;
    if (!sub)
      continue;
    size_t old = push_key(v, key);
    int rc = validate(v, sub, val);
    pop_to(v, old);
    if (rc != 0)
      return -1;
  }
  return 0;
}

/* allOf, anyOf, oneOf and not. A failing branch's message is kept in the error so that
 * the reason for "matches no branch" is visible. */
static int check_combinators(struct vctx *v, const json_t *schema, const json_t *inst) {
  size_t i;
  const json_t *sub;
  json_array_foreach(json_object_get(schema, "allOf"), i, sub) {
    if (validate(v, sub, inst) != 0)
      return -1;
  }
  char last[512] = "";
  const json_t *any = json_object_get(schema, "anyOf");
  if (any) {
    bool ok = false;
    json_array_foreach(any, i, sub) {
      if (validate(v, sub, inst) == 0) {
        ok = true;
        break;
      }
      snprintf(last, sizeof last, "%s", v->err);
    }
    if (!ok) {
      verr(v, "matches no anyOf branch (last: %s)", last);
      return -1;
    }
  }
  const json_t *one = json_object_get(schema, "oneOf");
  if (one) {
    size_t matched = 0;
    json_array_foreach(one, i, sub) {
      if (validate(v, sub, inst) == 0)
        matched++;
      else
        snprintf(last, sizeof last, "%s", v->err);
    }
    if (matched != 1) {
      verr(v, "matches %zu oneOf branches, not exactly one (last failure: %s)", matched, last);
      return -1;
    }
  }
  const json_t *not = json_object_get(schema, "not");
  if (not && validate(v, not, inst) == 0) {
    char *s = json_dumps(not, JSON_COMPACT);
    verr(v, "matches the schema under 'not': %s", s ? s : "?");
    free(s);
    return -1;
  }
  return 0;
}

static int validate(struct vctx *v, const json_t *schema, const json_t *inst) {
  if (json_is_true(schema))
    return 0;
  if (json_is_false(schema) || !json_is_object(schema)) {
    verr(v, "schema is false or not an object");
    return -1;
  }
  if (v->depth >= MAX_DEPTH) {
    verr(v, "schema nests deeper than %d (a $ref cycle?)", MAX_DEPTH);
    return -1;
  }
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)schema, key, val) {
    if (!in_list(schema_keywords, key) && strncmp(key, "x-", 2) != 0) {
      verr(v, "schema uses unsupported keyword '%s'", key);
      return -1;
    }
  }
  const char *ref = json_string_value(json_object_get(schema, "$ref"));
  if (ref) {
    const json_t *target = resolve_ref(v->spec->doc, ref);
    if (!target) {
      verr(v, "$ref '%s' does not resolve", ref);
      return -1;
    }
    v->depth++;
    int rc = validate(v, target, inst);
    v->depth--;
    if (rc != 0)
      return -1;
  }
  const json_t *type = json_object_get(schema, "type");
  if (type && check_type(v, type, inst) != 0)
    return -1;
  if (check_enum_const(v, schema, inst) != 0 || check_number(v, schema, inst) != 0 ||
      check_string(v, schema, inst) != 0 || check_array(v, schema, inst) != 0 ||
      check_object(v, schema, inst) != 0)
    return -1;
  v->depth++;
  int rc = check_combinators(v, schema, inst);
  v->depth--;
  return rc;
}

int spec_validate(struct spec *spec, const json_t *schema, const json_t *value, char *err,
                  size_t errlen) {
  char local[512];
  struct vctx v = {.spec = spec, .err = err && errlen ? err : local,
                   .errlen = err && errlen ? errlen : sizeof local, .path = "$", .plen = 1};
  return validate(&v, schema, value);
}

/* ---------------------------------------------------------------- lint */

static int lint_schema(struct spec *spec, const json_t *schema, const char *where, char *err,
                       size_t errlen);

static int lint_schema_array(struct spec *spec, const json_t *arr, const char *where,
                             char *err, size_t errlen) {
  if (!json_is_array(arr) || json_array_size(arr) == 0) {
    set_err(err, errlen, "%s: must be a non-empty array of schemas", where);
    return -1;
  }
  size_t i;
  const json_t *sub;
  json_array_foreach(arr, i, sub) {
    if (lint_schema(spec, sub, where, err, errlen) != 0)
      return -1;
  }
  return 0;
}

static int lint_type(const json_t *type, const char *where, char *err, size_t errlen) {
  static const char *const names[] = {"null", "boolean", "object", "array", "string",
                                      "number", "integer", NULL};
  if (json_is_string(type) && in_list(names, json_string_value(type)))
    return 0;
  size_t i;
  const json_t *t;
  bool ok = json_is_array(type) && json_array_size(type) > 0;
  json_array_foreach(type, i, t) {
    ok = ok && json_is_string(t) && in_list(names, json_string_value(t));
  }
  if (!ok)
    set_err(err, errlen, "%s: bad 'type'", where);
  return ok ? 0 : -1;
}

/* Checks one schema and those nested in it: known keywords, resolvable $refs, valid
 * types, compilable patterns. Referenced schemas are linted where they are defined. */
static int lint_schema(struct spec *spec, const json_t *schema, const char *where, char *err,
                       size_t errlen) {
  if (json_is_boolean(schema))
    return 0;
  if (!json_is_object(schema)) {
    set_err(err, errlen, "%s: schema is not an object", where);
    return -1;
  }
  const char *key;
  json_t *val;
  json_object_foreach((json_t *)schema, key, val) {
    int rc = 0;
    if (!in_list(schema_keywords, key) && strncmp(key, "x-", 2) != 0) {
      set_err(err, errlen, "%s: unsupported schema keyword '%s'", where, key);
      rc = -1;
    } else if (strcmp(key, "$ref") == 0 && !resolve_ref(spec->doc, json_string_value(val))) {
      set_err(err, errlen, "%s: $ref '%s' does not resolve", where, json_string_value(val));
      rc = -1;
    } else if (strcmp(key, "type") == 0) {
      rc = lint_type(val, where, err, errlen);
    } else if (strcmp(key, "pattern") == 0 &&
               (!json_is_string(val) || !get_regex(spec, json_string_value(val)))) {
      set_err(err, errlen, "%s: pattern does not compile as a POSIX ERE", where);
      rc = -1;
    } else if (strcmp(key, "properties") == 0) {
      const char *name;
      json_t *sub;
      json_object_foreach(val, name, sub) {
        char inner[512];
        snprintf(inner, sizeof inner, "%s.%s", where, name);
        if ((rc = lint_schema(spec, sub, inner, err, errlen)) != 0)
          break;
      }
    } else if (strcmp(key, "items") == 0 || strcmp(key, "not") == 0 ||
               strcmp(key, "additionalProperties") == 0) {
      rc = lint_schema(spec, val, where, err, errlen);
    } else if (strcmp(key, "allOf") == 0 || strcmp(key, "anyOf") == 0 ||
               strcmp(key, "oneOf") == 0) {
      rc = lint_schema_array(spec, val, where, err, errlen);
    } else if ((strcmp(key, "enum") == 0 && !json_is_array(val)) ||
               (strcmp(key, "required") == 0 && !json_is_array(val))) {
      set_err(err, errlen, "%s: '%s' must be an array", where, key);
      rc = -1;
    }
    if (rc != 0)
      return -1;
  }
  return 0;
}

static int lint_content(struct spec *spec, const json_t *content, const char *where,
                        char *err, size_t errlen) {
  const char *media;
  json_t *obj;
  json_object_foreach((json_t *)content, media, obj) {
    char inner[512];
    snprintf(inner, sizeof inner, "%s[%s]", where, media);
    const json_t *schema = json_object_get(obj, "schema");
    if (schema && lint_schema(spec, schema, inner, err, errlen) != 0)
      return -1;
    const json_t *event = json_object_get(obj, "x-opforge-event-data");
    if (event && lint_schema(spec, event, inner, err, errlen) != 0)
      return -1;
  }
  return 0;
}

static int lint_response(struct spec *spec, const json_t *resp, const char *where, char *err,
                         size_t errlen) {
  const json_t *r = deref(spec->doc, resp);
  if (!json_is_object(r)) {
    set_err(err, errlen, "%s: response does not resolve", where);
    return -1;
  }
  if (lint_content(spec, json_object_get(r, "content"), where, err, errlen) != 0)
    return -1;
  const char *name;
  json_t *hdr;
  json_object_foreach(json_object_get(r, "headers"), name, hdr) {
    const json_t *schema = json_object_get(hdr, "schema");
    if (schema && lint_schema(spec, schema, where, err, errlen) != 0)
      return -1;
  }
  return 0;
}

static int lint_parameters(struct spec *spec, const json_t *params, const char *where,
                           char *err, size_t errlen) {
  size_t i;
  const json_t *p;
  json_array_foreach(params, i, p) {
    const json_t *param = deref(spec->doc, p);
    const json_t *schema = json_object_get(param, "schema");
    if (!param || (schema && lint_schema(spec, schema, where, err, errlen) != 0)) {
      if (!param)
        set_err(err, errlen, "%s: parameter does not resolve", where);
      return -1;
    }
  }
  return 0;
}

/* ---------------------------------------------------------------- load */

/* Indexes one path item's operations and lints their parameters, body and responses. */
static int index_path(struct spec *spec, const char *tpl, const json_t *item, char *err,
                      size_t errlen) {
  bool item_pending = json_is_true(json_object_get(item, "x-opforge-pending"));
  if (lint_parameters(spec, json_object_get(item, "parameters"), tpl, err, errlen) != 0)
    return -1;
  for (size_t m = 0; http_methods[m]; m++) {
    const json_t *op = json_object_get(item, http_methods[m]);
    if (!op)
      continue;
    char where[300];
    snprintf(where, sizeof where, "%s %s", http_methods[m], tpl);
    const json_t *responses = json_object_get(op, "responses");
    if (!json_is_object(responses) || json_object_size(responses) == 0) {
      set_err(err, errlen, "%s: no responses", where);
      return -1;
    }
    const char *status;
    json_t *resp;
    json_object_foreach((json_t *)responses, status, resp) {
      if (lint_response(spec, resp, where, err, errlen) != 0)
        return -1;
    }
    const json_t *body = deref(spec->doc, json_object_get(op, "requestBody"));
    if (lint_parameters(spec, json_object_get(op, "parameters"), where, err, errlen) != 0 ||
        lint_content(spec, json_object_get(body, "content"), where, err, errlen) != 0)
      return -1;
    struct op_cov *c = &spec->ops[spec->n_ops++];
    for (size_t k = 0; k < sizeof c->method - 1 && http_methods[m][k]; k++)
      c->method[k] = (char)toupper((unsigned char)http_methods[m][k]);
    c->tpl = tpl;
    c->op = op;
    c->pending = item_pending || json_is_true(json_object_get(op, "x-opforge-pending"));
  }
  return 0;
}

static int lint_components(struct spec *spec, char *err, size_t errlen) {
  const json_t *components = json_object_get(spec->doc, "components");
  const char *name;
  json_t *obj;
  json_object_foreach(json_object_get(components, "schemas"), name, obj) {
    char where[300];
    snprintf(where, sizeof where, "#/components/schemas/%s", name);
    if (lint_schema(spec, obj, where, err, errlen) != 0)
      return -1;
  }
  json_object_foreach(json_object_get(components, "responses"), name, obj) {
    char where[300];
    snprintf(where, sizeof where, "#/components/responses/%s", name);
    if (lint_response(spec, obj, where, err, errlen) != 0)
      return -1;
  }
  static const char *const globals[] = {"x-opforge-unrouted-responses",
                                        "x-opforge-common-responses"};
  for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
    json_object_foreach(json_object_get(spec->doc, globals[i]), name, obj) {
      if (lint_response(spec, obj, globals[i], err, errlen) != 0)
        return -1;
    }
  return 0;
}

int spec_load(json_t *doc, struct spec **ret_spec, char *err, size_t errlen) {
  const json_t *paths = json_object_get(doc, "paths");
  if (!json_is_object(paths)) {
    set_err(err, errlen, "the document has no 'paths' object");
    return -1;
  }
  struct spec *spec = calloc(1, sizeof *spec);
  if (!spec) {
    set_err(err, errlen, "out of memory");
    return -1;
  }
  spec->doc = json_incref(doc);
  spec->ops = calloc(json_object_size(paths) * 8 + 1, sizeof *spec->ops);
  if (!spec->ops) {
    set_err(err, errlen, "out of memory");
    spec_free(spec);
    return -1;
  }
  const char *tpl;
  json_t *item;
  json_object_foreach((json_t *)paths, tpl, item) {
    if (index_path(spec, tpl, item, err, errlen) != 0) {
      spec_free(spec);
      return -1;
    }
  }
  if (lint_components(spec, err, errlen) != 0) {
    spec_free(spec);
    return -1;
  }
  *ret_spec = spec;
  return 0;
}

int spec_load_file(const char *path, struct spec **ret_spec, char *err, size_t errlen) {
  json_error_t jerr;
  json_t *doc = json_load_file(path, 0, &jerr);
  if (!doc) {
    set_err(err, errlen, "%s:%d:%d: %s", path, jerr.line, jerr.column, jerr.text);
    return -1;
  }
  int rc = spec_load(doc, ret_spec, err, errlen);
  json_decref(doc);
  return rc;
}

void spec_free(struct spec *spec) {
  if (!spec)
    return;
  struct regex_entry *e = spec->regexes;
  while (e) {
    struct regex_entry *next = e->next;
    regfree(&e->re);
    free(e->pattern);
    free(e);
    e = next;
  }
  free(spec->ops);
  json_decref(spec->doc);
  free(spec);
}

const json_t *spec_document(const struct spec *spec) {
  return spec->doc;
}

/* ---------------------------------------------------------------- responses */

/* Matches a concrete path against a template; a {param} matches one non-empty segment.
 * Returns the number of parameters, or -1 when it does not match. */
static int template_match(const char *tpl, const char *path, size_t path_len) {
  const char *end = path + path_len;
  int params = 0;
  while (*tpl && path < end) {
    if (*tpl == '{') {
      const char *close = strchr(tpl, '}');
      if (!close)
        return -1;
      const char *seg = path;
      while (path < end && *path != '/')
        path++;
      if (path == seg)
        return -1;
      tpl = close + 1;
      params++;
    } else if (*tpl++ != *path++) {
      return -1;
    }
  }
  return *tpl == '\0' && path == end ? params : -1;
}

/* The operation for method and path, preferring the template with fewest parameters so
 * that a literal segment wins over {id}. *ret_path_known tells whether any template
 * matched the path. NULL when no operation matches. */
static struct op_cov *find_op(struct spec *spec, const char *method, const char *target,
                              bool *ret_path_known) {
  size_t path_len = strcspn(target, "?#");
  int best_params = -1;
  const char *best_tpl = NULL;
  for (size_t i = 0; i < spec->n_ops; i++) {
    int params = template_match(spec->ops[i].tpl, target, path_len);
    if (params >= 0 && (best_params < 0 || params < best_params)) {
      best_params = params;
      best_tpl = spec->ops[i].tpl;
    }
  }
  *ret_path_known = best_tpl != NULL;
  for (size_t i = 0; best_tpl && i < spec->n_ops; i++)
    if (spec->ops[i].tpl == best_tpl && strcasecmp(spec->ops[i].method, method) == 0)
      return &spec->ops[i];
  return NULL;
}

static void record(struct op_cov *op, long status) {
  op->hits++;
  for (size_t i = 0; i < op->n_statuses; i++)
    if (op->statuses[i] == status)
      return;
  if (op->n_statuses < MAX_STATUSES)
    op->statuses[op->n_statuses++] = status;
}

/* The response object for status in a responses map: exact code, then "4XX", then
 * "default". NULL when undocumented. */
static const json_t *find_response(const json_t *doc, const json_t *responses, long status) {
  char key[32];
  snprintf(key, sizeof key, "%ld", status);
  const json_t *r = json_object_get(responses, key);
  if (!r) {
    snprintf(key, sizeof key, "%ldXX", status / 100);
    r = json_object_get(responses, key);
  }
  if (!r)
    r = json_object_get(responses, "default");
  return r ? deref(doc, r) : NULL;
}

static const char *find_header(const struct spec_exchange *ex, const char *name) {
  for (size_t i = 0; i < ex->n_headers; i++)
    if (strcasecmp(ex->headers[i].name, name) == 0)
      return ex->headers[i].value;
  return NULL;
}

/* Copies s[0..n) without surrounding blanks and in lower case when lower is set. */
static void trimmed(char *out, size_t outlen, const char *s, size_t n, bool lower) {
  while (n > 0 && isspace((unsigned char)*s)) {
    s++;
    n--;
  }
  while (n > 0 && isspace((unsigned char)s[n - 1]))
    n--;
  size_t k = 0;
  for (; k < n && k + 1 < outlen; k++)
    out[k] = lower ? (char)tolower((unsigned char)s[k]) : s[k];
  out[k] = '\0';
}

/* True when the Content-Type header value names the media type of a spec content key:
 * same type/subtype, and every parameter of the key present with the same value. */
static bool media_type_matches(const char *key, const char *header) {
  char a[128], b[128];
  trimmed(a, sizeof a, key, strcspn(key, ";"), true);
  trimmed(b, sizeof b, header, strcspn(header, ";"), true);
  if (strcmp(a, b) != 0)
    return false;
  for (const char *p = strchr(key, ';'); p; p = strchr(p + 1, ';')) {
    char want[128];
    trimmed(want, sizeof want, p + 1, strcspn(p + 1, ";"), false);
    bool found = false;
    for (const char *q = strchr(header, ';'); q && !found; q = strchr(q + 1, ';')) {
      char got[128];
      trimmed(got, sizeof got, q + 1, strcspn(q + 1, ";"), false);
      found = strcasecmp(want, got) == 0;
    }
    if (!found)
      return false;
  }
  return true;
}

static int check_headers(struct spec *spec, const json_t *resp,
                         const struct spec_exchange *ex, char *err, size_t errlen) {
  const char *name;
  json_t *hdr;
  json_object_foreach(json_object_get(resp, "headers"), name, hdr) {
    const char *value = find_header(ex, name);
    if (!value) {
      if (json_is_true(json_object_get(hdr, "required"))) {
        set_err(err, errlen, "required header %s is missing", name);
        return -1;
      }
      continue;
    }
    const json_t *schema = json_object_get(hdr, "schema");
    json_t *str = json_string(value);
    char inner[512];
    int rc = schema && str ? spec_validate(spec, schema, str, inner, sizeof inner) : 0;
    json_decref(str);
    if (rc != 0) {
      set_err(err, errlen, "header %s: %s", name, inner);
      return -1;
    }
  }
  return 0;
}

/* Dispatches one Server-Sent Event: data must be JSON valid against schema, with seq
 * equal to the id field, type equal to the event field, and seq increasing. */
static int check_sse_event(struct spec *spec, const json_t *frame_schema,
                           const json_t *schema, const char *id, const char *event,
                           const char *data, long *last_seq, char *err, size_t errlen) {
  char inner[512];
  /* The frame, as schemathesis sees it: its fields as strings. */
  json_t *frame = json_pack("{s:s*, s:s*, s:s}", "id", id, "event", event, "data", data);
  int frc = frame && frame_schema ? spec_validate(spec, frame_schema, frame, inner, sizeof inner)
                                  : 0;
  json_decref(frame);
  if (frc != 0) {
    set_err(err, errlen, "event frame: %s", inner);
    return -1;
  }
  json_error_t jerr;
  json_t *doc = json_loads(data, 0, &jerr);
  if (!doc) {
    set_err(err, errlen, "event data is not JSON (%s): %.200s", jerr.text, data);
    return -1;
  }
  int rc = schema ? spec_validate(spec, schema, doc, inner, sizeof inner) : 0;
  if (rc != 0)
    set_err(err, errlen, "event data: %s", inner);
  long long seq = json_integer_value(json_object_get(doc, "seq"));
  const char *type = json_string_value(json_object_get(doc, "type"));
  char seq_text[32];
  snprintf(seq_text, sizeof seq_text, "%lld", seq);
  if (rc == 0 && (!id || strcmp(id, seq_text) != 0)) {
    set_err(err, errlen, "event id '%s' differs from data.seq %lld", id ? id : "(none)", seq);
    rc = -1;
  }
  if (rc == 0 && (!event || !type || strcmp(event, type) != 0)) {
    set_err(err, errlen, "event name '%s' differs from data.type", event ? event : "(none)");
    rc = -1;
  }
  if (rc == 0 && seq <= *last_seq) {
    set_err(err, errlen, "event seq %lld does not increase (after %ld)", seq, *last_seq);
    rc = -1;
  }
  *last_seq = (long)seq;
  json_decref(doc);
  return rc;
}

/* Parses a text/event-stream body (lines end in \n, optionally \r\n) and checks each
 * event: the frame ({"id","event","data"} as strings) against frame_schema, the data
 * as JSON against schema. Only the fields id, event, data and retry and comment lines
 * may appear, and the body must end at an event boundary. */
static int check_sse(struct spec *spec, const json_t *frame_schema, const json_t *schema,
                     const char *body, size_t len, char *err, size_t errlen) {
  char id[64] = "", event[64] = "";
  char *data = calloc(1, len + 1);
  if (!data) {
    set_err(err, errlen, "out of memory");
    return -1;
  }
  size_t data_len = 0;
  bool have_id = false, have_event = false, in_event = false;
  long last_seq = 0;
  int rc = 0;
  const char *p = body, *end = body + len;
  while (p < end && rc == 0) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl) {
      size_t left = (size_t)(end - p);
      set_err(err, errlen, "stream ends inside a line: %.*s", (int)(left < 80 ? left : 80), p);
      rc = -1;
      break;
    }
    size_t n = (size_t)(nl - p);
    if (n > 0 && p[n - 1] == '\r')
      n--;
    if (n == 0) {
      if (in_event && data_len > 0)
        rc = check_sse_event(spec, frame_schema, schema, have_id ? id : NULL,
                             have_event ? event : NULL, data, &last_seq, err, errlen);
      in_event = have_id = have_event = false;
      data_len = 0;
      data[0] = '\0';
    } else if (p[0] != ':') {
      size_t flen = strcspn(p, ":\n");
      flen = flen < n ? flen : n;
      const char *value = p + flen + (flen < n ? 1 : 0);
      if (value < p + n && *value == ' ')
        value++;
      size_t vlen = (size_t)(p + n - value);
      in_event = true;
      if (flen == 2 && strncmp(p, "id", 2) == 0) {
        trimmed(id, sizeof id, value, vlen, false);
        have_id = true;
      } else if (flen == 5 && strncmp(p, "event", 5) == 0) {
        trimmed(event, sizeof event, value, vlen, false);
        have_event = true;
      } else if (flen == 4 && strncmp(p, "data", 4) == 0) {
        if (data_len > 0)
          data[data_len++] = '\n';
        memcpy(data + data_len, value, vlen);
        data_len += vlen;
        data[data_len] = '\0';
      } else if (!(flen == 5 && strncmp(p, "retry", 5) == 0)) {
        set_err(err, errlen, "unknown event-stream field '%.*s'", (int)flen, p);
        rc = -1;
      }
    }
    p = nl + 1;
  }
  if (rc == 0 && in_event) {
    set_err(err, errlen, "stream ends inside an event (no blank line after it)");
    rc = -1;
  }
  free(data);
  return rc;
}

/* Checks the body of a response documented with content. */
static int check_body(struct spec *spec, const char *media, const json_t *media_obj,
                      const struct spec_exchange *ex, char *err, size_t errlen) {
  const json_t *schema = json_object_get(media_obj, "schema");
  char inner[512];
  size_t mlen = strcspn(media, ";");
  bool is_json = (mlen == 16 && strncasecmp(media, "application/json", 16) == 0) ||
                 (mlen > 5 && strncasecmp(media + mlen - 5, "+json", 5) == 0);
  if (is_json) {
    json_error_t jerr;
    json_t *doc = json_loadb(ex->body ? ex->body : "", ex->body_len, JSON_DECODE_ANY, &jerr);
    if (!doc) {
      set_err(err, errlen, "body is not JSON (%s): %.*s", jerr.text,
              (int)(ex->body_len < 200 ? ex->body_len : 200), ex->body ? ex->body : "");
      return -1;
    }
    int rc = schema ? spec_validate(spec, schema, doc, inner, sizeof inner) : 0;
    json_decref(doc);
    if (rc != 0)
      set_err(err, errlen, "body: %s", inner);
    return rc;
  }
  if (mlen == 17 && strncasecmp(media, "text/event-stream", 17) == 0)
    return check_sse(spec, schema, json_object_get(media_obj, "x-opforge-event-data"),
                     ex->body ? ex->body : "", ex->body_len, err, errlen);
  /* Any other type: text must at least be UTF-8 and match a string schema. */
  json_t *text = json_stringn(ex->body ? ex->body : "", ex->body_len);
  if (!text) {
    set_err(err, errlen, "body is not UTF-8 text");
    return -1;
  }
  int rc = schema ? spec_validate(spec, schema, text, inner, sizeof inner) : 0;
  json_decref(text);
  if (rc != 0)
    set_err(err, errlen, "body: %s", inner);
  return rc;
}

/* Checks headers, Content-Type and body of a response against the resolved response
 * object. */
static int check_response_object(struct spec *spec, const json_t *resp,
                                 const struct spec_exchange *ex, char *err, size_t errlen) {
  if (check_headers(spec, resp, ex, err, errlen) != 0)
    return -1;
  const json_t *content = json_object_get(resp, "content");
  if (strcasecmp(ex->method, "HEAD") == 0) {
    /* The GET response's headers, without its body. */
    if (ex->body_len != 0) {
      set_err(err, errlen, "a HEAD response has a body of %zu bytes", ex->body_len);
      return -1;
    }
    const char *ctype = find_header(ex, "Content-Type");
    const char *media;
    json_t *media_obj;
    if (!content || json_object_size(content) == 0)
      return 0;
    json_object_foreach((json_t *)content, media, media_obj) {
      if (ctype && media_type_matches(media, ctype))
        return 0;
    }
    set_err(err, errlen, "Content-Type '%s' is not documented for this response",
            ctype ? ctype : "(none)");
    return -1;
  }
  if (!content || json_object_size(content) == 0) {
    if (ex->body_len != 0) {
      set_err(err, errlen, "response is documented without a body, got %zu bytes",
              ex->body_len);
      return -1;
    }
    return 0;
  }
  const char *ctype = find_header(ex, "Content-Type");
  if (!ctype && json_is_true(json_object_get(resp, "x-opforge-untyped-body"))) {
    /* Documented as sent without a Content-Type (the HTTP library's own answers): the
     * body must match one of the media types the response lists. */
    const char *media;
    json_t *media_obj;
    json_object_foreach((json_t *)content, media, media_obj) {
      if (check_body(spec, media, media_obj, ex, err, errlen) == 0)
        return 0;
    }
    return -1;
  }
  if (!ctype) {
    set_err(err, errlen, "Content-Type header is missing");
    return -1;
  }
  const char *media;
  json_t *media_obj;
  json_object_foreach((json_t *)content, media, media_obj) {
    if (media_type_matches(media, ctype))
      return check_body(spec, media, media_obj, ex, err, errlen);
  }
  set_err(err, errlen, "Content-Type '%s' is not documented for this response", ctype);
  return -1;
}

int spec_check_response(struct spec *spec, const struct spec_exchange *ex, char *err,
                        size_t errlen) {
  char local[1024];
  char *msg = err && errlen ? err : local;
  size_t msglen = err && errlen ? errlen : sizeof local;
  bool path_known = false;
  /* HEAD is answered wherever GET is, with the GET operation's headers. */
  const char *method = strcasecmp(ex->method, "HEAD") == 0 ? "GET" : ex->method;
  struct op_cov *op = find_op(spec, method, ex->target, &path_known);
  const json_t *responses =
      op ? json_object_get(op->op, "responses")
         : json_object_get(spec->doc, "x-opforge-unrouted-responses");
  if (op)
    record(op, ex->status);
  const json_t *resp = find_response(spec->doc, responses, ex->status);
  char inner[1024] = "";
  int rc = 0;
  if (!resp) {
    snprintf(inner, sizeof inner, "status %ld is not documented (%s)", ex->status,
             op ? "for this operation"
                : path_known ? "path exists without this method" : "unknown path");
    rc = -1;
  } else {
    rc = check_response_object(spec, resp, ex, inner, sizeof inner);
  }
  /* Responses any request may get (a malformed header, a Host of another server, a
   * cross-site write, the HTTP library's own answers) are documented once. */
  const json_t *common = find_response(
      spec->doc, json_object_get(spec->doc, "x-opforge-common-responses"), ex->status);
  char ignored[1024];
  if (rc != 0 && common && check_response_object(spec, common, ex, ignored, sizeof ignored) == 0)
    rc = 0;
  if (rc != 0)
    set_err(msg, msglen, "%s %.120s%s -> %ld: %s", ex->method, ex->target,
            strlen(ex->target) > 120 ? "..." : "", ex->status, inner);
  return rc;
}

/* ---------------------------------------------------------------- coverage */

size_t spec_report_unexercised(const struct spec *spec, FILE *out) {
  size_t missing = 0;
  for (size_t i = 0; i < spec->n_ops; i++) {
    const struct op_cov *c = &spec->ops[i];
    if (c->pending || c->hits > 0)
      continue;
    fprintf(out, "spec operation never exercised: %s %s\n", c->method, c->tpl);
    missing++;
  }
  return missing;
}

void spec_report_coverage(const struct spec *spec, FILE *out) {
  for (size_t i = 0; i < spec->n_ops; i++) {
    const struct op_cov *c = &spec->ops[i];
    fprintf(out, "coverage: %-6s %-28s %s", c->method, c->tpl, c->pending ? "(pending) " : "");
    const char *status;
    json_t *resp;
    json_object_foreach(json_object_get(c->op, "responses"), status, resp) {
      bool seen = false;
      for (size_t k = 0; k < c->n_statuses; k++)
        seen = seen || c->statuses[k] == strtol(status, NULL, 10);
      fprintf(out, " %s%s", status, seen ? "+" : "-");
    }
    fputc('\n', out);
  }
}
