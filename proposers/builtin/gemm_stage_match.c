/* The GEMM matcher's stages after the matmul: the pointwise epilogue fused into the GEMM's
 * store, the row tail's program (its operations are in gemm_tail_match.c), values written
 * to buffers for later stages, and the broadcast output stage. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/gemm_internal.h"

#define TAIL_SMEM_LIMIT (200 * 1024)

/* ---- resolving arguments for the epilogue translator ---- */

static int resolve_arg(void *ctx, json_t *arg, struct epi_value *ret, char *why, size_t whylen) {
  struct matcher *m = ctx;
  struct val *v = mt_arg_val(m, arg);
  struct epi_value out = {0};
  if (!v) {
    if (json_is_integer(arg) || json_is_real(arg)) {
      out.kind = EPI_CONST;
      out.c = json_number_value(arg);
    } else if (json_is_string(arg) && (strcmp(json_string_value(arg), "inf") == 0 ||
                                       strcmp(json_string_value(arg), "-inf") == 0 ||
                                       strcmp(json_string_value(arg), "nan") == 0)) {
      const char *s = json_string_value(arg);
      out.kind = EPI_CONST;
      out.c = s[0] == 'n' ? NAN : s[0] == '-' ? -INFINITY : INFINITY;
    } else {
      snprintf(why, whylen, "a non-numeric constant argument");
      return -1;
    }
    *ret = out;
    return 0;
  }
  if (v->kind == V_VAR) {
    if (v->gen != m->gen) {
      snprintf(why, whylen, "a value from before a row operation is used after it");
      return -1;
    }
    out.kind = EPI_VAR;
    out.var = v->var;
  } else if (v->kind == V_TENSOR && !v->trans && !v->diag) {
    out.kind = EPI_TENSOR;
    out.tensor = v->tensor;
    out.rank = v->rank;
    memcpy(out.shape, v->shape, sizeof out.shape);
  } else {
    snprintf(why, whylen, "an operand that is not a plain tensor, constant or GEMM value");
    return -1;
  }
  *ret = out;
  return 0;
}

/* ---- segments, the row tail, and the broadcast stage ---- */

/* Starts a new pointwise segment over rows x cols; older vars become dead. */
static int next_segment(struct matcher *m, long long rows, long long cols) {
  epi_prog_clear(&m->seg);
  m->seg_live = false;
  if (epi_prog_init(&m->seg, rows, cols) != 0)
    return mt_fail(m, "out of memory");
  m->seg_live = true;
  m->gen++;
  m->rows = rows;
  m->cols = cols;
  return 0;
}

/* Appends the segment's ops to the match's summary list key. */
static void record_ops(struct matcher *m, json_t *list) {
  size_t i;
  json_t *o;
  json_array_foreach(m->seg.ops, i, o) {
    json_array_append(list, o);
  }
}

/* The index of tensor (copied) in operands, a list of tensor names, appending it when it is
 * not there yet. */
static size_t operand_slot(json_t *operands, const char *tensor) {
  size_t j, found = json_array_size(operands);
  json_t *e;
  json_array_foreach(operands, j, e) {
    if (strcmp(json_string_value(e), tensor) == 0)
      found = j;
  }
  if (found == json_array_size(operands))
    json_array_append_new(operands, json_string(tensor));
  return found;
}

/* Emits the current segment as device function name into fns, returning the call with
 * the operand arguments mapped to parameters prefix<i> of operands (deduplicated). */
static char *segment_call(struct matcher *m, const char *name, int out_var, struct cg_buf *fns,
                          json_t *operands, const char *prefix, const char *x, const char *row,
                          const char *col) {
  char *fn = epi_emit_function(&m->seg, name, out_var);
  if (!fn)
    return NULL;
  cg_printf(fns, "%s", fn);
  free(fn);
  size_t n = json_array_size(m->seg.operands);
  char **args = calloc(n + 1, sizeof *args);
  if (!args)
    return NULL;
  bool ok = true;
  for (size_t i = 0; i < n; i++) {
    size_t found = operand_slot(operands, json_string_value(json_array_get(m->seg.operands, i)));
    args[i] = malloc(32);
    if (!args[i]) {
      ok = false;
      break;
    }
    snprintf(args[i], 32, "%s%zu", prefix, found);
  }
  char *call = ok ? epi_emit_call(&m->seg, name, x, row, col, (const char *const *)args) : NULL;
  for (size_t i = 0; i < n; i++)
    free(args[i]);
  free(args);
  return call;
}

/* Ends the GEMM epilogue: its function becomes the match's "epilogue". */
static int finish_epilogue(struct matcher *m, int out_var) {
  struct cg_buf fns = {0};
  json_t *operands = json_array();
  char *call =
      operands ? segment_call(m, "ofg_epi", out_var, &fns, operands, "e", "x", "row", "col") : NULL;
  free(call);
  if (!operands || fns.failed || !call) {
    json_decref(operands);
    cg_free(&fns);
    return mt_fail(m, "out of memory");
  }
  json_t *ops = json_array();
  record_ops(m, ops);
  json_object_set_new(m->match, "epilogue",
                      json_pack("{s:o,s:o,s:s}", "ops", ops, "operands", operands, "code",
                                fns.s ? fns.s : ""));
  cg_free(&fns);
  return 0;
}

/* After a new segment started, the values that held var of the previous generation
 * become its input v0; every other value of that generation is dead. */
static void carry_var(struct matcher *m, int old_gen, int var) {
  for (size_t i = 0; i < m->n; i++) {
    struct val *v = &m->vals[i];
    if ((v->kind == V_VAR || v->kind == V_TUPLE) && v->gen == old_gen && v->var == var) {
      v->var = 0;
      v->gen = m->gen;
    }
  }
}

/* Starts the row tail after the GEMM stage: the epilogue ends at out_var, whose value
 * becomes the row the tail works on. */
int mt_begin_tail(struct matcher *m, int out_var) {
  if (m->phase != PH_EPI)
    return 0;
  if (finish_epilogue(m, out_var) != 0)
    return -1;
  m->has_tail = true;
  m->tail_cols_in = m->cols;
  m->tail_ops = json_array();
  m->tail_operands = json_array();
  if (!m->tail_ops || !m->tail_operands)
    return mt_fail(m, "out of memory");
  m->phase = PH_ROW;
  int old = m->gen;
  if (next_segment(m, m->rows, m->cols) != 0)
    return -1;
  carry_var(m, old, out_var);
  return 0;
}

/* Flushes the tail's current segment (result out_var) into the row program: a map over
 * the row, or an update of the row's scalar. */
static int flush_tail_segment(struct matcher *m, int out_var) {
  if (out_var == 0 && json_array_size(m->seg.stmts) == 0)
    return 0;
  char name[32];
  snprintf(name, sizeof name, "ofg_tf%d", m->nfn++);
  bool row = m->phase == PH_ROW;
  char *call = segment_call(m, name, out_var, &m->tail_fns, m->tail_operands, "t",
                            row ? "row[c]" : "s", "r", row ? "c" : "0");
  if (!call)
    return mt_fail(m, "out of memory");
  if (row)
    cg_printf(&m->tail_body,
              "  for (int c = threadIdx.x; c < n; c += blockDim.x) row[c] = %s;\n"
              "  __syncthreads();\n",
              call);
  else
    cg_printf(&m->tail_body, "  s = %s;\n", call);
  free(call);
  record_ops(m, m->tail_ops);
  return 0;
}

/* The tail parameter name of a tensor (appending it to the operands). */
void mt_tail_param(struct matcher *m, const char *tensor, char *buf, size_t len) {
  if (!tensor) {
    snprintf(buf, len, "(const float*)0");
    return;
  }
  snprintf(buf, len, "t%zu", operand_slot(m->tail_operands, tensor));
}

/* Runs a row operation on x: flushes the pointwise work before it, appends code (a
 * format over the row program's variables), and moves to the phase it leaves. */
int mt_row_op(struct matcher *m, struct val *x, const char *opname, enum phase next,
                  long long next_cols, const char *code) {
  if (x->kind != V_VAR && x->kind != V_TUPLE)
    return mt_fail(m, "%s: input is not the GEMM's value", opname);
  if (x->gen != m->gen)
    return mt_fail(m, "%s: a value from before a row operation is used after it", opname);
  if (m->phase == PH_EXPAND || m->phase == PH_SCALAR)
    return mt_fail(m, "%s after the row was reduced or broadcast", opname);
  if (m->phase == PH_EPI && mt_begin_tail(m, x->var) != 0)
    return -1;
  if (flush_tail_segment(m, x->var) != 0)
    return -1;
  cg_printf(&m->tail_body, "%s", code);
  json_array_append_new(m->tail_ops, json_string(opname));
  m->phase = next;
  return next_segment(m, m->rows, next_cols);
}

/* The value of a node's input (or self) argument, or NULL. */
struct val *mt_input_var(struct matcher *m, json_t *node) {
  struct val *x = mt_arg_val(m, graph_arg(node, 0, "input"));
  if (!x)
    x = mt_arg_val(m, graph_arg(node, 0, "self"));
  return x;
}

static int finish_tail(struct matcher *m, bool scalar);

/* Writes the current stage's value var to a buffer that later stages read as a tensor:
 * the GEMM output or the tail's result. */
static int materialize(struct matcher *m, int var) {
  const char *buf;
  if (m->phase == PH_EPI) {
    if (finish_epilogue(m, var) != 0)
      return -1;
    buf = "buffer:gemm_out";
    json_object_set_new(m->match, "gemm_dst", json_string(buf));
  } else {
    if (flush_tail_segment(m, var) != 0)
      return -1;
    buf = "buffer:tail_out";
    json_object_set_new(m->match, "tail_dst", json_string(buf));
    if (finish_tail(m, m->phase == PH_SCALAR) != 0)
      return -1;
  }
  for (size_t i = 0; i < m->n; i++) {
    struct val *v = &m->vals[i];
    if (v->kind == V_VAR && v->gen == m->gen && v->var == var) {
      v->kind = V_TENSOR;
      v->tensor = buf;
      v->trans = v->diag = false;
    }
  }
  return 0;
}

static int pointwise_op(struct matcher *m, json_t *node, struct val *out) {
  long long S[MAX_RANK];
  int r = graph_shape(node, S);
  if (r < 0)
    return mt_fail(m, "%s: unknown shape", node_target(node));
  long long numel = graph_dims_prod(S, 0, r), stage = m->rows * m->cols;
  /* In-place ops must not change a value another node still reads. */
  const char *t = node_target(node);
  size_t tl = strlen(t);
  json_t *ip = graph_is_module(node) ? graph_attr(node, "inplace")
                                     : json_object_get(json_object_get(node, "kwargs"), "inplace");
  if (json_is_true(ip) || strncmp(t, "operator.i", 10) == 0 ||
      (strcmp(node_op(node), "call_method") == 0 && tl > 1 && t[tl - 1] == '_')) {
    struct val *x = mt_arg_val(m, graph_arg(node, 0, NULL));
    if (!x || m->users[x - m->vals] != 1)
      return mt_fail(m, "in-place %s on a value that is used elsewhere", t);
  }
  if (numel > stage) {
    if (m->phase == PH_EXPAND)
      return mt_fail(m, "%s broadcasts the result a second time", t);
    int var = -1;
    for (size_t i = 0; i < 3; i++) {
      struct val *v = mt_arg_val(m, graph_arg(node, i, NULL));
      if (v && v->kind == V_VAR && v->gen == m->gen) {
        if (var >= 0 && v->var != var)
          return mt_fail(m, "%s broadcasts two different GEMM values", t);
        var = v->var;
      }
    }
    if (var < 0 || materialize(m, var) != 0)
      return var < 0 ? mt_fail(m, "%s: unsupported arguments", t) : -1;
    m->phase = PH_EXPAND;
    long long cols = r > 0 ? S[r - 1] : 1;
    if (next_segment(m, numel / cols, cols) != 0)
      return -1;
  } else if (numel != stage) {
    return mt_fail(m, "%s: result is smaller than its input", t);
  }
  int var;
  if (epi_translate(&m->seg, node, resolve_arg, m, &var, m->why, m->whylen) != 0)
    return -1;
  return mt_set_var(m, out, node, var, V_VAR);
}

/* getitem / getattr on a (values, indices) tuple or a stage value. */
static int item_op(struct matcher *m, json_t *node, struct val *out) {
  struct val *x = mt_input_var(m, node);
  json_t *key = graph_arg(node, 1, NULL);
  const char *ks = json_string_value(key);
  if (x && x->kind == V_TUPLE &&
      ((json_is_integer(key) && json_integer_value(key) == 0) ||
       (ks && strcmp(ks, "values") == 0))) {
    if (x->gen != m->gen)
      return mt_fail(m, "a value from before a row operation is used after it");
    return mt_set_var(m, out, node, x->var, V_VAR);
  }
  if (ks && (strcmp(ks, "shape") == 0 || strcmp(ks, "dtype") == 0)) {
    out->kind = V_META;
    return 0;
  }
  if (ks && (strcmp(ks, "T") == 0 || strcmp(ks, "mT") == 0))
    return mt_fail(m, "a transpose of the GEMM's result is not supported");
  return mt_fail(m, "%s: unsupported indexing of a GEMM value (indices or slices)",
                 node_target(node));
}

static int view_op(struct matcher *m, json_t *node, struct val *out) {
  struct val *x = mt_input_var(m, node);
  long long s[MAX_RANK];
  int r = graph_shape(node, s);
  if (!x || x->kind != V_VAR || r < 0 || graph_dims_prod(s, 0, r) != m->rows * m->cols)
    return mt_fail(m, "%s: unsupported view of a GEMM value", node_target(node));
  if (x->gen != m->gen)
    return mt_fail(m, "a value from before a row operation is used after it");
  return mt_set_var(m, out, node, x->var, V_VAR);
}

/* Records a triu/tril applied straight to the raw product: tiles it zeroes skip the K
 * loop. */
static void note_mask(struct matcher *m, json_t *node) {
  if (m->phase != PH_EPI || json_array_size(m->seg.stmts) != 0 ||
      (!named(node, "triu") && !named(node, "tril")))
    return;
  struct val *x = mt_input_var(m, node);
  int gi = mt_node_index(m, m->gemm_name);
  json_t *dg = graph_arg(node, 1, "diagonal");
  if (!x || x->kind != V_VAR || x->var != 0 || gi < 0 || m->users[gi] != 1 ||
      (dg && !json_is_integer(dg)))
    return;
  json_object_set_new(m->match, "mask",
                      json_pack("{s:s,s:I}", "kind", named(node, "triu") ? "triu" : "tril",
                                "diagonal", (json_int_t)(dg ? json_integer_value(dg) : 0)));
}

int mt_stage_op(struct matcher *m, json_t *node, struct val *out) {
  static const char *const views[] = {"unsqueeze", "squeeze",   "view", "reshape",
                                      "flatten",   "unflatten", NULL};
  static const char *const norms[] = {"GroupNorm",      "group_norm",     "LayerNorm",
                                      "layer_norm",     "InstanceNorm1d", "InstanceNorm2d",
                                      "InstanceNorm3d", "instance_norm",  NULL};
  const char *n = short_name(node);
  bool mod = graph_is_module(node);
  if (!mod && (strcmp(n, "getitem") == 0 || strcmp(n, "getattr") == 0))
    return item_op(m, node, out);
  if (!mod && (strcmp(n, "size") == 0 || strcmp(n, "dim") == 0)) {
    out->kind = V_META;
    return 0;
  }
  if (!mod && gemm_name_in(n, views))
    return view_op(m, node, out);
  if (epi_is_pointwise(node)) {
    note_mask(m, node);
    return pointwise_op(m, node, out);
  }
  if (!mod && (strcmp(n, "sum") == 0 || strcmp(n, "mean") == 0 || strcmp(n, "max") == 0 ||
               strcmp(n, "min") == 0))
    return mt_reduce_op(m, node, out, n);
  if (!mod && (strcmp(n, "amax") == 0 || strcmp(n, "amin") == 0))
    return mt_reduce_op(m, node, out, strcmp(n, "amax") == 0 ? "max" : "min");
  if (!mod && strcmp(n, "logsumexp") == 0)
    return mt_reduce_op(m, node, out, "lse");
  if (strcmp(n, "softmax") == 0 || strcmp(n, "Softmax") == 0)
    return mt_softmax_op(m, node, out, false);
  if (strcmp(n, "log_softmax") == 0 || strcmp(n, "LogSoftmax") == 0)
    return mt_softmax_op(m, node, out, true);
  if (gemm_name_in(n, norms))
    return mt_norm_op(m, node, out);
  if (strcmp(n, "BatchNorm1d") == 0 || (!mod && strcmp(n, "batch_norm") == 0))
    return mt_batchnorm_op(m, node, out);
  if (strcmp(n, "AvgPool1d") == 0 || strcmp(n, "avg_pool1d") == 0)
    return mt_pool_op(m, node, out, false);
  if (strcmp(n, "MaxPool1d") == 0 || strcmp(n, "max_pool1d") == 0)
    return mt_pool_op(m, node, out, true);
  return mt_fail(m, "unsupported op %s after the matmul", node_target(node));
}

/* True when any argument (nested) refers to a GEMM value. */
bool mt_has_stage_arg(struct matcher *m, json_t *v) {
  if (json_is_object(v)) {
    struct val *x = mt_arg_val(m, v);
    if (x)
      return x->kind == V_VAR || x->kind == V_TUPLE;
    const char *k;
    json_t *e;
    json_object_foreach(v, k, e) {
      if (mt_has_stage_arg(m, e))
        return true;
    }
  } else if (json_is_array(v)) {
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) {
      if (mt_has_stage_arg(m, e))
        return true;
    }
  }
  return false;
}

/* The tail's device function ofg_tail_body: segment functions, then the row program
 * ending with the store of its vector or scalar result. */
static int finish_tail(struct matcher *m, bool scalar) {
  struct cg_buf b = {0};
  cg_printf(&b, "%s", m->tail_fns.s ? m->tail_fns.s : "");
  cg_printf(&b,
            "__device__ __forceinline__ void ofg_tail_body(float* row, float* tmp, float* red, "
            "i64 r, float* dst OFG_TAIL_PARAMS) {\n"
            "  int n = %lld;\n  float s = 0.0f;\n  (void)s; (void)tmp; (void)red;\n%s",
            m->tail_cols_in, m->tail_body.s ? m->tail_body.s : "");
  if (scalar)
    cg_printf(&b, "  if (threadIdx.x == 0) dst[r] = s;\n}\n");
  else
    cg_printf(&b, "  ofg_tail_store(dst + r * (i64)n, row, n);\n}\n");
  if (b.failed || m->tail_fns.failed || m->tail_body.failed) {
    cg_free(&b);
    return mt_fail(m, "out of memory");
  }
  long long smem = (m->tail_cols_in + 3) / 4 * 4 + (m->tail_tmp + 3) / 4 * 4 + 32;
  if (smem * 4 > TAIL_SMEM_LIMIT) {
    cg_free(&b);
    return mt_fail(m, "the row tail keeps a row of %lld floats in shared memory: too long",
                   m->tail_cols_in);
  }
  json_t *tail =
      json_pack("{s:O,s:O,s:s,s:I,s:I,s:I}", "ops", m->tail_ops, "operands", m->tail_operands,
                "code", b.s, "cols_in", (json_int_t)m->tail_cols_in, "cols_out",
                (json_int_t)(scalar ? 0 : m->cols), "smem_floats", (json_int_t)smem);
  cg_free(&b);
  if (!tail)
    return mt_fail(m, "out of memory");
  json_t *dst = json_object_get(m->match, "tail_dst");
  json_object_set_new(tail, "dst", json_string(dst ? json_string_value(dst) : "output:0"));
  json_object_del(m->match, "tail_dst");
  json_object_set_new(m->match, "tail", tail);
  if (m->has_colstats)
    json_object_set_new(m->match, "colstats", json_pack("{s:f}", "eps", m->bn_eps));
  if (!json_object_get(m->match, "gemm_dst")) {
    bool inplace = !scalar && m->cols == m->tail_cols_in && !dst;
    json_object_set_new(m->match, "gemm_dst",
                        json_string(inplace ? "output:0" : "buffer:gemm_out"));
  }
  return 0;
}

static int finish_expand(struct matcher *m, int var) {
  struct cg_buf fns = {0};
  json_t *operands = json_array();
  char *call = operands
                   ? segment_call(m, "ofg_expand", var, &fns, operands, "x", "0.0f", "row", "col")
                   : NULL;
  if (!call || fns.failed) {
    free(call);
    json_decref(operands);
    cg_free(&fns);
    return mt_fail(m, "out of memory");
  }
  json_t *ops = json_array();
  record_ops(m, ops);
  json_object_set_new(m->match, "expand",
                      json_pack("{s:o,s:o,s:s,s:s,s:I,s:I}", "ops", ops, "operands", operands,
                                "code", fns.s, "call", call, "numel",
                                (json_int_t)(m->rows * m->cols), "cols", (json_int_t)m->cols));
  free(call);
  cg_free(&fns);
  return 0;
}

int mt_finish(struct matcher *m, json_t *node) {
  json_t *a = graph_arg(node, 0, NULL);
  while (json_is_array(a) && json_array_size(a) == 1)
    a = json_array_get(a, 0);
  struct val *v = mt_arg_val(m, a);
  json_t *outs = json_object_get(m->profile, "outputs");
  if (json_array_size(outs) != 1)
    return mt_fail(m, "the model returns %zu outputs", json_array_size(outs));
  if (!v || v->kind != V_VAR || v->gen != m->gen)
    return mt_fail(m, "the output is not the GEMM pipeline's final value");
  long long s[MAX_RANK];
  int r = graph_shape(json_array_get(outs, 0), s);
  if (r < 0 || graph_dims_prod(s, 0, r) != m->rows * m->cols)
    return mt_fail(m, "the output's element count does not match the pipeline");
  switch (m->phase) {
  case PH_EPI:
    json_object_set_new(m->match, "gemm_dst", json_string("output:0"));
    return finish_epilogue(m, v->var);
  case PH_ROW:
  case PH_SCALAR:
    if (flush_tail_segment(m, v->var) != 0)
      return -1;
    return finish_tail(m, m->phase == PH_SCALAR);
  case PH_EXPAND:
    return finish_expand(m, v->var);
  default:
    return mt_fail(m, "no matmul");
  }
}

