/* The builtin softmax family: matcher, knobs and generator (see softmax.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/codegen.h"
#include "proposers/builtin/expr.h"
#include "proposers/builtin/reduction.h"
#include "proposers/builtin/softmax.h"

static bool is_softmax_target(const char *t) {
  return strcmp(t, "softmax") == 0 || strcmp(t, "log_softmax") == 0 ||
         strcmp(t, "Softmax") == 0 || strcmp(t, "LogSoftmax") == 0;
}

static bool foreign_to_softmax(const char *t) {
  return expr_is_foreign_op(t) && !is_softmax_target(t);
}

/* The single softmax node (borrowed); -1 with why when there are several, NULL if none. */
static int find_softmax(json_t *profile, json_t **ret, char *why, size_t whylen) {
  json_t *calls = graph_calls(profile), *node, *found = NULL;
  size_t i, n = 0;
  json_array_foreach(calls, i, node) {
    if (is_softmax_target(expr_target(node))) {
      found = node;
      n++;
    }
  }
  json_decref(calls);
  if (n > 1) {
    snprintf(why, whylen, "%zu softmax ops in one graph are unsupported", n);
    return -1;
  }
  *ret = found;
  return 0;
}

/* The tensor input placeholder of node (its first argument), or NULL with why. */
static json_t *input_placeholder(json_t *profile, json_t *node, char *why, size_t whylen) {
  json_t *in = expr_ref(profile, expr_arg(node, 0, "input"));
  const char *op = json_string_value(json_object_get(in, "op"));
  const char *tensor = json_string_value(json_object_get(in, "tensor"));
  if (!in || !op || strcmp(op, "placeholder") != 0 || !tensor ||
      strncmp(tensor, "input:", 6) != 0) {
    snprintf(why, whylen, "%s of a computed value (%s) is unsupported", expr_target(node),
             in ? expr_target(in) : "?");
    return NULL;
  }
  return in;
}

static int sm_match(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  const char *foreign = NULL;
  json_t *node = NULL, *root = expr_output_node(profile);
  if (expr_graph_has(profile, foreign_to_softmax, &foreign)) {
    snprintf(why, whylen, "%s is not a softmax", foreign);
    return 0;
  }
  if (find_softmax(profile, &node, why, whylen) != 0)
    return -1;
  if (!node) {
    snprintf(why, whylen, "no softmax in the graph");
    return 0;
  }
  if (root != node) {
    snprintf(why, whylen, "softmax followed by %s is unsupported", root ? expr_target(root)
                                                                        : "a tuple output");
    return -1;
  }
  json_t *in = input_placeholder(profile, node, why, whylen);
  if (!in)
    return -1;
  bool module = strcmp(json_string_value(json_object_get(node, "op")), "call_module") == 0;
  json_t *dim = module ? json_object_get(json_object_get(node, "attrs"), "dim")
                       : expr_arg(node, 1, "dim");
  json_t *dtype = expr_arg(node, 99, "dtype");
  const char *t = expr_target(node);
  const char *op = strcmp(t, "log_softmax") == 0 || strcmp(t, "LogSoftmax") == 0
                       ? "log_softmax" : "softmax";
  if (!json_is_integer(dim)) {
    snprintf(why, whylen, "%s needs an explicit integer dim", op);
    return -1;
  }
  if (dtype && strcmp(json_string_value(dtype) ? json_string_value(dtype) : "",
                      "torch.float32") != 0) {
    snprintf(why, whylen, "%s with a dtype is unsupported", op);
    return -1;
  }
  json_t *shape = json_object_get(in, "shape");
  json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
  const char *dt = json_string_value(json_object_get(in, "dtype"));
  const char *odt = json_string_value(json_object_get(out, "dtype"));
  long long c[3];
  int first, last;
  if (reduce_canonical(shape, dim, c, &first, &last, why, whylen) != 0)
    return -1;
  if (!dt || strcmp(dt, "float32") != 0 || !odt || strcmp(odt, "float32") != 0 ||
      json_integer_value(json_object_get(out, "numel")) != c[0] * c[1] * c[2]) {
    snprintf(why, whylen, "%s: only float32 inputs of the output's size", op);
    return -1;
  }
  char summary[160];
  snprintf(summary, sizeof summary, "%s over dim %d of [%lld, %lld, %lld]", op, first, c[0],
           c[1], c[2]);
  *ret_match = json_pack("{s:s, s:s, s:s, s:[I,I,I], s:i, s:O, s:O, s:i}", "family",
                         "softmax", "op", op, "summary", summary, "canonical", (json_int_t)c[0],
                         (json_int_t)c[1], (json_int_t)c[2], "dim", first, "input",
                         json_object_get(in, "tensor"), "output", json_object_get(out, "name"),
                         "sm_count", builtin_sm_count(profile));
  return *ret_match ? 1 : -1;
}

static void sm_canon(json_t *match, long long c[3]) {
  for (size_t i = 0; i < 3; i++)
    c[i] = json_integer_value(json_array_get(json_object_get(match, "canonical"), i));
}

static void sm_defaults(json_t *match, struct knob_set *ret) {
  long long c[3];
  sm_canon(match, c);
  row_layout_defaults(c, builtin_sm_count(match), ret);
}

/* Whether the statistics are online: MODE online / two_pass, else online exactly when
 * the row is streamed (a cached row makes the two passes cheap). */
static bool sm_online(const struct knob_set *k, const struct row_layout *L) {
  if (strcmp(k->mode, "online") == 0)
    return true;
  if (strcmp(k->mode, "two_pass") == 0)
    return false;
  return L->path == ROW_PATH_STREAM || L->multi;
}

/* The reason a MODE does not apply to this softmax, or NULL. */
static const char *sm_mode_refusal(json_t *match, const struct knob_set *k,
                                   const struct row_layout *L) {
  static const struct {
    const char *mode, *why;
  } refused[] = {
      {"shuffle", "partials are already combined with warp shuffles"},
      {"stable_lse", "the row max is already subtracted before exp"},
      {"predicated_tail", "every row loop is already bounds-checked"},
      {"idx64", "offsets are already 64-bit"},
  };
  const char *m = k->mode;
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    if (strcmp(m, refused[i].mode) == 0)
      return refused[i].why;
  bool log = strcmp(json_string_value(json_object_get(match, "op")), "log_softmax") == 0;
  if (strcmp(m, "inner_coalesced") == 0)
    return L->cols ? "threads already walk the contiguous inner axis"
                   : "inner is 1: rows are contiguous";
  if (strcmp(m, "single_kernel") == 0)
    return L->multi ? "the row is split over separate launches because it does not fit "
                      "one block or cluster on chip"
                    : "statistics and output are already one kernel";
  if (strcmp(m, "recip_mul") == 0 && log)
    return "log_softmax subtracts log(sum); there is no division";
  if (strcmp(m, "online") == 0 && (L->path == ROW_PATH_STREAM || L->multi))
    return "a streamed row already uses online statistics";
  if (strcmp(m, "two_pass") == 0 && L->multi)
    return "rows split over launches combine online partials";
  if (strcmp(m, "two_pass") == 0 && L->path != ROW_PATH_STREAM)
    return "statistics over a cached row are already two-pass";
  static const char *const ok[] = {"", "warp_per_row", "block_per_row", "cached_row",
                                   "smem_row", "online", "two_pass", "recip_mul",
                                   "fast_math", "stream_store"};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
    if (strcmp(m, ok[i]) == 0)
      return NULL;
  return "this MODE does not apply to softmax";
}

static int sm_check(json_t *match, const struct knob_set *k, char *why, size_t whylen) {
  long long c[3];
  struct row_layout L;
  sm_canon(match, c);
  if (cg_check_common(k, why, whylen) != 0 || row_layout_resolve(c, k, &L, why, whylen) != 0)
    return -1;
  return row_layout_check(&L, k, sm_mode_refusal(match, k, &L), why, whylen);
}

static char *sm_fragment(json_t *match, const struct knob_set *k, const struct row_layout *L) {
  long long c[3];
  sm_canon(match, c);
  static const char *const paths[] = {"REG", "SMEM", "STREAM"};
  struct cg_buf b = {0};
  cg_define_ll(&b, "OFG_OUTER", c[0]);
  cg_define_ll(&b, "OFG_R", c[1]);
  cg_define_ll(&b, "OFG_INNER", c[2]);
  cg_define_ll(&b, "OFG_CHUNKV", L->chunkv);
  cg_printf(&b, "#define OFG_GROUP %d\n#define OFG_CL %d\n#define OFG_NVT %d\n"
                "#define OFG_PATH_%s 1\n",
            L->cols || L->multi ? k->block : L->group, L->cl, L->nvt, paths[L->path]);
  if (L->cl > 1)
    cg_printf(&b, "#define OFG_CLUSTER __cluster_dims__(%d, 1, 1)\n", L->cl);
  else
    cg_printf(&b, "#define OFG_CLUSTER\n");
  if (sm_online(k, L))
    cg_printf(&b, "#define OFG_ONLINE 1\n");
  if (L->multi)
    cg_printf(&b, "#define OFG_MULTI 1\n");
  if (strcmp(json_string_value(json_object_get(match, "op")), "log_softmax") == 0)
    cg_printf(&b, "#define OFG_LOG_SOFTMAX 1\n");
  return cg_take(&b);
}

static json_t *sm_launch(const char *kernel, long long grid, const struct knob_set *k,
                         long long smem, json_t *args) {
  return json_pack("{s:s, s:[I,i,i], s:[i,i,i], s:I, s:o}", "kernel", kernel, "grid",
                   (json_int_t)(grid < 1 ? 1 : grid), 1, 1, "block", k->block, 1, 1,
                   "shared_bytes", (json_int_t)smem, "args", args);
}

static json_t *sm_plan(json_t *match, const struct knob_set *k, const struct row_layout *L) {
  long long c[3];
  sm_canon(match, c);
  json_t *x = json_object_get(match, "input"), *y = json_object_get(match, "output");
  if (L->cols)
    return json_pack("{s:[], s:[o]}", "buffers", "launches",
                     sm_launch("ofg_softmax_cols", (c[0] * (c[2] / k->vec) + k->block - 1) /
                                                       k->block,
                               k, 0, json_pack("[{s:O}, {s:O}]", "tensor", x, "tensor", y)));
  if (!L->multi)
    return json_pack("{s:[], s:[o]}", "buffers", "launches",
                     sm_launch("ofg_softmax_rows",
                               L->cl > 1 ? c[0] * L->cl : (c[0] + L->rpb - 1) / L->rpb, k,
                               L->smem, json_pack("[{s:O}, {s:O}]", "tensor", x, "tensor", y)));
  long long blocks = c[0] * k->split;
  return json_pack(
      "{s:[{s:s, s:I}, {s:s, s:I}], s:[o, o]}", "buffers", "name", "pm", "bytes",
      (json_int_t)(4 * blocks), "name", "ps", "bytes", (json_int_t)(4 * blocks), "launches",
      sm_launch("ofg_softmax_part", blocks, k, 0,
                json_pack("[{s:O}, {s:s}, {s:s}]", "tensor", x, "buffer", "pm", "buffer",
                          "ps")),
      sm_launch("ofg_softmax_apply", blocks, k, 0,
                json_pack("[{s:O}, {s:s}, {s:s}, {s:O}]", "tensor", x, "buffer", "pm",
                          "buffer", "ps", "tensor", y)));
}

static int sm_generate(json_t *match, const struct knob_set *k, json_t **ret_candidate,
                       char *why, size_t whylen) {
  long long c[3];
  struct row_layout L;
  sm_canon(match, c);
  if (sm_check(match, k, why, whylen) != 0 || row_layout_resolve(c, k, &L, why, whylen) != 0)
    return -1;
  char *frag = sm_fragment(match, k, &L);
  char *src = frag ? cg_row_source("softmax.cu", frag) : NULL;
  int rc = cg_candidate(src, k, src ? sm_plan(match, k, &L) : NULL,
                        "softmax: could not generate the candidate (out of memory)",
                        ret_candidate, why, whylen);
  free(frag);
  free(src);
  return rc;
}

const struct builtin_family builtin_family_softmax = {
    .name = "softmax",
    .match = sm_match,
    .defaults = sm_defaults,
    .check = sm_check,
    .generate = sm_generate,
};
