/* The LLM endpoint's settings: read once at start-up from --llm-* options and
 * OPFORGE_LLM_* variables (by `opforge serve` and `opforge llm check`) into one struct. */
#ifndef OPFORGE_LLM_SETTINGS_H
#define OPFORGE_LLM_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define LLM_URL_MAX 512
#define LLM_MODEL_MAX 129     /* a model name is 1..128 characters */
#define LLM_KEY_MAX 512
#define LLM_MODELS_MAX 1024   /* the allow-list of per-task models, comma-separated */

/* Plain data, no ownership. key is a secret: it is sent in the Authorization header and
 * nowhere else; nothing logs, prints, stores or returns it. */
struct llm_settings {
  char base_url[LLM_URL_MAX];  /* http(s)://host[:port]/path, no trailing '/'; empty:
                                  no endpoint is configured */
  char model[LLM_MODEL_MAX];   /* the default model */
  char key[LLM_KEY_MAX];       /* empty: no Authorization header (local servers) */
  char key_file[LLM_URL_MAX];  /* --llm-key-file's path (the sandbox masks it); "" none */
  char models[LLM_MODELS_MAX]; /* models a task may name besides the default; "*" any */
  double price_in;             /* US dollars per million prompt tokens */
  double price_out;            /* US dollars per million completion tokens */
  double temperature;          /* the default; a task may override it */
  int max_tokens;              /* the default completion cap; a task may override it */
  unsigned connect_timeout_s;
  unsigned timeout_s;          /* one whole request, answer included */
  size_t max_response_bytes;   /* an answer past this is aborted */
  unsigned retries;            /* on 429, 5xx and transport errors */
  unsigned backoff_ms;         /* the first retry's base delay; doubled each retry */
  unsigned max_backoff_ms;     /* the cap of one backoff delay */
  unsigned max_wait_s;         /* a Retry-After longer than this is not waited for */
  unsigned concurrency;        /* requests in flight per endpoint, all workers together */
};

/* One option: --name, its variable, its help, and its setter, which returns 0 or -1
 * with a message naming the option in err. */
struct llm_option {
  const char *name;
  const char *env;
  const char *help;
  int (*set)(struct llm_settings *s, const char *value, char *err, size_t errlen);
};

/* The options, ended by an entry whose name is NULL. */
extern const struct llm_option llm_options[];

/* The variable holding the key itself (a key file, when given, wins). */
#define LLM_API_KEY_ENV "OPFORGE_LLM_API_KEY"

/* Sets every field to its default (no endpoint). */
void llm_settings_defaults(struct llm_settings *s);

/* The option called name (len bytes of it; "--llm-model"), or NULL. */
const struct llm_option *llm_option_find(const char *name, size_t len);

/* Completes settings after every option was applied: takes the key from
 * OPFORGE_LLM_API_KEY (via getenv_fn, may be NULL) when no key file gave one, and checks
 * what the options cannot check alone (a base URL needs a model). Returns 0, or -1 with
 * the reason in err. */
int llm_settings_finish(struct llm_settings *s, char *(*getenv_fn)(const char *), char *err,
                        size_t errlen);

/* Defaults, then every OPFORGE_LLM_* variable (via getenv_fn), then llm_settings_finish.
 * ret is written only on success; on failure err names the variable. */
int llm_settings_from_env(char *(*getenv_fn)(const char *), struct llm_settings *ret,
                          char *err, size_t errlen);

/* Whether a task may name model: the default, one listed in models, or any with "*". */
bool llm_settings_model_allowed(const struct llm_settings *s, const char *model);

/* Prints the options with their variables (for --help). */
void llm_settings_usage(FILE *out);

#endif
