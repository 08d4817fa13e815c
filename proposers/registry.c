/* The proposers a task can name, and the one place that opens them by name. */
#include <stdio.h>
#include <string.h>

#include "proposers/proposer.h"

int proposer_open(const char *name, const struct proposer_config *cfg, struct proposer *ret,
                  char *why, size_t whylen) {
  int rc;
  if (name && strcmp(name, "builtin") == 0)
    rc = proposer_builtin_new(ret);
  else if (name && strcmp(name, "test") == 0)
    rc = proposer_test_new(cfg ? cfg->fixtures_dir : NULL, ret);
  else {
    snprintf(why, whylen, "the '%s' proposer is not available in this build; use "
             "\"builtin\", or \"test\" with --fixtures", name ? name : "?");
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
