/* The builtin pointwise family: matcher, knobs and generator (see pointwise.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/expr.h"
#include "proposers/builtin/pointwise.h"

/* The single float32 output spec of the profile (borrowed), or NULL. */
static json_t *float_output(json_t *profile) {
  json_t *outs = json_object_get(profile, "outputs");
  json_t *o = json_array_get(outs, 0);
  const char *dtype = json_string_value(json_object_get(o, "dtype"));
  if (json_array_size(outs) != 1 || !dtype || strcmp(dtype, "float32") != 0)
    return NULL;
  return o;
}

/* Names of the profile's inputs that a library convolution makes (caller owns). */
static json_t *conv_inputs(json_t *profile) {
  json_t *names = json_array(), *in;
  size_t i;
  json_array_foreach(json_object_get(profile, "inputs"), i, in) {
    if (json_is_true(json_object_get(in, "from_library_conv")))
      json_array_append(names, json_object_get(in, "name"));
  }
  return names;
}

static bool pw_vector_leaf(const json_t *ir, size_t i);

static int pw_match(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  const char *foreign = NULL;
  if (!json_is_array(json_object_get(profile, "graph"))) {
    snprintf(why, whylen, "the profile has no FX graph");
    return -1;
  }
  if (expr_graph_has(profile, expr_is_foreign_op, &foreign)) {
    snprintf(why, whylen, "%s is not elementwise", foreign);
    return 0;
  }
  json_t *root = expr_output_node(profile), *out = float_output(profile);
  if (!root || !out) {
    snprintf(why, whylen, "pointwise chains need exactly one float32 output");
    return -1;
  }
  json_t *ir = NULL;
  if (expr_build(profile, root, NULL, &ir, why, whylen) != 0)
    return strncmp(why, "foreign op", 10) == 0 ? 0 : -1;
  long long n = expr_numel(json_object_get(ir, "shape"));
  if (n != json_integer_value(json_object_get(out, "numel")) || n <= 0 ||
      json_array_size(json_object_get(ir, "leaves")) == 0) {
    snprintf(why, whylen, "the chain's result (%lld elements) is not the output", n);
    json_decref(ir);
    return -1;
  }
  json_t *ops = json_object_get(ir, "ops");
  size_t nops = json_array_size(ops);
  const char *op = nops == 0 ? "copy" : nops == 1 ? json_string_value(json_array_get(ops, 0))
                                                  : "chain";
  char summary[160];
  snprintf(summary, sizeof summary, "pointwise %s (%zu ops) over %lld elements", op, nops, n);
  *ret_match = json_pack("{s:s, s:s, s:s, s:O, s:I, s:O, s:O, s:o, s:i, s:o}", "family",
                         "pointwise", "op", op, "summary", summary, "ops", ops, "numel",
                         (json_int_t)n, "shape", json_object_get(ir, "shape"), "output",
                         json_object_get(out, "name"), "expr", ir, "sm_count",
                         builtin_sm_count(profile), "conv_inputs", conv_inputs(profile));
  return *ret_match ? 1 : -1;
}

/* ---- MODE channels_last (docs/architecture.md, "Channels-last convolutions") ---- */

/* The float32 leaves read at the flat index (full, contiguous) as tensor names (caller
 * owns): the ones MODE channels_last stores channels-last. */
static json_t *pw_full_leaves(json_t *match) {
  const json_t *ir = json_object_get(match, "expr");
  json_t *names = json_array();
  for (size_t i = 0; i < json_array_size(json_object_get(ir, "leaves")); i++)
    if (pw_vector_leaf(ir, i))
      json_array_append(names, json_object_get(json_array_get(json_object_get(ir, "leaves"), i),
                                               "tensor"));
  return names;
}

/* Why MODE channels_last does not apply to the chain, or NULL when it does: the result is
 * 4-D or 5-D and a full leaf is the output of a library convolution. */
static const char *pw_channels_last_refusal(json_t *match) {
  size_t rank = json_array_size(json_object_get(match, "shape"));
  if (rank != 4 && rank != 5)
    return "the result is not 4-D or 5-D";
  json_t *full = pw_full_leaves(match), *name, *conv;
  size_t i, j;
  bool fed = false;
  json_array_foreach(full, i, name) json_array_foreach(json_object_get(match, "conv_inputs"), j,
                                                       conv) fed = fed || json_equal(name, conv);
  json_decref(full);
  return fed ? NULL : "no full-size input comes from a library convolution";
}

static long long pw_numel(json_t *match) {
  return json_integer_value(json_object_get(match, "numel"));
}

/* Tiles of BLOCK*ITEMS vectors covering the whole vectors of the output. */
static long long pw_tiles(long long n, const struct knob_set *k) {
  long long per = (long long)k->block * k->items;
  return (n / k->vec + per - 1) / per;
}

static void pw_defaults(json_t *match, struct knob_set *ret) {
  struct knob_set k = {.block = 256, .vec = 4, .items = 4};
  /* Small outputs: fewer items per thread until there are 8 tiles per SM. */
  while (k.items > 1 && pw_tiles(pw_numel(match), &k) < 8LL * builtin_sm_count(match))
    k.items /= 2;
  *ret = k;
}

/* MODEs that are already part of every pointwise kernel, with the reason. */
static const char *pw_mode_refusal(const char *mode) {
  static const struct {
    const char *mode, *why;
  } refused[] = {
      {"fused", "the whole chain is already one fused kernel"},
      {"idx64", "indices are already 64-bit unless MODE idx32 is set"},
      {"predicated_tail", "the elements past the last whole vector already take a "
                          "bounds-checked scalar path"},
  };
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    if (strcmp(mode, refused[i].mode) == 0)
      return refused[i].why;
  static const char *const ok[] = {"", "grid_stride", "persistent", "ldg", "stream_store",
                                   "idx32", "fast_math", "channels_last"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (strcmp(mode, ok[i]) == 0)
      return NULL;
  return "this MODE does not apply to a pointwise chain";
}

static int pw_check(json_t *match, const struct knob_set *k, char *why, size_t whylen) {
  if (cg_check_common(k, why, whylen) != 0)
    return -1;
  const char *refusal = pw_mode_refusal(k->mode);
  bool looping = strcmp(k->mode, "grid_stride") == 0 || strcmp(k->mode, "persistent") == 0;
  if (!refusal && strcmp(k->mode, "channels_last") == 0)
    refusal = pw_channels_last_refusal(match);
  if (refusal)
    snprintf(why, whylen, "MODE %s: %s", k->mode, refusal);
  else if (k->items < 1 || k->items > 16)
    snprintf(why, whylen, "ITEMS=%d: 1 to 16 vectors per thread keep the loads in registers",
             k->items);
  else if (k->rows > 0)
    snprintf(why, whylen, "ROWS=%d: a pointwise chain has no rows", k->rows);
  else if (k->split > 1)
    snprintf(why, whylen, "SPLIT=%d: a pointwise chain has no reduction to split", k->split);
  else if (k->unroll > 1 && !looping)
    snprintf(why, whylen, "UNROLL=%d: only MODE grid_stride or persistent has a tile loop to "
             "unroll; the default maps one tile per block", k->unroll);
  else if (strcmp(k->mode, "idx32") == 0 && pw_numel(match) >= (1LL << 31) - 65536)
    snprintf(why, whylen, "MODE idx32: %lld elements need 64-bit indices", pw_numel(match));
  else if (strcmp(k->mode, "fast_math") == 0 &&
           json_integer_value(json_object_get(json_object_get(match, "expr"), "fast_ops")) == 0)
    snprintf(why, whylen, "MODE fast_math: the chain has no exp, log, division or sigmoid "
             "with a faster intrinsic");
  else
    return 0;
  return -1;
}

/* Whether leaf i is a float32 leaf read at the flat index (vector-loaded). */
static bool pw_vector_leaf(const json_t *ir, size_t i) {
  char off[256];
  const json_t *l = json_array_get(json_object_get(ir, "leaves"), i);
  return strcmp(json_string_value(json_object_get(l, "dtype")), "float32") == 0 &&
         expr_leaf_offset(ir, i, "e", off, sizeof off) == 1;
}

/* The argument list of ofg_pw_body for output element e: vector leaves from the register
 * tile (when regs), the others loaded at their broadcast offsets. */
static void pw_body_args(const json_t *ir, bool regs, struct cg_buf *b) {
  size_t n = json_array_size(json_object_get(ir, "leaves"));
  for (size_t i = 0; i < n; i++) {
    char off[512];
    expr_leaf_offset(ir, i, "e", off, sizeof off);
    if (regs && pw_vector_leaf(ir, i))
      cg_printf(b, "%sr.a%zu[k]", i ? ", " : "", i);
    else
      cg_printf(b, "%s(float)OFG_LD(p%zu + %s)", i ? ", " : "", i, off);
  }
}

/* The generated fragment: sizes, leaf parameters, the chain, and the per-vector load and
 * store functions pointwise.cu calls. */
static char *pw_fragment(json_t *match, const struct knob_set *k, const json_t *ir) {
  size_t n = json_array_size(json_object_get(ir, "leaves"));
  struct cg_buf b = {0};
  cg_printf(&b, "#define OFG_N %lldLL\n#define OFG_PW_PARAMS ", pw_numel(match));
  for (size_t i = 0; i < n; i++) {
    const json_t *l = json_array_get(json_object_get(ir, "leaves"), i);
    cg_printf(&b, "%sconst %s* __restrict__ p%zu", i ? ", " : "",
              expr_ctype(json_string_value(json_object_get(l, "dtype"))), i);
  }
  cg_printf(&b, "\n#define OFG_PW_ARGS ");
  for (size_t i = 0; i < n; i++)
    cg_printf(&b, "%sp%zu", i ? ", " : "", i);
  cg_printf(&b, "\n");
  if (expr_emit(ir, "ofg_pw_body", NULL, 0, strcmp(k->mode, "fast_math") == 0, &b) != 0) {
    cg_free(&b);
    return NULL;
  }
  cg_printf(&b, "struct ofg_pw_regs {\n");
  for (size_t i = 0; i < n; i++)
    if (pw_vector_leaf(ir, i))
      cg_printf(&b, "  float a%zu[VEC];\n", i);
  cg_printf(&b, "};\n__device__ __forceinline__ void ofg_pw_load(ofg_pw_regs& r, ofg_i i, "
                "OFG_PW_PARAMS) {\n");
  for (size_t i = 0; i < n; i++)
    if (pw_vector_leaf(ir, i))
      cg_printf(&b, "  ofg_ldv(p%zu + i, r.a%zu);\n", i, i);
  cg_printf(&b, "}\n__device__ __forceinline__ void ofg_pw_store(const ofg_pw_regs& r, ofg_i i, "
                "OFG_PW_PARAMS, float* __restrict__ out) {\n  float y[VEC];\n#pragma unroll\n"
                "  for (int k = 0; k < VEC; k++) {\n    const ofg_i e = i + k;\n    (void)e;\n"
                "    y[k] = ofg_pw_body(");
  pw_body_args(ir, true, &b);
  cg_printf(&b, ");\n  }\n  ofg_stv(out + i, y);\n}\n"
                "__device__ __forceinline__ float ofg_pw_scalar(ofg_i e, OFG_PW_PARAMS) {\n"
                "  return ofg_pw_body(");
  pw_body_args(ir, false, &b);
  cg_printf(&b, ");\n}\n");
  return cg_take(&b);
}

/* Blocks of the launch: one per tile, or a capped grid that loops over tiles. */
static long long pw_grid(json_t *match, const struct knob_set *k) {
  long long tiles = pw_tiles(pw_numel(match), k);
  int per_sm = 2048 / k->block > 32 ? 32 : 2048 / k->block;
  long long cap = tiles, sms = builtin_sm_count(match);
  if (strcmp(k->mode, "grid_stride") == 0)
    cap = sms * per_sm * 4;
  else if (strcmp(k->mode, "persistent") == 0)
    cap = sms * per_sm;
  if (cap < tiles)
    tiles = cap;
  return tiles < 1 ? 1 : tiles;
}

/* The plan; with MODE channels_last it lists the full leaves and the output as
 * channels-last tensors. */
static json_t *pw_plan(json_t *match, const struct knob_set *k) {
  json_t *args = json_array();
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(json_object_get(match, "expr"), "leaves"), i, l)
    json_array_append_new(args, json_pack("{s:O}", "tensor", json_object_get(l, "tensor")));
  json_array_append_new(args, json_pack("{s:O}", "tensor", json_object_get(match, "output")));
  json_t *plan = json_pack("{s:[], s:[{s:s, s:[I,i,i], s:[i,i,i], s:i, s:o}]}", "buffers",
                           "launches", "kernel", "ofg_pointwise", "grid",
                           (json_int_t)pw_grid(match, k), 1, 1, "block", k->block, 1, 1,
                           "shared_bytes", 0, "args", args);
  if (plan && strcmp(k->mode, "channels_last") == 0) {
    json_t *names = pw_full_leaves(match);
    json_array_append(names, json_object_get(match, "output"));
    json_object_set_new(plan, "channels_last", names);
  }
  return plan;
}

static int pw_generate(json_t *match, const struct knob_set *k, json_t **ret_candidate,
                       char *why, size_t whylen) {
  if (pw_check(match, k, why, whylen) != 0)
    return -1;
  json_t *ir = json_incref(json_object_get(match, "expr"));
  if (strcmp(k->mode, "channels_last") == 0) {
    json_t *full = pw_full_leaves(match);
    json_decref(ir);
    ir = expr_channels_last(json_object_get(match, "expr"), full);
    json_decref(full);
    if (!ir) {
      snprintf(why, whylen, "MODE channels_last: a leaf does not broadcast in that order");
      return -1;
    }
  }
  char *frag = pw_fragment(match, k, ir);
  json_decref(ir);
  char *src = frag ? cg_source("pointwise.cu", frag) : NULL;
  int rc = cg_candidate(src, k, src ? pw_plan(match, k) : NULL,
                        "pointwise: could not generate the candidate (out of memory)",
                        ret_candidate, why, whylen);
  /* Reading a library convolution's output in its layout, the chain names the move that
   * lets the convolution run channels-last: its gain is outside the region, where the
   * at-floor rule does not look (engine/loop_outside.c). The id is the seed memory's. */
  if (rc == 0 && strcmp(k->mode, "channels_last") != 0 && !pw_channels_last_refusal(match))
    json_object_set_new(*ret_candidate, "outside_moves",
                        json_pack("[s]", "channels_last_conv_output"));
  free(frag);
  free(src);
  return rc;
}

const struct builtin_family builtin_family_pointwise = {
    .name = "pointwise",
    .match = pw_match,
    .defaults = pw_defaults,
    .check = pw_check,
    .generate = pw_generate,
};
