/* The LLM endpoint's settings (see settings.h): one table of options, each with its
 * variable and a setter that checks its value. */
#include "proposers/llm/settings.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Parses an unsigned decimal in [lo, hi]; -1 on anything else. */
static int parse_ulong(const char *v, unsigned long long lo, unsigned long long hi,
                       unsigned long long *ret) {
  if (!v || !*v || *v == '-' || *v == '+' || *v == ' ')
    return -1;
  errno = 0;
  char *end = NULL;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || !end || *end || x < lo || x > hi)
    return -1;
  *ret = x;
  return 0;
}

/* Parses a finite decimal number in [lo, hi]; -1 on anything else. */
static int parse_double(const char *v, double lo, double hi, double *ret) {
  if (!v || !*v || *v == ' ')
    return -1;
  errno = 0;
  char *end = NULL;
  double x = strtod(v, &end);
  if (errno || !end || *end || !isfinite(x) || x < lo || x > hi)
    return -1;
  *ret = x;
  return 0;
}

/* A model name: 1..128 printable characters without spaces, quotes or backslashes. */
static bool model_ok(const char *v, size_t len) {
  if (len < 1 || len >= LLM_MODEL_MAX)
    return false;
  for (size_t i = 0; i < len; i++)
    if (v[i] <= ' ' || v[i] > '~' || v[i] == '"' || v[i] == '\\' || v[i] == ',')
      return false;
  return true;
}

static int set_base_url(struct llm_settings *s, const char *v, char *err, size_t n) {
  size_t len = strlen(v);
  bool scheme = strncmp(v, "http://", 7) == 0 || strncmp(v, "https://", 8) == 0;
  bool clean = len < sizeof s->base_url;
  for (size_t i = 0; clean && i < len; i++)
    clean = v[i] > ' ' && v[i] <= '~' && v[i] != '?' && v[i] != '#' && v[i] != '@';
  while (len > 0 && v[len - 1] == '/')
    len--;
  if (!scheme || !clean || len <= (size_t)(v[4] == 's' ? 8 : 7)) {
    snprintf(err, n, "--llm-base-url: expected http(s)://HOST[:PORT][/PATH] without "
                     "credentials, query or spaces, at most %d characters", LLM_URL_MAX - 1);
    return -1;
  }
  memcpy(s->base_url, v, len);
  s->base_url[len] = '\0';
  return 0;
}

static int set_model(struct llm_settings *s, const char *v, char *err, size_t n) {
  if (!model_ok(v, strlen(v))) {
    snprintf(err, n, "--llm-model: expected a model name of 1 to 128 characters without "
                     "spaces, commas or quotes");
    return -1;
  }
  snprintf(s->model, sizeof s->model, "%s", v);
  return 0;
}

static int set_models(struct llm_settings *s, const char *v, char *err, size_t n) {
  size_t len = strlen(v);
  bool ok = len < sizeof s->models;
  if (ok && strcmp(v, "*") != 0) {
    for (const char *p = v; ok && *p;) {
      size_t one = strcspn(p, ",");
      ok = model_ok(p, one);
      p += one + (p[one] == ',');
      ok = ok && !(p[-1] == ',' && *p == '\0');
    }
  }
  if (!ok || len == 0) {
    snprintf(err, n, "--llm-models: expected '*' or a comma-separated list of model names, "
                     "at most %d characters", LLM_MODELS_MAX - 1);
    return -1;
  }
  memcpy(s->models, v, len + 1);
  return 0;
}

/* Reads the key: the first non-empty line of the file, which must be printable ASCII.
 * Messages name the file, never its content. */
static int set_key_file(struct llm_settings *s, const char *v, char *err, size_t n) {
  FILE *f = *v ? fopen(v, "r") : NULL;
  if (!f) {
    snprintf(err, n, "--llm-key-file: cannot open '%.300s': %s", v,
             *v ? strerror(errno) : "empty path");
    return -1;
  }
  char line[LLM_KEY_MAX + 2];
  bool found = false, ok = true;
  while (!found && fgets(line, sizeof line, f)) {
    size_t len = strcspn(line, "\r\n");
    if (line[len] == '\0' && !feof(f))
      ok = false;  /* a line longer than the buffer */
    line[len] = '\0';
    while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\t'))
      line[--len] = '\0';
    char *start = line + strspn(line, " \t");
    len = strlen(start);
    if (len == 0 || start[0] == '#')
      continue;
    found = true;
    for (size_t i = 0; ok && i < len; i++)
      ok = start[i] > ' ' && start[i] <= '~';
    if (ok && len < sizeof s->key)
      memcpy(s->key, start, len + 1);
    else
      ok = false;
  }
  fclose(f);
  memset(line, 0, sizeof line);
  if (!found || !ok) {
    snprintf(err, n, "--llm-key-file: '%.300s' must hold the key on its first non-empty "
                     "line: 1 to %d printable characters without spaces", v, LLM_KEY_MAX - 1);
    return -1;
  }
  snprintf(s->key_file, sizeof s->key_file, "%.*s", (int)sizeof s->key_file - 1, v);
  return 0;
}

/* Declares a setter for a bounded unsigned field. */
#define LLM_UINT(fn, field, opt, lo, hi)                                                     \
  static int fn(struct llm_settings *s, const char *v, char *err, size_t n) {              \
    unsigned long long x;                                                                  \
    if (parse_ulong(v, lo, hi, &x) != 0) {                                                 \
      snprintf(err, n, "%s: expected an integer in [%llu, %llu], got '%.64s'", opt,         \
               (unsigned long long)(lo), (unsigned long long)(hi), v);                      \
      return -1;                                                                           \
    }                                                                                      \
    s->field = x;                                                                          \
    return 0;                                                                              \
  }

/* Declares a setter for a bounded number field. */
#define LLM_DOUBLE(fn, field, opt, lo, hi)                                                   \
  static int fn(struct llm_settings *s, const char *v, char *err, size_t n) {              \
    if (parse_double(v, lo, hi, &s->field) != 0) {                                         \
      snprintf(err, n, "%s: expected a number in [%g, %g], got '%.64s'", opt, (double)(lo), \
               (double)(hi), v);                                                            \
      return -1;                                                                           \
    }                                                                                      \
    return 0;                                                                              \
  }

LLM_DOUBLE(set_price_in, price_in, "--llm-price-in", 0, 10000)
LLM_DOUBLE(set_price_out, price_out, "--llm-price-out", 0, 10000)
LLM_DOUBLE(set_temperature, temperature, "--llm-temperature", 0, 2)
LLM_UINT(set_max_tokens, max_tokens, "--llm-max-tokens", 16, 131072)
LLM_UINT(set_connect_timeout, connect_timeout_s, "--llm-connect-timeout", 1, 300)
LLM_UINT(set_timeout, timeout_s, "--llm-timeout", 1, 3600)
LLM_UINT(set_max_response, max_response_bytes, "--llm-max-response", 4096, 64ull << 20)
LLM_UINT(set_retries, retries, "--llm-retries", 0, 10)
LLM_UINT(set_backoff, backoff_ms, "--llm-backoff-ms", 1, 60000)
LLM_UINT(set_max_backoff, max_backoff_ms, "--llm-max-backoff-ms", 1, 600000)
LLM_UINT(set_max_wait, max_wait_s, "--llm-max-wait", 0, 3600)
LLM_UINT(set_concurrency, concurrency, "--llm-concurrency", 1, 256)

const struct llm_option llm_options[] = {
  {"--llm-base-url", "OPFORGE_LLM_BASE_URL",
   "OpenAI-compatible endpoint, e.g. https://api.deepseek.com/v1 (none)", set_base_url},
  {"--llm-model", "OPFORGE_LLM_MODEL", "model name sent with every request (none)", set_model},
  {"--llm-key-file", "OPFORGE_LLM_KEY_FILE",
   "file whose first line is the API key (else " LLM_API_KEY_ENV "; none for local servers)",
   set_key_file},
  {"--llm-models", "OPFORGE_LLM_MODELS",
   "other models a task may name in llm.model, comma-separated, or * (none)", set_models},
  {"--llm-price-in", "OPFORGE_LLM_PRICE_IN", "USD per million prompt tokens (0)", set_price_in},
  {"--llm-price-out", "OPFORGE_LLM_PRICE_OUT", "USD per million completion tokens (0)",
   set_price_out},
  {"--llm-temperature", "OPFORGE_LLM_TEMPERATURE", "default sampling temperature (1.0, as the papers' public code samples)",
   set_temperature},
  {"--llm-max-tokens", "OPFORGE_LLM_MAX_TOKENS", "default completion token cap (16384)",
   set_max_tokens},
  {"--llm-connect-timeout", "OPFORGE_LLM_CONNECT_TIMEOUT", "seconds to connect (10)",
   set_connect_timeout},
  {"--llm-timeout", "OPFORGE_LLM_TIMEOUT", "seconds for one whole request (300)", set_timeout},
  {"--llm-max-response", "OPFORGE_LLM_MAX_RESPONSE",
   "bytes of one answer; past it the request is aborted (1048576)", set_max_response},
  {"--llm-retries", "OPFORGE_LLM_RETRIES", "retries on 429, 5xx and transport errors (5)",
   set_retries},
  {"--llm-backoff-ms", "OPFORGE_LLM_BACKOFF_MS",
   "first retry's base delay, doubled each retry, with jitter (1000)", set_backoff},
  {"--llm-max-backoff-ms", "OPFORGE_LLM_MAX_BACKOFF_MS", "cap of one retry delay (30000)",
   set_max_backoff},
  {"--llm-max-wait", "OPFORGE_LLM_MAX_WAIT",
   "seconds of Retry-After worth waiting for; longer fails the step (120)", set_max_wait},
  {"--llm-concurrency", "OPFORGE_LLM_CONCURRENCY",
   "requests in flight to the endpoint, all workers together (4)", set_concurrency},
  {NULL, NULL, NULL, NULL},
};

void llm_settings_defaults(struct llm_settings *s) {
  memset(s, 0, sizeof *s);
  /* The papers' sampling (AdaExplore's public code): a low temperature would undo the
   * diversity that the tree's large steps and best-of-N rely on. */
  s->temperature = 1.0;
  s->max_tokens = 16384;
  s->connect_timeout_s = 10;
  s->timeout_s = 300;
  s->max_response_bytes = 1u << 20;
  s->retries = 5;
  s->backoff_ms = 1000;
  s->max_backoff_ms = 30000;
  s->max_wait_s = 120;
  s->concurrency = 4;
}

const struct llm_option *llm_option_find(const char *name, size_t len) {
  for (const struct llm_option *o = llm_options; o->name; o++)
    if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
      return o;
  return NULL;
}

int llm_settings_finish(struct llm_settings *s, char *(*getenv_fn)(const char *), char *err,
                        size_t errlen) {
  const char *key = !s->key[0] && getenv_fn ? getenv_fn(LLM_API_KEY_ENV) : NULL;
  if (key && *key) {
    size_t len = strlen(key);
    bool ok = len < sizeof s->key;
    for (size_t i = 0; ok && i < len; i++)
      ok = key[i] > ' ' && key[i] <= '~';
    if (!ok) {
      snprintf(err, errlen, "%s: the key must be 1 to %d printable characters without spaces",
               LLM_API_KEY_ENV, LLM_KEY_MAX - 1);
      return -1;
    }
    memcpy(s->key, key, len + 1);
  }
  if (s->base_url[0] && !s->model[0]) {
    snprintf(err, errlen, "--llm-model: required with --llm-base-url");
    return -1;
  }
  return 0;
}

int llm_settings_from_env(char *(*getenv_fn)(const char *), struct llm_settings *ret,
                          char *err, size_t errlen) {
  struct llm_settings *s = malloc(sizeof *s);
  if (!s) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  llm_settings_defaults(s);
  int rc = 0;
  for (const struct llm_option *o = llm_options; rc == 0 && o->name; o++) {
    const char *v = getenv_fn ? getenv_fn(o->env) : NULL;
    if (v && o->set(s, v, err, errlen) != 0) {
      char inner[400];
      snprintf(inner, sizeof inner, "%s", err);
      snprintf(err, errlen, "%s (from %s)", inner, o->env);
      rc = -1;
    }
  }
  if (rc == 0)
    rc = llm_settings_finish(s, getenv_fn, err, errlen);
  if (rc == 0)
    *ret = *s;
  memset(s, 0, sizeof *s);
  free(s);
  return rc;
}

bool llm_settings_model_allowed(const struct llm_settings *s, const char *model) {
  if (!model || strcmp(model, s->model) == 0 || strcmp(s->models, "*") == 0)
    return true;
  size_t len = strlen(model);
  for (const char *p = s->models; *p;) {
    size_t one = strcspn(p, ",");
    if (one == len && strncmp(p, model, len) == 0)
      return true;
    p += one + (p[one] == ',');
  }
  return false;
}

void llm_settings_usage(FILE *out) {
  for (const struct llm_option *o = llm_options; o->name; o++)
    fprintf(out, "  %-26s %-32s %s\n", o->name, o->env, o->help);
  fprintf(out, "  %-26s %-32s %s\n", "", LLM_API_KEY_ENV,
          "the API key itself, when no key file is given");
}
