/* The one text builder of the builtin generators (struct cg_buf) with the literals and
 * #defines they write, and the candidate assembly the families share: a source around a
 * template, the {source, options, plan} object, and the knob checks of the memory-bound
 * families. */
#ifndef OPFORGE_BUILTIN_CODEGEN_H
#define OPFORGE_BUILTIN_CODEGEN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "proposers/builtin/builtin.h"

/* ---- text building ---- */

/* A growable NUL-terminated string. Zero-initialize; cg_take hands the text over. max, when
 * set, is the longest text allowed in bytes: growing past it counts as an allocation
 * failure (a bound for text a client's graph controls). After a failure every later call
 * is a no-op and cg_take returns NULL. */
struct cg_buf {
  char *s;
  size_t len, cap;
  size_t max; /* 0: no limit */
  bool failed;
};

/* Appends printf-formatted text. */
void cg_printf(struct cg_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Returns the text (caller frees) and resets b; NULL after an allocation failure. */
char *cg_take(struct cg_buf *b);
/* Copies b's text into out (outlen bytes, NUL-terminated) and frees b. Returns 0, or -1
 * with out set to "" when b failed or its text does not fit. */
int cg_copy(struct cg_buf *b, char *out, size_t outlen);
/* Frees what b holds; accepts a zeroed buffer. */
void cg_free(struct cg_buf *b);

/* Writes v as a CUDA float literal ("3.14f", "1.0f", "1e-05f", "(-2.0f)", or an exact bit
 * pattern for inf/nan) into out, rounded to float first as PyTorch does with scalars. */
void cg_float(double v, char *out, size_t outlen);

/* Appends `#define name v`, with an LL suffix only when v does not fit an int. */
void cg_define_ll(struct cg_buf *b, const char *name, long long v);

/* ---- candidate assembly ---- */

/* Appends what every candidate source starts with: INFINITY (NVRTC has no math.h, and
 * common.cuh's block max needs it), then common.cuh and a newline. Returns 0, or -1 when
 * the template is missing. */
int cg_common(struct cg_buf *b);

/* The candidate source (caller frees): cg_common's text, then the template text up to its
 * "// @OFG_FRAGMENT@" line, the fragment (borrowed), and the rest of the template. NULL
 * when the template is unknown, has no marker, or memory runs out. */
char *cg_source(const char *template_name, const char *fragment);

/* The source of a row kernel (norm.cu, softmax.cu; caller frees): cg_source's text with
 * OFG_ROW_HELPERS defined ahead of common.cuh, which turns on its shared-memory staging
 * and cluster helpers. fragment stays the caller's. NULL when the template is unknown or
 * memory runs out. */
char *cg_row_source(const char *template_name, const char *fragment);

/* Packs {"source": src, "options": knob_options(k), "plan": plan} into *ret_candidate
 * (the caller owns it). Takes over plan (NULL counts as out of memory); src and k stay
 * the caller's, and src may be NULL (out of memory). On failure writes oom_why into why
 * and returns -1. */
int cg_candidate(const char *src, const struct knob_set *k, json_t *plan, const char *oom_why,
                 json_t **ret_candidate, char *why, size_t whylen);

/* ---- knob checks ---- */

/* Knob checks every memory-bound family shares: BLOCK a multiple of 32 in [64, 1024],
 * VEC in {1, 2, 4}, MINB with BLOCK*MINB <= 2048 threads per SM, and the GEMM-only knobs
 * (BM, BN, BK, TM, TN, STAGES > 1) unset. 0, or -1 with the reason in why. */
int cg_check_common(const struct knob_set *k, char *why, size_t whylen);


#endif
