/* Candidate assembly the builtin generators share: the row kernels' source and the
 * {source, options, plan} object every family hands back. The text builder every generator
 * (gemm included) writes source into, struct cg_buf, is declared in expr.h. */
#ifndef OPFORGE_BUILTIN_CODEGEN_H
#define OPFORGE_BUILTIN_CODEGEN_H

#include <jansson.h>
#include <stddef.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/expr.h"
#include "proposers/builtin/reduction.h"

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

/* Appends `#define name v` to b, with an LL suffix only when v does not fit an int. */
void cg_define_ll(struct cg_buf *b, const char *name, long long v);

/* The checks the row kernels (norm, softmax) share once their layout L is resolved: the
 * MODE refusal their family found (NULL for none; borrowed) and whole rows of lanes per
 * block. Returns 0, or -1 with the reason in why. */
int cg_row_check(const struct row_layout *L, const struct knob_set *k, const char *refusal,
                 char *why, size_t whylen);

#endif
