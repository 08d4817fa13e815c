/* The builtin generators' text builder and the candidate assembly they share (see
 * codegen.h). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/codegen.h"

/* ---- text building ---- */

/* Grows b to hold n more bytes and the NUL; false (b failed) when memory runs out. */
static bool cg_reserve(struct cg_buf *b, size_t n) {
  size_t cap = b->cap ? b->cap : 256;
  while (cap - b->len <= n)
    cap *= 2;
  char *s = realloc(b->s, cap);
  if (!s) {
    b->failed = true;
    return false;
  }
  b->s = s;
  b->cap = cap;
  return true;
}

void cg_printf(struct cg_buf *b, const char *fmt, ...) {
  if (b->failed)
    return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = b->cap - b->len;
    int n = vsnprintf(b->s ? b->s + b->len : NULL, b->s ? room : 0, fmt, ap);
    va_end(ap);
    if (n < 0 || (b->max && b->len + (size_t)n > b->max)) {
      b->failed = true;
      return;
    }
    if (b->s && (size_t)n < room) {
      b->len += (size_t)n;
      return;
    }
    if (!cg_reserve(b, (size_t)n))
      return;
  }
}

char *cg_take(struct cg_buf *b) {
  char *s = b->failed ? NULL : b->s;
  if (b->failed)
    free(b->s);
  if (s == NULL && !b->failed)
    s = calloc(1, 1);
  *b = (struct cg_buf){0};
  return s;
}

int cg_copy(struct cg_buf *b, char *out, size_t outlen) {
  bool fits = !b->failed && b->len < outlen;
  if (outlen > 0)
    snprintf(out, outlen, "%s", fits && b->s ? b->s : "");
  cg_free(b);
  return fits ? 0 : -1;
}

void cg_free(struct cg_buf *b) {
  if (!b)
    return;
  free(b->s);
  *b = (struct cg_buf){0};
}

void cg_float(double v, char *out, size_t outlen) {
  if (isnan(v)) {
    snprintf(out, outlen, "__int_as_float(0x7fc00000)");
    return;
  }
  if (isinf(v)) {
    snprintf(out, outlen, "__int_as_float(%s)", v > 0 ? "0x7f800000" : "(int)0xff800000");
    return;
  }
  /* Torch casts Python scalars to the float op type: round to float first. */
  char tmp[64];
  snprintf(tmp, sizeof tmp, "%.9g", (double)(float)v);
  bool has_point = strpbrk(tmp, ".e") != NULL;
  snprintf(out, outlen, "%s%s%sf%s", tmp[0] == '-' ? "(" : "", tmp, has_point ? "" : ".0",
           tmp[0] == '-' ? ")" : "");
}

void cg_define_ll(struct cg_buf *b, const char *name, long long v) {
  bool wide = v > 2147483647LL || v < -2147483647LL;
  cg_printf(b, "#define %s %lld%s\n", name, v, wide ? "LL" : "");
}

/* ---- candidate assembly ---- */

int cg_common(struct cg_buf *b) {
  const char *common = builtin_template("common.cuh");
  if (!common)
    return -1;
  cg_printf(b, "#ifndef INFINITY\n#define INFINITY __int_as_float(0x7f800000)\n#endif\n%s\n",
            common);
  return 0;
}

char *cg_source(const char *template_name, const char *fragment) {
  static const char marker[] = "// @OFG_FRAGMENT@";
  const char *tmpl = builtin_template(template_name);
  const char *at = tmpl ? strstr(tmpl, marker) : NULL;
  struct cg_buf b = {0};
  if (!at || cg_common(&b) != 0)
    return NULL;
  cg_printf(&b, "%.*s\n%s\n%s", (int)(at - tmpl), tmpl, fragment, at + sizeof marker - 1);
  return cg_take(&b);
}

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

/* ---- knob checks ---- */

int cg_check_common(const struct knob_set *k, char *why, size_t whylen) {
  if (k->block < 64 || k->block > 1024 || k->block % 32 != 0) {
    snprintf(why, whylen, "BLOCK=%d: must be a multiple of 32 in [64, 1024]", k->block);
    return -1;
  }
  if (k->vec != 1 && k->vec != 2 && k->vec != 4) {
    snprintf(why, whylen, "VEC=%d: vector accesses are 1, 2 or 4 floats", k->vec);
    return -1;
  }
  if (k->minb < 0 || k->block * k->minb > 2048) {
    snprintf(why, whylen, "MINB=%d: %d blocks of %d threads exceed 2048 threads per SM",
             k->minb, k->minb, k->block);
    return -1;
  }
  if (k->bm || k->bn || k->bk || k->tm || k->tn || k->stages > 1) {
    snprintf(why, whylen, "BM, BN, BK, TM, TN and STAGES are GEMM tile knobs");
    return -1;
  }
  return 0;
}

