/* Validation of a task submission (docs/architecture.md, "Formats") into normalized options. */
#include "handlers/submission.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "engine/search_config.h"
#include "store/memory.h"
#include "store/servers.h"

enum field_kind { F_NAME, F_SOURCE, F_ENUM, F_INT, F_NUMBER, F_OBJECT, F_STRING_OR_NULL,
                  F_INT_OR_NULL, F_NUMBER_OR_NULL, F_SEARCH, F_NAMESPACE };

/* One key of the schema: kind, bounds, choices or children. */
struct field_spec {
  const char *key;
  enum field_kind kind;
  double lo, hi;                     /* bounds (F_INT, F_NUMBER: inclusive; lo_open) */
  bool lo_open;                      /* lower bound excluded */
  const char *const *choices;        /* F_ENUM, NULL-terminated */
  const struct field_spec *children; /* F_OBJECT, ended by key NULL */
};

static const char *const proposers[] = {"builtin", "llm", "test", NULL};
static const char *const policies[] = {"single", "refine", "flat", "htam", "tree", "htam+tree",
                                       "best_of_n", NULL};
static const char *const precisions[] = {"fp32", "tf32", "bf16", NULL};

static const struct field_spec budget_fields[] = {
  {"steps", F_INT, 1, 1000, false, NULL, NULL},
  {"seconds", F_INT, 1, 86400, false, NULL, NULL},
  {"llm_usd", F_NUMBER, 0, 1000, false, NULL, NULL},
  {"llm_tokens", F_INT, 1, 1000000000, false, NULL, NULL},
  {"stop_at_floor", F_NUMBER, 0, 1, false, NULL, NULL},
  {NULL, 0, 0, 0, false, NULL, NULL},
};
static const struct field_spec tolerance_fields[] = {
  {"atol", F_NUMBER, 0, 1, true, NULL, NULL},
  {"rtol", F_NUMBER, 0, 1, true, NULL, NULL},
  {NULL, 0, 0, 0, false, NULL, NULL},
};
/* The endpoint and its key are the server's alone: a task that could name the URL would
 * have the server send its key there. */
static const struct field_spec llm_fields[] = {
  {"model", F_STRING_OR_NULL, 1, 128, false, NULL, NULL},
  {"temperature", F_NUMBER_OR_NULL, 0, 2, false, NULL, NULL},
  {"max_tokens", F_INT_OR_NULL, 16, 131072, false, NULL, NULL},
  {NULL, 0, 0, 0, false, NULL, NULL},
};
static const struct field_spec submission_fields[] = {
  {"name", F_NAME, 1, 128, false, NULL, NULL},
  {"reference", F_SOURCE, 1, SUBMISSION_MAX_REFERENCE, false, NULL, NULL},
  {"proposer", F_ENUM, 0, 0, false, proposers, NULL},
  {"policy", F_ENUM, 0, 0, false, policies, NULL},
  {"budget", F_OBJECT, 0, 0, false, NULL, budget_fields},
  {"precision", F_ENUM, 0, 0, false, precisions, NULL},
  {"tolerance", F_OBJECT, 0, 0, false, NULL, tolerance_fields},
  {"trials", F_INT, 1, 50, false, NULL, NULL},
  {"seed", F_INT, 0, 2147483647.0, false, NULL, NULL},
  {"llm", F_OBJECT, 0, 0, false, NULL, llm_fields},
  {"search", F_SEARCH, 0, 0, false, NULL, NULL},
  {"memory", F_NAMESPACE, 0, 0, false, NULL, NULL},
  {"device", F_NAME, 1, 128, false, NULL, NULL},
  {NULL, 0, 0, 0, false, NULL, NULL},
};

/* Fills *err (message formatted like printf) and returns -1. */
__attribute__((format(printf, 4, 5))) static int fail(struct validation_error *err,
                                                       enum api_error code, const char *field,
                                                       const char *fmt, ...) {
  err->code = code;
  snprintf(err->field, sizeof err->field, "%s", field);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return -1;
}

static bool name_char_ok(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == '-';
}

const char *submission_check_reference(const char *source, size_t len) {
  (void)len;
  if (!strstr(source, "class Model(") && !strstr(source, "class Model:"))
    return "the reference must define class Model";
  if (!strstr(source, "def get_inputs("))
    return "the reference must define get_inputs()";
  if (!strstr(source, "def get_init_inputs("))
    return "the reference must define get_init_inputs()";
  return NULL;
}

/* Checks a string field (name or reference source). */
static int check_string(const struct field_spec *f, json_t *v, const char *path,
                        struct validation_error *err) {
  if (!json_is_string(v))
    return fail(err, API_ERR_INVALID_FIELD, path, "%s must be a string%s", path, "");
  size_t len = json_string_length(v);
  const char *s = json_string_value(v);
  if (f->kind == F_SOURCE) {
    size_t chars = 0; /* code points, as the spec's maxLength counts them */
    for (size_t i = 0; i < len; i++)
      chars += ((unsigned char)s[i] & 0xC0) != 0x80;
    if (chars > (size_t)f->hi)
      return fail(err, API_ERR_INVALID_REFERENCE, path,
                  "%s is over the 262144-character limit%s", path, "");
    if (len == 0 || strlen(s) != len)
      return fail(err, API_ERR_INVALID_REFERENCE, path, "%s must be non-empty text%s", path, "");
    const char *why = submission_check_reference(s, len);
    return why ? fail(err, API_ERR_INVALID_REFERENCE, path, "%s: %s", path, why) : 0;
  }
  if (len < (size_t)f->lo || len > (size_t)f->hi)
    return fail(err, API_ERR_INVALID_FIELD, path, "%s must be 1 to 128 characters%s", path, "");
  for (size_t i = 0; i < len; i++)
    if (!name_char_ok(s[i]))
      return fail(err, API_ERR_INVALID_FIELD, path,
                  "%s may hold only letters, digits, '_', '.' and '-'%s", path, "");
  return 0;
}

/* Checks a number against the spec's bounds (integers must be JSON integers). */
static int check_number(const struct field_spec *f, json_t *v, const char *path,
                        struct validation_error *err) {
  if ((f->kind == F_INT || f->kind == F_INT_OR_NULL) && !json_is_integer(v))
    return fail(err, API_ERR_INVALID_FIELD, path, "%s must be an integer%s", path, "");
  if (!json_is_number(v))
    return fail(err, API_ERR_INVALID_FIELD, path, "%s must be a number%s", path, "");
  double x = json_number_value(v);
  char range[96];
  if (f->kind == F_INT) /* integers as integers: [0, 2147483647], not 2.14748e+09 */
    snprintf(range, sizeof range, " %s%.0f, %.0f]", f->lo_open ? "(" : "[", f->lo, f->hi);
  else
    snprintf(range, sizeof range, " %s%g, %g]", f->lo_open ? "(" : "[", f->lo, f->hi);
  if (!isfinite(x) || x > f->hi || x < f->lo || (f->lo_open && x <= f->lo))
    return fail(err, API_ERR_INVALID_FIELD, path, "%s must be in%s", path, range);
  return 0;
}

static int check_object(const struct field_spec *fields, json_t *obj, const char *prefix,
                        struct validation_error *err);

/* Checks a search object against engine/search_config.c's table: an unknown key is
 * unknown_field and a bad value invalid_field, both naming "search.<key>". */
static int check_search(json_t *v, const char *path, struct validation_error *err) {
  if (!json_is_object(v))
    return fail(err, API_ERR_INVALID_FIELD, path, "%s must be an object%s", path, "");
  struct search_config cfg;
  struct search_config_error why;
  search_config_defaults(&cfg);
  if (search_config_apply(&cfg, v, &why) == 0)
    return 0;
  char field[64];  /* a longer key is cut: the message names it whole */
  if (snprintf(field, sizeof field, "%s.%s", path, why.key) >= (int)sizeof field)
    field[sizeof field - 1] = '\0';
  return fail(err, why.unknown ? API_ERR_UNKNOWN_FIELD : API_ERR_INVALID_FIELD, field,
              "%s.%s", path, why.message);
}

/* Checks one value against its spec; path is its JSON path. */
static int check_field(const struct field_spec *f, json_t *v, const char *path,
                       struct validation_error *err) {
  switch (f->kind) {
  case F_NAME:
  case F_SOURCE:
    return check_string(f, v, path, err);
  case F_INT_OR_NULL:
  case F_NUMBER_OR_NULL:
    if (json_is_null(v))
      return 0;
    return check_number(f, v, path, err);
  case F_INT:
  case F_NUMBER:
    return check_number(f, v, path, err);
  case F_OBJECT:
    if (!json_is_object(v))
      return fail(err, API_ERR_INVALID_FIELD, path, "%s must be an object%s", path, "");
    return check_object(f->children, v, path, err);
  case F_SEARCH:
    return check_search(v, path, err);
  case F_NAMESPACE:
    if (!store_memory_namespace_valid(json_string_value(v)))
      return fail(err, API_ERR_INVALID_FIELD, path,
                  "%s must match ^[a-z0-9][a-z0-9_-]{0,63}$ (not seed or empty)%s", path, "");
    return 0;
  case F_STRING_OR_NULL:
    if (json_is_null(v))
      return 0;
    if (!json_is_string(v) || json_string_length(v) < 1 || json_string_length(v) > 128)
      return fail(err, API_ERR_INVALID_FIELD, path,
                  "%s must be null or a string of 1 to 128 characters%s", path, "");
    return 0;
  case F_ENUM: {
    char choices[128] = "";
    size_t used = 0;
    for (const char *const *c = f->choices; *c; c++) {
      if (json_is_string(v) && strcmp(*c, json_string_value(v)) == 0)
        return 0;
      used += (size_t)snprintf(choices + used, sizeof choices - used, "%s%s",
                               used ? ", " : "", *c);
    }
    return fail(err, API_ERR_INVALID_FIELD, path, "%s must be one of: %s", path, choices);
  }
  }
  return 0;
}

/* Rejects unknown keys, then checks each known key present. */
static int check_object(const struct field_spec *fields, json_t *obj, const char *prefix,
                        struct validation_error *err) {
  const char *key;
  json_t *value;
  json_object_foreach(obj, key, value) {
    char path[64];
    snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", key);
    const struct field_spec *f = fields;
    while (f->key && strcmp(f->key, key) != 0)
      f++;
    if (!f->key)
      return fail(err, API_ERR_UNKNOWN_FIELD, path, "%s is not a known field%s", path, "");
    if (check_field(f, value, path, err) != 0)
      return -1;
  }
  return 0;
}

/* The defaults of docs/architecture.md, "Formats"; the tolerance follows the precision. */
static json_t *default_options(const char *precision) {
  double tol = strcmp(precision, "fp32") == 0 ? 1e-4 : 1e-2;
  return json_pack("{s:s, s:s, s:{s:i, s:i, s:f, s:f}, s:s, s:{s:f, s:f}, s:i, s:i, s:{s:n}}",
                   "proposer", "builtin", "policy", "htam+tree", "budget", "steps", 20,
                   "seconds", 900, "llm_usd", 0.5, "stop_at_floor", 0.97, "precision",
                   precision, "tolerance", "atol", tol, "rtol", tol, "trials", 5, "seed", 42,
                   "llm", "model");
}

/* Copies given values over the defaults, one level of nesting deep. Returns 0, or -1
 * when Jansson cannot allocate (options is then partly merged and must be dropped). */
static int merge_options(json_t *options, json_t *body) {
  const char *key;
  json_t *value;
  json_object_foreach(body, key, value) {
    if (strcmp(key, "name") == 0 || strcmp(key, "reference") == 0)
      continue;
    json_t *dst = json_object_get(options, key);
    int rc = json_is_object(value) && json_is_object(dst) ? json_object_update(dst, value)
                                                          : json_object_set(options, key, value);
    if (rc != 0)
      return -1;
  }
  return 0;
}

int submission_parse(json_t *body, struct submission *ret, struct validation_error *err) {
  if (check_object(submission_fields, body, "", err) != 0)
    return -1;
  json_t *reference = json_object_get(body, "reference");
  if (!reference)
    return fail(err, API_ERR_MISSING_FIELD, "reference", "%s is required%s", "reference", "");
  char device[STORE_DEVICE_CLASS_MAX + 2] = "";
  const char *device_given = json_string_value(json_object_get(body, "device"));
  if (device_given && (strlen(device_given) > STORE_DEVICE_CLASS_MAX ||
                       (snprintf(device, sizeof device, "%s", device_given),
                        !store_device_class_normalize(device))))
    return fail(err, API_ERR_INVALID_FIELD, "device",
                "device must be a device class like H200: 1 to 32 letters, digits, '.', '_' "
                "or '-'%s%s", "", "");
  json_t *precision = json_object_get(body, "precision");
  json_t *options = default_options(precision ? json_string_value(precision) : "fp32");
  if (!options)
    return fail(err, API_ERR_INTERNAL, "", "out of memory%s%s", "", "");
  if (merge_options(options, body) != 0 ||
      (device[0] && json_object_set_new(options, "device", json_string(device)) != 0)) {
    json_decref(options);
    return fail(err, API_ERR_INTERNAL, "", "out of memory%s%s", "", "");
  }
  json_t *name = json_object_get(body, "name");
  snprintf(ret->name, sizeof ret->name, "%s", name ? json_string_value(name) : "task");
  ret->options = options;
  ret->reference = json_string_value(reference);
  ret->reference_bytes = json_string_length(reference);
  return 0;
}

int submission_resolve(struct submission *s, struct store *store,
                       const struct search_config *defaults, struct validation_error *err) {
  const char *ns = json_string_value(json_object_get(s->options, "memory"));
  if (!ns) {
    ns = MEMORY_DEFAULT_NAMESPACE;
    if (json_object_set_new(s->options, "memory", json_string(ns)) != 0)
      return fail(err, API_ERR_INTERNAL, "", "out of memory%s%s", "", "");
  }
  json_t *found = NULL;
  int rc = store_memory_namespace_get(store, ns, &found);
  json_decref(found);
  if (rc == STORE_NOT_FOUND)
    return fail(err, API_ERR_NAMESPACE_NOT_FOUND, "memory",
                "no memory namespace is named '%s'%s", ns, "");
  if (rc != STORE_OK)
    return fail(err,
                rc == STORE_BUSY          ? API_ERR_STORE_BUSY
                : rc == STORE_UNAVAILABLE ? API_ERR_STORE_UNAVAILABLE
                                          : API_ERR_INTERNAL,
                "",
                "%s%s",
                rc == STORE_UNAVAILABLE
                    ? "the database server cannot be reached; nothing was changed; retry shortly"
                : rc == STORE_BUSY ? "the store is busy; retry shortly"
                                   : "the store failed",
                "");
  struct search_config cfg = *defaults;
  json_t *given = json_object_get(s->options, "search");
  if (given && search_config_apply(&cfg, given, NULL) != 0)
    return fail(err, API_ERR_INVALID_FIELD, "search", "search is invalid%s%s", "", "");
  json_t *effective = search_config_to_json(&cfg);
  if (!effective || json_object_set_new(s->options, "search", effective) != 0)
    return fail(err, API_ERR_INTERNAL, "", "out of memory%s%s", "", "");
  return 0;
}

void submission_clear(struct submission *s) {
  json_decref(s->options);
  s->options = NULL;
}
