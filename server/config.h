/* Server configuration: read once at start-up from options and OPFORGE_* variables. */
#ifndef OPFORGE_CONFIG_H
#define OPFORGE_CONFIG_H

#include <limits.h>
#include <stdio.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proposers/llm/settings.h"
#include "engine/search_config.h"
#include "gpu/sandbox.h"

#define CONFIG_MAX_TOKENS 16
#define CONFIG_MAX_GPUS 64
#define CONFIG_MAX_NAMES 16     /* --cors-origin and --allow-host entries each */
#define CONFIG_NAME_MAX 256     /* bytes of one entry, NUL included */

enum gpu_mode { GPUS_ALL, GPUS_NONE, GPUS_LIST };

/* Every setting of `opforge serve`. Filled by config_load; plain data, no ownership. */
struct opforge_config {
  char listen_host[256];
  uint16_t listen_port;            /* 0 = pick a free port */
  char data_dir[PATH_MAX];
  char store[4096];                /* "" or "sqlite": SQLite in data_dir; else a
                                      postgresql:// URL (may hold a password: log only
                                      store_redact's copy) */
  char store_password[1024];       /* from --store-password-file; a secret nothing prints */
  char device_classes[16][33];     /* --device-class: what this server advertises (upper
                                      case); none given: derived from its GPUs' names */
  int n_device_classes;
  enum gpu_mode gpu_mode;
  int gpu_list[CONFIG_MAX_GPUS];
  int n_gpu_list;
  int workers_per_gpu;
  char token_file[PATH_MAX];
  char tokens[CONFIG_MAX_TOKENS][128];
  int n_tokens;
  size_t max_body_bytes;
  size_t max_url_bytes;
  unsigned threads;                /* MHD thread pool size */
  unsigned max_connections;
  unsigned max_connections_per_ip;
  unsigned connection_timeout_s;
  unsigned header_deadline_s;      /* a request line and headers must arrive within it */
  unsigned body_deadline_s;        /* a request body must arrive within it of its head */
  unsigned shutdown_grace_s;       /* on SIGTERM, evaluations in flight get this long */
  unsigned lease_s;                /* a claim's lease; renewed every third of it */
  unsigned sse_keepalive_s;
  char python[PATH_MAX];           /* empty = default search */
  char evaluator[PATH_MAX];        /* empty = default search */
  char gpu_lib[PATH_MAX];          /* libopforge_gpu.so; empty = default search */
  char fixtures[PATH_MAX];         /* fixture candidates for the test proposer */
  unsigned evaluate_deadline_s;    /* compile + evaluate of one candidate */
  unsigned profile_deadline_s;     /* profile, including torch.compile */
  struct llm_settings llm;         /* the LLM proposer's endpoint (--llm-* options); its
                                      key is a secret that nothing prints */
  char search_config[PATH_MAX];    /* --search-config FILE; empty = the defaults */
  struct search_config search;     /* the tasks' default search settings: FILE's keys
                                      over search_config_defaults */
  char cors_origins[CONFIG_MAX_NAMES][CONFIG_NAME_MAX]; /* "scheme://host[:port]", lower case */
  int n_cors_origins;
  char allow_hosts[CONFIG_MAX_NAMES][CONFIG_NAME_MAX];  /* extra Host names, lower case */
  int n_allow_hosts;
  struct sandbox_settings sandbox; /* how evaluators run task code (--sandbox, ...) */
};

/* Sets every field to its default. */
void config_defaults(struct opforge_config *cfg);

/* Reads OPFORGE_* variables (via getenv_fn, normally getenv) and then options (argv
 * after the subcommand; options win). Repeatable options (--cors-origin, --allow-host)
 * add one entry per use; their variables hold a list separated by commas or spaces,
 * which the options replace when given. On a bad value returns -1 with a message naming
 * the option in err. ret_cfg is written only on success. */
int config_load(int argc, char **argv, char *(*getenv_fn)(const char *),
                struct opforge_config *ret_cfg, char *err, size_t errlen);

/* Prints the options with their variables and defaults. */
void config_usage(FILE *out);

#endif
