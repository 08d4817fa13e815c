/* The submission options `opforge submit` and `opforge tune` share (see the header). */
#include "cli/submit_options.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/client.h"

/* Where each shared option goes in the submission, and the type of its value. */
enum value_type { V_STRING, V_INT, V_NUMBER };

struct field_map {
  int code;
  const char *option; /* "--steps", for messages */
  const char *object; /* the enclosing object ("budget"), or NULL for a top-level key */
  const char *key;
  enum value_type type;
};

static const struct field_map fields[] = {
    {SUBOPT_POLICY, "--policy", NULL, "policy", V_STRING},
    {SUBOPT_PROPOSER, "--proposer", NULL, "proposer", V_STRING},
    {SUBOPT_PRECISION, "--precision", NULL, "precision", V_STRING},
    {SUBOPT_MEMORY, "--memory", NULL, "memory", V_STRING},
    {SUBOPT_TRIALS, "--trials", NULL, "trials", V_INT},
    {SUBOPT_SEED, "--seed", NULL, "seed", V_INT},
    {SUBOPT_STEPS, "--steps", "budget", "steps", V_INT},
    {SUBOPT_SECONDS, "--seconds", "budget", "seconds", V_INT},
    {SUBOPT_LLM_USD, "--llm-usd", "budget", "llm_usd", V_NUMBER},
    {SUBOPT_LLM_TOKENS, "--llm-tokens", "budget", "llm_tokens", V_INT},
    {SUBOPT_STOP_AT_FLOOR, "--stop-at-floor", "budget", "stop_at_floor", V_NUMBER},
    {SUBOPT_ATOL, "--atol", "tolerance", "atol", V_NUMBER},
    {SUBOPT_RTOL, "--rtol", "tolerance", "rtol", V_NUMBER},
    {SUBOPT_LLM_MODEL, "--llm-model", "llm", "model", V_STRING},
    {SUBOPT_LLM_TEMPERATURE, "--llm-temperature", "llm", "temperature", V_NUMBER},
    {SUBOPT_LLM_MAX_TOKENS, "--llm-max-tokens", "llm", "max_tokens", V_INT},
};

void submit_options_usage(FILE *out) {
  fputs("  --policy P         single|refine|flat|htam|tree|htam+tree|best_of_n\n"
        "  --proposer P       builtin|llm|test\n"
        "  --steps N          step budget\n"
        "  --seconds N        time budget in seconds\n"
        "  --llm-usd X        LLM spending budget in US dollars\n"
        "  --llm-tokens N     LLM token budget\n"
        "  --stop-at-floor X  stop once the best is within X of the memory floor (0..1)\n"
        "  --precision P      fp32|tf32|bf16\n"
        "  --atol X, --rtol X correctness tolerances (default from the precision)\n"
        "  --trials N         correctness trials\n"
        "  --seed N           random seed\n"
        "  --memory NAME      the memory namespace the task reads and writes\n"
        "  --search K=V       one search setting (repeatable; V is JSON, else a string)\n"
        "  --search-file F    search settings from a JSON object (--search wins)\n"
        "  --llm-model M, --llm-temperature X, --llm-max-tokens N\n"
        "                     the LLM proposer's settings\n"
        "The server checks every value; a refusal prints its code, message and field.\n",
        out);
}

int submit_parse_number(const char *opt, const char *value, double *ret) {
  errno = 0;
  char *end = NULL;
  double v = strtod(value, &end);
  if (errno || end == value || *end || isspace((unsigned char)value[0]) || !isfinite(v)) {
    fprintf(stderr, "error: %s expects a number, got '%s'\n", opt, value);
    return -1;
  }
  *ret = v;
  return 0;
}

/* The value of arg as the JSON type f wants (a new reference), or NULL after printing
 * why. */
static json_t *typed_value(const struct field_map *f, const char *arg) {
  long long n = 0;
  double x = 0;
  json_t *v = NULL;
  if (f->type == V_STRING)
    v = json_string(arg);
  else if (f->type == V_INT && cli_parse_int(f->option, arg, &n) == 0)
    v = json_integer(n);
  else if (f->type == V_NUMBER && submit_parse_number(f->option, arg, &x) == 0)
    v = json_real(x);
  else
    return NULL;
  if (!v)
    fprintf(stderr, "error: %s: out of memory (or a value that is not UTF-8)\n", f->option);
  return v;
}

/* The object at key in parent, created when absent (borrowed); NULL when out of memory. */
static json_t *child_object(json_t *parent, const char *key) {
  json_t *child = json_object_get(parent, key);
  if (json_is_object(child))
    return child;
  if (cli_json_put(parent, key, json_object()) != 0)
    return NULL;
  return json_object_get(parent, key);
}

/* Sets object.key (object NULL: key) in o's fields to value (taken over). */
static int put_field(struct submit_options *o, const char *object, const char *key,
                     json_t *value) {
  if (!o->fields && !(o->fields = json_object())) {
    json_decref(value);
    return -1;
  }
  json_t *parent = object ? child_object(o->fields, object) : o->fields;
  if (!parent) {
    json_decref(value);
    return -1;
  }
  return cli_json_put(parent, key, value);
}

/* --search K=V: V as JSON when it parses as such (1.4, true, "x"), else as a string. */
static int apply_search(struct submit_options *o, const char *arg) {
  const char *eq = strchr(arg, '=');
  if (!eq || eq == arg) {
    fprintf(stderr, "error: --search expects KEY=VALUE, got '%s'\n", arg);
    return -1;
  }
  char *key = strndup(arg, (size_t)(eq - arg));
  json_t *value = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
  if (!value)
    value = json_string(eq + 1);
  int rc = key && value ? put_field(o, "search", key, value) : -1;
  if (!key || !value)
    json_decref(value);
  free(key);
  if (rc != 0)
    fprintf(stderr, "error: --search: out of memory (or a key or value that is not UTF-8)\n");
  return rc;
}

/* --search-file F: a JSON object of search settings. */
static int apply_search_file(struct submit_options *o, const char *path) {
  json_error_t jerr;
  json_t *doc = json_load_file(path, 0, &jerr);
  if (!doc) {
    fprintf(stderr, "error: --search-file %s: %s\n", path, jerr.text);
    return -1;
  }
  if (!json_is_object(doc)) {
    fprintf(stderr, "error: --search-file %s: must hold a JSON object of search settings\n",
            path);
    json_decref(doc);
    return -1;
  }
  json_decref(o->search_file);
  o->search_file = doc;
  return 0;
}

int submit_options_apply(struct submit_options *o, int code, const char *arg) {
  if (code == SUBOPT_SEARCH)
    return apply_search(o, arg);
  if (code == SUBOPT_SEARCH_FILE)
    return apply_search_file(o, arg);
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
    const struct field_map *f = &fields[i];
    if (f->code != code)
      continue;
    json_t *value = typed_value(f, arg);
    if (!value)
      return -1;
    if (put_field(o, f->object, f->key, value) != 0) {
      fprintf(stderr, "error: out of memory\n");
      return -1;
    }
    return 0;
  }
  return 1;
}

/* body.search: --search-file's keys, then --search's over them. 0, or -1 when out of
 * memory. */
static int put_search(const struct submit_options *o, json_t *body) {
  json_t *given = json_object_get(o->fields, "search");
  if (!o->search_file)
    return 0; /* --search alone came with the fields */
  json_t *search = json_deep_copy(o->search_file);
  if (!search || (given && json_object_update(search, given) != 0)) {
    json_decref(search);
    return -1;
  }
  return cli_json_put(body, "search", search);
}

json_t *submit_options_body(const struct submit_options *o, json_t *reference,
                            const char *name) {
  json_t *body = o->fields ? json_deep_copy(o->fields) : json_object();
  int rc = body ? 0 : -1;
  if (body)
    rc |= put_search(o, body);
  rc |= body ? cli_json_put(body, "reference", reference) : -1;
  rc |= body ? cli_json_put(body, "name", json_string(name)) : -1;
  if (!body)
    json_decref(reference);
  if (rc != 0) {
    fprintf(stderr, "error: out of memory (or a name that is not UTF-8)\n");
    json_decref(body);
    return NULL;
  }
  return body;
}

void submit_options_clear(struct submit_options *o) {
  json_decref(o->fields);
  json_decref(o->search_file);
  o->fields = NULL;
  o->search_file = NULL;
}

void submit_print_refusal(long status, const json_t *reply) {
  const json_t *err = json_object_get(reply, "error");
  const char *code = json_string_value(json_object_get(err, "code"));
  const char *message = json_string_value(json_object_get(err, "message"));
  const char *field = json_string_value(json_object_get(err, "field"));
  if (!code || !message) {
    cli_print_server_error(status, reply);
    return;
  }
  if (field)
    fprintf(stderr, "error: %s: %s (field %s)\n", code, message, field);
  else
    fprintf(stderr, "error: %s: %s\n", code, message);
}
