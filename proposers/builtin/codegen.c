/* Candidate assembly the builtin generators share (see codegen.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/codegen.h"

char *cg_row_source(const char *template_name, const char *fragment) {
  static const char guard[] = "#define OFG_ROW_HELPERS 1\n";
  char *body = cg_source(template_name, fragment);
  if (!body)
    return NULL;
  size_t n = strlen(body);
  char *src = malloc(sizeof guard - 1 + n + 1);
  if (src) {
    memcpy(src, guard, sizeof guard - 1);
    memcpy(src + sizeof guard - 1, body, n + 1);
  }
  free(body);
  return src;
}

int cg_candidate(const char *src, const struct knob_set *k, json_t *plan, const char *oom_why,
                 json_t **ret_candidate, char *why, size_t whylen) {
  json_t *cand = NULL;
  if (src && plan)
    cand = json_pack("{s:s, s:o, s:o}", "source", src, "options", knob_options(k), "plan", plan);
  else
    json_decref(plan);
  if (!cand) {
    snprintf(why, whylen, "%s", oom_why);
    return -1;
  }
  *ret_candidate = cand;
  return 0;
}

void cg_define_ll(struct cg_buf *b, const char *name, long long v) {
  cg_printf(b, "#define %s %lld%s\n", name, v, v > 2147483647LL ? "LL" : "");
}

int cg_row_check(const struct row_layout *L, const struct knob_set *k, const char *refusal,
                 char *why, size_t whylen) {
  if (refusal) {
    snprintf(why, whylen, "MODE %s: %s", k->mode, refusal);
    return -1;
  }
  if (L->warp && k->block % L->group != 0) {
    snprintf(why, whylen, "BLOCK=%d is not a multiple of %d lanes per row", k->block, L->group);
    return -1;
  }
  return 0;
}
