/* Server configuration: read once at start-up from options and OPFORGE_* variables. */
#include "server/config.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "store/conninfo.h"
#include "store/servers.h"

/* One option: its --name, its variable, and the parser that stores its value. A
 * repeatable option also has clear, which empties its list (options replace the list
 * that its variable gave). */
struct option_spec {
  const char *name;
  const char *env;
  const char *help;
  int (*parse)(struct opforge_config *cfg, const char *value, char *err, size_t errlen);
  void (*clear)(struct opforge_config *cfg);
};

/* Parses an unsigned decimal in [lo, hi]; -1 on anything else. */
static int parse_ulong(const char *value, unsigned long long lo, unsigned long long hi,
                       unsigned long long *ret) {
  if (!value || !*value || *value == '-' || *value == '+')
    return -1;
  errno = 0;
  char *end = NULL;
  unsigned long long v = strtoull(value, &end, 10);
  if (errno || !end || *end || v < lo || v > hi)
    return -1;
  *ret = v;
  return 0;
}

static int copy_str(char *dst, size_t cap, const char *value) {
  size_t len = strlen(value);
  if (len == 0 || len >= cap)
    return -1;
  memcpy(dst, value, len + 1);
  return 0;
}

static int parse_listen(struct opforge_config *cfg, const char *v, char *err, size_t n) {
  const char *colon = strrchr(v, ':');
  unsigned long long port;
  if (!colon || colon == v || (size_t)(colon - v) >= sizeof cfg->listen_host ||
      parse_ulong(colon + 1, 0, 65535, &port) != 0) {
    snprintf(err, n, "--listen: expected HOST:PORT, got '%s'", v);
    return -1;
  }
  memcpy(cfg->listen_host, v, (size_t)(colon - v));
  cfg->listen_host[colon - v] = '\0';
  cfg->listen_port = (uint16_t)port;
  return 0;
}

static int parse_data(struct opforge_config *cfg, const char *v, char *err, size_t n) {
  if (copy_str(cfg->data_dir, sizeof cfg->data_dir, v) != 0) {
    snprintf(err, n, "--data: expected a directory path");
    return -1;
  }
  return 0;
}

static int parse_store(struct opforge_config *cfg, const char *v, char *err, size_t n) {
  if (strcmp(v, "sqlite") == 0 || strncmp(v, "sqlite:", 7) == 0) {
    if (v[6] == ':' && v[7] && copy_str(cfg->data_dir, sizeof cfg->data_dir, v + 7) != 0) {
      snprintf(err, n, "--store: sqlite:DIR names the data directory; DIR is too long");
      return -1;
    }
    cfg->store[0] = '\0';
    return 0;
  }
  if (!store_location_is_pg(v) || copy_str(cfg->store, sizeof cfg->store, v) != 0) {
    snprintf(err, n, "--store: expected sqlite, sqlite:DIR or a postgresql:// URL (at most "
             "4095 bytes)");
    return -1;
  }
  return 0;
}

/* The first line of the file, without its line end; never echoed in messages. */
static int parse_store_password_file(struct opforge_config *cfg, const char *v, char *err,
                                     size_t n) {
  FILE *f = fopen(v, "r");
  if (!f) {
    snprintf(err, n, "--store-password-file: cannot open '%s': %s", v, strerror(errno));
    return -1;
  }
  char *line = fgets(cfg->store_password, sizeof cfg->store_password, f);
  fclose(f);
  size_t len = line ? strcspn(line, "\r\n") : 0;
  if (!line || len == 0 || len == sizeof cfg->store_password - 1) {
    memset(cfg->store_password, 0, sizeof cfg->store_password);
    snprintf(err, n, "--store-password-file: '%s' must hold the password on its first line "
             "(1..1022 bytes)", v);
    return -1;
  }
  cfg->store_password[len] = '\0';
  return 0;
}

static int parse_gpus(struct opforge_config *cfg, const char *v, char *err, size_t n) {
  if (strcmp(v, "all") == 0) {
    cfg->gpu_mode = GPUS_ALL;
    return 0;
  }
  if (strcmp(v, "none") == 0) {
    cfg->gpu_mode = GPUS_NONE;
    return 0;
  }
  cfg->gpu_mode = GPUS_LIST;
  cfg->n_gpu_list = 0;
  const char *p = v;
  while (*p) {
    char *end = NULL;
    errno = 0;
    long idx = strtol(p, &end, 10);
    if (errno || end == p || idx < 0 || idx >= 1024 || (*end && *end != ',') ||
        cfg->n_gpu_list >= CONFIG_MAX_GPUS) {
      snprintf(err, n, "--gpus: expected all, none or a list like 0,1; got '%s'", v);
      return -1;
    }
    cfg->gpu_list[cfg->n_gpu_list++] = (int)idx;
    if (*end == ',' && end[1] == '\0') {
      snprintf(err, n, "--gpus: expected all, none or a list like 0,1; got '%s'", v);
      return -1;
    }
    p = *end ? end + 1 : end;
  }
  if (cfg->n_gpu_list == 0) {
    snprintf(err, n, "--gpus: empty list");
    return -1;
  }
  return 0;
}

/* Reads one token per non-empty line; tokens are never echoed in messages. */
static int parse_token_file(struct opforge_config *cfg, const char *v, char *err, size_t n) {
  if (copy_str(cfg->token_file, sizeof cfg->token_file, v) != 0) {
    snprintf(err, n, "--token-file: expected a file path");
    return -1;
  }
  FILE *f = fopen(v, "r");
  if (!f) {
    snprintf(err, n, "--token-file: cannot open '%s': %s", v, strerror(errno));
    return -1;
  }
  char line[256];
  cfg->n_tokens = 0;
  while (fgets(line, sizeof line, f)) {
    size_t len = strcspn(line, "\r\n");
    line[len] = '\0';
    if (len == 0 || line[0] == '#')
      continue;
    if (len < 16 || len >= sizeof cfg->tokens[0] || cfg->n_tokens >= CONFIG_MAX_TOKENS) {
      fclose(f);
      snprintf(err, n, "--token-file: each token must be 16..127 characters, at most %d tokens",
               CONFIG_MAX_TOKENS);
      return -1;
    }
    memcpy(cfg->tokens[cfg->n_tokens++], line, len + 1);
  }
  fclose(f);
  if (cfg->n_tokens == 0) {
    snprintf(err, n, "--token-file: '%s' holds no token", v);
    return -1;
  }
  return 0;
}

/* Declares a parser for an unsigned field with bounds. */
#define UINT_OPTION(fn, field, opt, lo, hi)                                             \
  static int fn(struct opforge_config *cfg, const char *v, char *err, size_t n) {     \
    unsigned long long x;                                                             \
    if (parse_ulong(v, lo, hi, &x) != 0) {                                            \
      snprintf(err, n, "%s: expected an integer in [%llu, %llu], got '%s'", opt,       \
               (unsigned long long)(lo), (unsigned long long)(hi), v);                \
      return -1;                                                                      \
    }                                                                                 \
    cfg->field = x;                                                                   \
    return 0;                                                                         \
  }

UINT_OPTION(parse_workers, workers_per_gpu, "--workers-per-gpu", 1, 16)
UINT_OPTION(parse_max_body, max_body_bytes, "--max-body", 1024, 64ull << 20)
UINT_OPTION(parse_max_url, max_url_bytes, "--max-url", 256, 1u << 20)
UINT_OPTION(parse_threads, threads, "--threads", 1, 256)
UINT_OPTION(parse_max_conns, max_connections, "--max-connections", 16, 65536)
UINT_OPTION(parse_max_conns_ip, max_connections_per_ip, "--max-connections-per-ip", 1, 65536)
UINT_OPTION(parse_conn_timeout, connection_timeout_s, "--connection-timeout", 1, 3600)
UINT_OPTION(parse_header_deadline, header_deadline_s, "--header-deadline", 1, 3600)
UINT_OPTION(parse_body_deadline, body_deadline_s, "--body-deadline", 1, 3600)
UINT_OPTION(parse_shutdown_grace, shutdown_grace_s, "--shutdown-grace", 0, 3600)
UINT_OPTION(parse_lease, lease_s, "--lease-seconds", 3, 3600)
UINT_OPTION(parse_keepalive, sse_keepalive_s, "--sse-keepalive", 1, 3600)
UINT_OPTION(parse_eval_deadline, evaluate_deadline_s, "--evaluate-deadline", 1, 3600)
UINT_OPTION(parse_profile_deadline, profile_deadline_s, "--profile-deadline", 1, 86400)

/* Declares a parser for a path field. */
#define PATH_OPTION(fn, field, opt)                                                   \
  static int fn(struct opforge_config *cfg, const char *v, char *err, size_t n) {     \
    if (copy_str(cfg->field, sizeof cfg->field, v) != 0) {                            \
      snprintf(err, n, "%s: expected a path", opt);                                   \
      return -1;                                                                      \
    }                                                                                 \
    return 0;                                                                         \
  }

PATH_OPTION(parse_gpu_lib, gpu_lib, "--gpu-lib")
PATH_OPTION(parse_fixtures, fixtures, "--fixtures")

PATH_OPTION(parse_python, python, "--python")
PATH_OPTION(parse_evaluator, evaluator, "--evaluator")

/* --search-config FILE: a JSON object of search settings (engine/search_config.c), each
 * optional, applied over the defaults; read and checked once, here. */
static int parse_search_config(struct opforge_config *cfg, const char *v, char *err, size_t n) {
  if (copy_str(cfg->search_config, sizeof cfg->search_config, v) != 0) {
    snprintf(err, n, "--search-config: expected a file path");
    return -1;
  }
  json_error_t jerr;
  json_t *doc = json_load_file(v, JSON_REJECT_DUPLICATES, &jerr);
  if (!doc) {
    snprintf(err, n, "--search-config: %s: %s (line %d)", v, jerr.text, jerr.line);
    return -1;
  }
  struct search_config search;
  struct search_config_error why;
  search_config_defaults(&search);
  int rc = search_config_apply(&search, doc, &why);
  json_decref(doc);
  if (rc != 0) {
    snprintf(err, n, "--search-config: %s: %s", v, why.message);
    return -1;
  }
  cfg->search = search;
  return 0;
}

/* Appends the entries of value (separated by commas or spaces) to list, each checked by
 * valid (which lower-cases it in place) and at most CONFIG_MAX_NAMES in all. */
static int parse_name_list(char list[][CONFIG_NAME_MAX], int *n, const char *value,
                           bool (*valid)(char *entry), const char *opt, const char *what,
                           char *err, size_t errlen) {
  const char *p = value;
  bool any = false;
  while (*p) {
    size_t skip = strspn(p, ", \t"), len;
    p += skip;
    len = strcspn(p, ", \t");
    if (len == 0)
      break;
    if (*n >= CONFIG_MAX_NAMES || len >= CONFIG_NAME_MAX) {
      snprintf(err, errlen, "%s: at most %d entries of at most %d bytes", opt,
               CONFIG_MAX_NAMES, CONFIG_NAME_MAX - 1);
      return -1;
    }
    char entry[CONFIG_NAME_MAX];
    memcpy(entry, p, len);
    entry[len] = '\0';
    if (!valid(entry)) {
      snprintf(err, errlen, "%s: expected %s, got '%s'", opt, what, entry);
      return -1;
    }
    memcpy(list[(*n)++], entry, len + 1);
    p += len;
    any = true;
  }
  if (!any) {
    snprintf(err, errlen, "%s: expected %s", opt, what);
    return -1;
  }
  return 0;
}

/* Lower-cases s in place; true when every byte is in allowed (after lower-casing). */
static bool lower_and_check(char *s, const char *allowed) {
  for (char *c = s; *c; c++) {
    if (*c >= 'A' && *c <= 'Z')
      *c = (char)(*c - 'A' + 'a');
    if (!strchr(allowed, *c))
      return false;
  }
  return *s != '\0';
}

#define HOST_CHARS "abcdefghijklmnopqrstuvwxyz0123456789.-_"

/* A host name or IP literal as it appears in a Host header, without a port. */
static bool valid_host(char *s) {
  if (s[0] == '[')
    return lower_and_check(s, "[]:abcdef0123456789.") && s[strlen(s) - 1] == ']';
  return lower_and_check(s, HOST_CHARS);
}

/* An origin as browsers send it: http or https, "://", a host, an optional port. */
static bool valid_origin(char *s) {
  if (!lower_and_check(s, HOST_CHARS ":/[]"))
    return false;
  const char *host = strncmp(s, "http://", 7) == 0    ? s + 7
                     : strncmp(s, "https://", 8) == 0 ? s + 8
                                                      : NULL;
  if (!host || !*host || strchr(host, '/'))
    return false;
  const char *colon = host[0] == '[' ? strstr(host, "]:") : strchr(host, ':');
  if (colon && host[0] == '[')
    colon++;
  if (colon) {
    unsigned long long port;
    if (colon == host || parse_ulong(colon + 1, 1, 65535, &port) != 0)
      return false;
  }
  return true;
}

static int parse_cors_origin(struct opforge_config *cfg, const char *v, char *err, size_t n) {
  return parse_name_list(cfg->cors_origins, &cfg->n_cors_origins, v, valid_origin,
                         "--cors-origin", "an origin like https://app.example:8443", err, n);
}

static int parse_allow_host(struct opforge_config *cfg, const char *v, char *err, size_t n) {
  return parse_name_list(cfg->allow_hosts, &cfg->n_allow_hosts, v, valid_host, "--allow-host",
                         "a host name without a port, like opforge.internal", err, n);
}

static void clear_cors_origins(struct opforge_config *cfg) {
  cfg->n_cors_origins = 0;
}

static void clear_allow_hosts(struct opforge_config *cfg) {
  cfg->n_allow_hosts = 0;
}

static bool valid_device_class(char *s) {
  return store_device_class_normalize(s);
}

static int parse_device_class(struct opforge_config *cfg, const char *v, char *err, size_t n) {
  char names[CONFIG_MAX_NAMES][CONFIG_NAME_MAX];
  int count = 0;
  if (parse_name_list(names, &count, v, valid_device_class, "--device-class",
                      "a device class like H200 (letters, digits, '.', '_', '-'; 1..32)", err,
                      n) != 0)
    return -1;
  for (int i = 0; i < count && cfg->n_device_classes < 16; i++)
    snprintf(cfg->device_classes[cfg->n_device_classes++], sizeof cfg->device_classes[0], "%.32s",
             names[i]);
  return 0;
}

static void clear_device_classes(struct opforge_config *cfg) {
  cfg->n_device_classes = 0;
}

static const struct option_spec options[] = {
  {"--listen", "OPFORGE_LISTEN", "HOST:PORT to listen on (127.0.0.1:8080)", parse_listen, NULL},
  {"--data", "OPFORGE_DATA", "directory for the SQLite file and artifacts (./var)", parse_data, NULL},
  {"--store", "OPFORGE_STORE",
   "where tasks and memory live: sqlite (a file in --data) or a postgresql:// URL that "
   "several servers share (sqlite)", parse_store, NULL},
  {"--store-password-file", "OPFORGE_STORE_PASSWORD_FILE",
   "file whose first line is the PostgreSQL password (else the URL's, or libpq's PGPASSFILE)",
   parse_store_password_file, NULL},
  {"--device-class", "OPFORGE_DEVICE_CLASS",
   "a device class this server's GPUs serve, like H200 (repeatable; tasks naming another "
   "are left to other servers; default: from the GPUs' names)", parse_device_class,
   clear_device_classes},
  {"--gpus", "OPFORGE_GPUS", "GPUs to use: all, none or a list like 0,1 (all)", parse_gpus, NULL},
  {"--workers-per-gpu", "OPFORGE_WORKERS_PER_GPU",
   "worker slots per GPU (1); they take turns on the GPU, so timings stay exclusive while "
   "compiles and torch.compile runs overlap", parse_workers, NULL},
  {"--token-file", "OPFORGE_TOKEN_FILE", "file of bearer tokens, one per line (none: open)",
   parse_token_file, NULL},
  {"--max-body", "OPFORGE_MAX_BODY", "request body cap in bytes (1048576)", parse_max_body, NULL},
  {"--max-url", "OPFORGE_MAX_URL", "request URL cap in bytes (8192)", parse_max_url, NULL},
  {"--threads", "OPFORGE_THREADS", "HTTP thread pool size (8)", parse_threads, NULL},
  {"--max-connections", "OPFORGE_MAX_CONNECTIONS", "open connections cap (1024)",
   parse_max_conns, NULL},
  {"--max-connections-per-ip", "OPFORGE_MAX_CONNECTIONS_PER_IP",
   "open connections cap per client address (64)", parse_max_conns_ip, NULL},
  {"--connection-timeout", "OPFORGE_CONNECTION_TIMEOUT",
   "seconds an idle connection is kept (30)", parse_conn_timeout, NULL},
  {"--header-deadline", "OPFORGE_HEADER_DEADLINE",
   "seconds for a request line and headers to arrive, counted from the connection's "
   "start or the previous response (10)", parse_header_deadline, NULL},
  {"--body-deadline", "OPFORGE_BODY_DEADLINE",
   "seconds for a request body to arrive, counted from the end of its head (30)",
   parse_body_deadline, NULL},
  {"--shutdown-grace", "OPFORGE_SHUTDOWN_GRACE",
   "seconds that evaluations in flight get on SIGTERM before their evaluators are stopped; "
   "their steps run again after a restart (5)", parse_shutdown_grace, NULL},
  {"--lease-seconds", "OPFORGE_LEASE_SECONDS",
   "a claim's lease: renewed every third of it while its task runs; a task whose claim "
   "ran out (its server died, or its release failed) is taken over (60)", parse_lease,
   NULL},
  {"--cors-origin", "OPFORGE_CORS_ORIGIN",
   "an origin allowed to call the API from a browser (repeatable; none)", parse_cors_origin,
   clear_cors_origins},
  {"--allow-host", "OPFORGE_ALLOW_HOST",
   "a Host name accepted besides the listen address (repeatable; none)", parse_allow_host,
   clear_allow_hosts},
  {"--sse-keepalive", "OPFORGE_SSE_KEEPALIVE", "seconds between SSE keep-alive comments (15)",
   parse_keepalive, NULL},
  {"--python", "OPFORGE_PYTHON", "python with PyTorch for the evaluator", parse_python, NULL},
  {"--evaluator", "OPFORGE_EVALUATOR", "the evaluator entry script (gpu/evaluator/main.py)", parse_evaluator, NULL},
  {"--gpu-lib", "OPFORGE_GPU_LIB", "path of libopforge_gpu.so", parse_gpu_lib, NULL},
  {"--fixtures", "OPFORGE_FIXTURES", "fixture candidates for the test proposer (DIR/<task>/*.json)",
   parse_fixtures, NULL},
  {"--evaluate-deadline", "OPFORGE_EVALUATE_DEADLINE",
   "seconds for compiling and evaluating one candidate (60; times --workers-per-gpu, since "
   "a slot may first wait for the GPU work of the others)", parse_eval_deadline, NULL},
  {"--profile-deadline", "OPFORGE_PROFILE_DEADLINE",
   "seconds for profiling a task, torch.compile included (600; times --workers-per-gpu)",
   parse_profile_deadline, NULL},
  {"--search-config", "OPFORGE_SEARCH_CONFIG",
   "JSON file of search settings for tasks that do not set them (the defaults)",
   parse_search_config, NULL},
  {NULL, NULL, NULL, NULL, NULL},
};

void config_defaults(struct opforge_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  llm_settings_defaults(&cfg->llm);
  snprintf(cfg->listen_host, sizeof cfg->listen_host, "127.0.0.1");
  cfg->listen_port = 8080;
  snprintf(cfg->data_dir, sizeof cfg->data_dir, "./var");
  cfg->gpu_mode = GPUS_ALL;
  cfg->workers_per_gpu = 1;
  cfg->max_body_bytes = 1u << 20;
  cfg->max_url_bytes = 8192;
  cfg->threads = 8;
  cfg->max_connections = 1024;
  cfg->max_connections_per_ip = 64;
  cfg->connection_timeout_s = 30;
  cfg->header_deadline_s = 10;
  cfg->body_deadline_s = 30;
  cfg->shutdown_grace_s = 5;
  cfg->lease_s = 60;
  cfg->sse_keepalive_s = 15;
  cfg->evaluate_deadline_s = 60;
  cfg->profile_deadline_s = 600;
  search_config_defaults(&cfg->search);
  sandbox_settings_defaults(&cfg->sandbox);
}

static const struct option_spec *find_option(const char *name, size_t len) {
  for (const struct option_spec *o = options; o->name; o++)
    if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
      return o;
  return NULL;
}

/* Applies --name VALUE and --name=VALUE forms from argv; returns -1 on error. */
static int apply_argv(struct opforge_config *cfg, int argc, char **argv, char *err,
                      size_t errlen) {
  const struct option_spec *cleared[8];
  size_t n_cleared = 0;
  const struct sandbox_option *sandbox_cleared[8];
  size_t n_sandbox_cleared = 0;
  for (int i = 0; i < argc; i++) {
    const char *arg = argv[i];
    const char *eq = strchr(arg, '=');
    size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    const struct option_spec *o = strncmp(arg, "--", 2) == 0 ? find_option(arg, name_len) : NULL;
    const struct llm_option *lo = o ? NULL : llm_option_find(arg, name_len);
    const struct sandbox_option *so =
        o || lo ? NULL : sandbox_option_find(arg, name_len);
    if (so) {
      const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
      if (!value) {
        snprintf(err, errlen, "%s: missing value", so->name);
        return -1;
      }
      bool seen = false;
      for (size_t k = 0; k < n_sandbox_cleared; k++)
        seen |= sandbox_cleared[k] == so;
      if (so->clear && !seen && n_sandbox_cleared < 8) {
        so->clear(&cfg->sandbox); /* the first use replaces what the variable gave */
        sandbox_cleared[n_sandbox_cleared++] = so;
      }
      if (so->set(&cfg->sandbox, value, err, errlen) != 0)
        return -1;
      continue;
    }
    if (lo) {
      const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
      if (!value) {
        snprintf(err, errlen, "%s: missing value", lo->name);
        return -1;
      }
      if (lo->set(&cfg->llm, value, err, errlen) != 0)
        return -1;
      continue;
    }
    if (!o) {
      snprintf(err, errlen, "%.*s: unknown option (see opforge serve --help)", (int)name_len,
               arg);
      return -1;
    }
    const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (!value) {
      snprintf(err, errlen, "%s: missing value", o->name);
      return -1;
    }
    bool seen = false;
    for (size_t k = 0; k < n_cleared; k++)
      seen |= cleared[k] == o;
    if (o->clear && !seen && n_cleared < sizeof cleared / sizeof cleared[0]) {
      o->clear(cfg); /* the first use replaces what the variable gave */
      cleared[n_cleared++] = o;
    }
    if (o->parse(cfg, value, err, errlen) != 0)
      return -1;
  }
  return 0;
}

int config_load(int argc, char **argv, char *(*getenv_fn)(const char *),
                struct opforge_config *ret_cfg, char *err, size_t errlen) {
  struct opforge_config *cfg = malloc(sizeof *cfg);
  if (!cfg) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  config_defaults(cfg);
  for (const struct option_spec *o = options; o->name; o++) {
    const char *value = getenv_fn ? getenv_fn(o->env) : NULL;
    if (value && o->parse(cfg, value, err, errlen) != 0) {
      char inner[512];
      snprintf(inner, sizeof inner, "%s", err);
      snprintf(err, errlen, "%s (from %s)", inner, o->env);
      free(cfg);
      return -1;
    }
  }
  for (const struct sandbox_option *o = sandbox_options; o->name; o++) {
    const char *value = getenv_fn ? getenv_fn(o->env) : NULL;
    if (value && o->set(&cfg->sandbox, value, err, errlen) != 0) {
      char inner[512];
      snprintf(inner, sizeof inner, "%s", err);
      snprintf(err, errlen, "%s (from %s)", inner, o->env);
      free(cfg);
      return -1;
    }
  }
  for (const struct llm_option *o = llm_options; o->name; o++) {
    const char *value = getenv_fn ? getenv_fn(o->env) : NULL;
    if (value && o->set(&cfg->llm, value, err, errlen) != 0) {
      char inner[512];
      snprintf(inner, sizeof inner, "%s", err);
      snprintf(err, errlen, "%s (from %s)", inner, o->env);
      free(cfg);
      return -1;
    }
  }
  if (apply_argv(cfg, argc, argv, err, errlen) != 0 ||
      llm_settings_finish(&cfg->llm, getenv_fn, err, errlen) != 0) {
    memset(cfg->llm.key, 0, sizeof cfg->llm.key);
    free(cfg);
    return -1;
  }
  *ret_cfg = *cfg;
  memset(cfg->llm.key, 0, sizeof cfg->llm.key);
  free(cfg);
  return 0;
}

void config_usage(FILE *out) {
  fprintf(out, "usage: opforge serve [OPTIONS]\n\noptions (and their variables):\n");
  for (const struct option_spec *o = options; o->name; o++)
    fprintf(out, "  %-26s %-32s %s\n", o->name, o->env, o->help);
  fprintf(out, "\nthe evaluator's sandbox (task code runs there):\n");
  sandbox_options_usage(out);
  fprintf(out, "\nthe LLM proposer's endpoint (proposer \"llm\"):\n");
  llm_settings_usage(out);
}
