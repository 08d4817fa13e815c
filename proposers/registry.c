/* The proposers a task can name, and the one place that opens them by name. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/llm/settings.h"
#include "proposers/proposer.h"

/* The LLM settings of this process's OPFORGE_LLM_* variables, read once: for a caller
 * that passes none in its proposer_config. */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static struct llm_settings env_settings;
static char env_error[512];
static int env_rc;

static void load_env_settings(void) {
  env_rc = llm_settings_from_env(getenv, &env_settings, env_error, sizeof env_error);
}

static int open_llm(const struct proposer_config *cfg, struct proposer *ret, char *why,
                    size_t whylen) {
  const struct llm_settings *s = cfg ? cfg->llm : NULL;
  if (!s) {
    pthread_once(&env_once, load_env_settings);
    if (env_rc != 0) {
      snprintf(why, whylen, "the 'llm' proposer's settings are invalid: %s", env_error);
      return -1;
    }
    s = &env_settings;
  }
  return proposer_llm_new(s, ret, why, whylen);
}

int proposer_open(const char *name, const struct proposer_config *cfg, struct proposer *ret,
                  char *why, size_t whylen) {
  int rc;
  if (name && strcmp(name, "builtin") == 0)
    rc = proposer_builtin_new(ret);
  else if (name && strcmp(name, "test") == 0)
    rc = proposer_test_new(cfg ? cfg->fixtures_dir : NULL, ret);
  else if (name && strcmp(name, "llm") == 0)
    return open_llm(cfg, ret, why, whylen);
  else {
    snprintf(why, whylen, "the '%s' proposer is not available in this build; use "
             "\"builtin\", \"llm\", or \"test\" with --fixtures", name ? name : "?");
    return -1;
  }
  if (rc != 0)
    snprintf(why, whylen, "out of memory opening the '%s' proposer", name);
  return rc;
}

void proposer_clear(struct proposer *p) {
  if (p->free)
    p->free(p->self);
  memset(p, 0, sizeof *p);
}
