/* Pointwise programs of the GEMM family: FX pointwise nodes translated into C statements
 * over one stage of the GEMM pipeline (the accumulator tile, a row of the tail, or the
 * broadcast output).
 *
 * A stage is a row-major array of rows x cols floats; a program computes one element
 * (row, col) from its input value v0. Graph tensors read by the program (bias,
 * per-column or per-row vectors, scalars, full tensors) become operands: pointers passed
 * to the emitted function, indexed by broadcasting their shape against the node's shape,
 * which is any row-major view of the stage. Each statement defines one SSA float
 * variable, so a value may be used several times (x + x, residual adds). */
#ifndef OPFORGE_BUILTIN_GEMM_EPILOGUE_H
#define OPFORGE_BUILTIN_GEMM_EPILOGUE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define EPI_MAX_RANK 8

/* A value an op reads: an SSA variable of the program, a Python constant, or a tensor
 * (input:i, param:<key>, or buffer:<name> produced by an earlier launch). */
enum epi_kind { EPI_VAR, EPI_CONST, EPI_TENSOR };

struct epi_value {
  enum epi_kind kind;
  int var;            /* EPI_VAR: the variable vN */
  double c;           /* EPI_CONST */
  const char *tensor; /* EPI_TENSOR: borrowed name */
  int rank;           /* EPI_TENSOR: its shape */
  long long shape[EPI_MAX_RANK];
};

/* A program under construction. Fields are read-only outside gemm_epilogue.c. */
struct epi_prog {
  json_t *stmts;    /* strings "float vN = ...;" in order */
  json_t *operands; /* tensor names, one per distinct operand, in parameter order */
  json_t *ops;      /* the op names translated, in order (for summaries and tests) */
  int nvars;        /* v0 is the input; v1.. are defined by stmts */
  long long rows;   /* stage geometry */
  long long cols;
};

/* Resolves one FX argument (a {"node": name} reference or a constant) to a value.
 * Returns 0, or -1 with why (an unknown node, a non-float constant...). */
typedef int (*epi_resolve_fn)(void *ctx, json_t *arg, struct epi_value *ret_value, char *why,
                              size_t whylen);

/* Starts an empty program over a rows x cols stage. Returns 0, or -1 when out of memory
 * (then nothing needs clearing). */
int epi_prog_init(struct epi_prog *p, long long rows, long long cols);
/* Frees what p owns; accepts a zeroed or cleared program. */
void epi_prog_clear(struct epi_prog *p);

/* True when node (borrowed) is a pointwise op this module can translate: arithmetic,
 * activations, clamps, elementwise min/max with a tensor, triu/tril masks, identities
 * (dropout with p = 0, clone, detach, contiguous). Reductions such as torch.max(x, dim)
 * are not pointwise. */
bool epi_is_pointwise(json_t *node);

/* Translates one pointwise node (borrowed) whose output has the node's "shape", a
 * row-major view of the stage. resolve/ctx give the values of its arguments. On success
 * appends one or more statements and sets *ret_var to the variable holding the result
 * (possibly an existing one, for identities). Returns -1 with why naming the op and the
 * reason (unsupported op or argument, non-float32 result, an operand that does not
 * broadcast to the node's shape). */
int epi_translate(struct epi_prog *p, json_t *node, epi_resolve_fn resolve, void *ctx, int *ret_var,
                  char *why, size_t whylen);

/* Appends vN = (x - mean[col]) * rstd[col] * weight[col] + bias[col] (batch-norm apply
 * with per-column statistics). weight/bias may be NULL (no affine). Tensor names are
 * borrowed; the stage's cols must equal the normalized feature count. Returns 0 and
 * *ret_var, or -1 when out of memory. */
int epi_add_column_affine(struct epi_prog *p, int x, const char *mean, const char *rstd,
                          const char *weight, const char *bias, int *ret_var);

/* Appends vN = x + value, value (a tensor or constant, borrowed) read at the element of
 * shape S (rank r, a view of the stage): the bias of a linear layer or addmm. Returns 0
 * and *ret_var, or -1 with why when it does not broadcast. */
int epi_add_value(struct epi_prog *p, int x, const struct epi_value *value, const long long *S,
                  int r, int *ret_var, char *why, size_t whylen);

/* The device helpers every emitted function may call (static text). */
const char *epi_prelude(void);

/* Emits `__device__ __forceinline__ float NAME(float v0, i64 row, i64 col, const float*
 * __restrict__ e0, ...) { ...; return vOUT; }`. Returns a string the caller frees, or
 * NULL when out of memory. */
char *epi_emit_function(const struct epi_prog *p, const char *name, int out_var);

/* Emits a call `NAME(x, row, col, args[0], ...)` with one argument expression per operand
 * (args borrowed, p's operand order). Returns a string the caller frees, or NULL. */
char *epi_emit_call(const struct epi_prog *p, const char *name, const char *x, const char *row,
                    const char *col, const char *const *args);

#endif
