/* The HTAM vocabulary: the lists of valid names and the predicates over them. */
#include "schema/memory_vocab.h"

#include <stddef.h>
#include <string.h>

const char *const htam_families[] = {"pointwise", "reduction", "norm", "softmax", "scan",
                                     "pooling",   "loss",      "gemm", NULL};
const char *const htam_failure_stages[] = {"compile", "load",  "launch", "correctness",
                                           "timeout", "crash", "check",  "parse", NULL};
const char *const htam_bounds[] = {"memory", "compute", NULL};

static bool in_list(const char *const *list, const char *s) {
  if (!s)
    return false;
  for (size_t i = 0; list[i]; i++)
    if (strcmp(list[i], s) == 0)
      return true;
  return false;
}

bool htam_family_known(const char *s) {
  return in_list(htam_families, s);
}

bool htam_trigger_known(const char *s) {
  if (!s)
    return false;
  if (strncmp(s, "failure:", 8) == 0)
    return in_list(htam_failure_stages, s + 8);
  if (strncmp(s, "bound:", 6) == 0)
    return in_list(htam_bounds, s + 6);
  if (strncmp(s, "family:", 7) == 0)
    return in_list(htam_families, s + 7);
  return false;
}
