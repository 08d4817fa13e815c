/* The parts of the LLM prompts that describe a profile or a result in words (see
 * prompt.h): the FX graph, the tensors, the sizes, a candidate's verdict. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/llm/prompt.h"

#define GRAPH_MAX (64u * 1024u)   /* bytes of graph text; the rest is summarized */
#define MESSAGE_MAX 300           /* bytes of a failure message shown */

/* Appends s as one line: control characters become spaces, at most max bytes. */
static void one_line(struct ltext *out, const char *s, size_t max) {
  size_t n = strlen(s);
  bool cut = n > max;
  for (size_t i = 0; i < n && i < max; i++) {
    char c = s[i];
    ltext_add(out, (unsigned char)c < ' ' ? " " : &c, 1);
  }
  if (cut)
    ltext_puts(out, "...");
}

/* A time: microseconds below 0.1 ms, else milliseconds. */
static void time_ms(struct ltext *out, double ms) {
  if (ms < 0.1)
    ltext_printf(out, "%.2f us", ms * 1e3);
  else
    ltext_printf(out, "%.3f ms", ms);
}

static void shape(json_t *shp, struct ltext *out) {
  if (!json_is_array(shp)) {
    ltext_puts(out, "[?]");
    return;
  }
  ltext_puts(out, "[");
  size_t i;
  json_t *d;
  json_array_foreach(shp, i, d) ltext_printf(out, "%s%lld", i ? ", " : "",
                                             (long long)json_integer_value(d));
  ltext_puts(out, "]");
}

/* An FX argument: {"node": name} as the name, lists in brackets, the rest as JSON. */
static void arg(json_t *v, struct ltext *out) {
  const char *node = json_string_value(json_object_get(v, "node"));
  if (node && json_object_size(v) == 1) {
    ltext_puts(out, node);
  } else if (json_is_array(v)) {
    ltext_puts(out, "[");
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) {
      if (i)
        ltext_puts(out, ", ");
      arg(x, out);
    }
    ltext_puts(out, "]");
  } else {
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_SORT_KEYS);
    ltext_puts(out, text ? text : "?");
    free(text);
  }
}

static void call_args(json_t *node, struct ltext *out) {
  size_t i;
  json_t *x;
  bool first = true;
  json_array_foreach(json_object_get(node, "args"), i, x) {
    ltext_puts(out, first ? "" : ", ");
    arg(x, out);
    first = false;
  }
  const char *key;
  json_object_foreach(json_object_get(node, "kwargs"), key, x) {
    ltext_printf(out, "%s%s=", first ? "" : ", ", key);
    arg(x, out);
    first = false;
  }
}

void prompt_graph(json_t *profile, struct ltext *out) {
  json_t *graph = json_object_get(profile, "graph");
  size_t start = out->len, i;
  json_t *node;
  if (!json_is_array(graph) || json_array_size(graph) == 0) {
    ltext_puts(out, "(the graph could not be traced; see the program above)");
    return;
  }
  json_array_foreach(graph, i, node) {
    if (out->len - start > GRAPH_MAX) {
      ltext_printf(out, "... (%zu more nodes)", json_array_size(graph) - i);
      return;
    }
    const char *name = json_string_value(json_object_get(node, "name"));
    const char *op = json_string_value(json_object_get(node, "op"));
    const char *target = json_string_value(json_object_get(node, "target"));
    const char *tensor = json_string_value(json_object_get(node, "tensor"));
    if (!name || !op)
      continue;
    if (i)
      ltext_puts(out, "\n");
    if (strcmp(op, "output") == 0) {
      ltext_puts(out, "return ");
      call_args(node, out);
      continue;
    }
    ltext_printf(out, "%s = ", name);
    if (strcmp(op, "placeholder") == 0 || strcmp(op, "get_attr") == 0) {
      ltext_puts(out, tensor ? tensor : target ? target : "?");
    } else {
      ltext_puts(out, target ? target : "?");
      const char *module = json_string_value(json_object_get(node, "module"));
      if (module)
        ltext_printf(out, "[%s]", module);
      ltext_puts(out, "(");
      call_args(node, out);
      ltext_puts(out, ")");
    }
    ltext_puts(out, "  # ");
    shape(json_object_get(node, "shape"), out);
    const char *dtype = json_string_value(json_object_get(node, "dtype"));
    ltext_printf(out, " %s", dtype ? dtype : "");
    json_t *attrs = json_object_get(node, "attrs");
    if (json_is_object(attrs) && json_object_size(attrs)) {
      ltext_puts(out, ", ");
      arg(attrs, out);
    }
  }
}

static void tensor_lines(json_t *specs, const char *role, struct ltext *out) {
  size_t i;
  json_t *spec;
  json_array_foreach(specs, i, spec) {
    const char *name = json_string_value(json_object_get(spec, "name"));
    const char *dtype = json_string_value(json_object_get(spec, "dtype"));
    ltext_printf(out, "- %s: %s ", name ? name : "?", dtype ? dtype : "?");
    shape(json_object_get(spec, "shape"), out);
    ltext_printf(out, ", %s\n", role);
  }
}

void prompt_tensors(json_t *profile, struct ltext *out) {
  tensor_lines(json_object_get(profile, "inputs"), "an input, read only", out);
  tensor_lines(json_object_get(profile, "params"), "a parameter, read only", out);
  tensor_lines(json_object_get(profile, "outputs"), "an output: write every element", out);
  size_t i;
  json_t *s;
  json_array_foreach(json_object_get(profile, "scalar_inputs"), i, s) {
    const char *name = json_string_value(json_object_get(s, "name"));
    ltext_printf(out, "- %s = ", name ? name : "?");
    arg(json_object_get(s, "value"), out);
    ltext_puts(out, ": a constant argument of the model, not a tensor (use its value)\n");
  }
}

/* The region's floor in ms: the profile's floor_ms, else from its floor basis; 0 when
 * unknown. */
static double floor_ms(json_t *profile) {
  json_t *f = json_object_get(profile, "floor_ms");
  if (json_is_number(f))
    return json_number_value(f);
  json_t *basis = json_object_get(profile, "floor_basis");
  double bw = json_number_value(json_object_get(basis, "copy_bw_Bps"));
  double peak = json_number_value(json_object_get(basis, "fp32_peak_flops"));
  double bytes = json_number_value(json_object_get(profile, "min_bytes"));
  double flops = json_number_value(json_object_get(profile, "flops"));
  double mem = bw > 0 ? bytes / bw * 1e3 : 0, comp = peak > 0 ? flops / peak * 1e3 : 0;
  return mem > comp ? mem : comp;
}

void prompt_facts(json_t *profile, struct ltext *out) {
  json_t *flops = json_object_get(profile, "flops"), *bytes = json_object_get(profile, "min_bytes");
  if (json_is_number(flops) && json_is_number(bytes))
    ltext_printf(out, "Work: %.0f FLOPs and %.0f bytes of minimal memory traffic (every input, "
                 "parameter and output moved once).\n", json_number_value(flops),
                 json_number_value(bytes));
  double fl = floor_ms(profile);
  if (fl > 0) {
    ltext_puts(out, "Floor: ");
    time_ms(out, fl);
    ltext_puts(out, " (the longer of moving the minimal bytes at the measured copy bandwidth "
                    "and doing the FLOPs at the fp32 SIMT peak).\n");
  }
  json_t *eager = json_object_get(profile, "eager_ms");
  if (json_is_number(eager)) {
    ltext_puts(out, "PyTorch eager: ");
    time_ms(out, json_number_value(eager));
    ltext_puts(out, " for the whole task.\n");
  }
  prompt_hardware(profile, out);
}

/* The number at key of obj, or -1 when absent or not a number. */
static double fact(json_t *obj, const char *key) {
  json_t *v = json_object_get(obj, key);
  return json_is_number(v) ? json_number_value(v) : -1;
}

void prompt_hardware(json_t *profile, struct ltext *out) {
  json_t *gpu = json_object_get(profile, "gpu");
  json_t *basis = json_object_get(profile, "floor_basis");
  double sms = fact(gpu, "sm_count") > 0 ? fact(gpu, "sm_count") : fact(profile, "sm_count");
  const char *name = json_string_value(json_object_get(gpu, "name"));
  const char *cap = json_string_value(json_object_get(gpu, "capability"));
  const char *arch = json_string_value(json_object_get(gpu, "arch"));
  if (!name && sms <= 0)
    return;
  ltext_printf(out, "The GPU: %s", name ? name : "a CUDA GPU");
  if (cap)
    ltext_printf(out, ", compute capability %s%s%s%s", cap, arch ? " (" : "", arch ? arch : "",
                 arch ? ")" : "");
  if (sms > 0)
    ltext_printf(out, ", %.0f SMs", sms);
  if (fact(gpu, "l2_bytes") > 0)
    ltext_printf(out, ", %.1f MB of L2", fact(gpu, "l2_bytes") / 1e6);
  if (fact(gpu, "max_shared_optin") > 0)
    ltext_printf(out, ", %.0f KiB of shared memory per block (opt-in)",
                 fact(gpu, "max_shared_optin") / 1024);
  if (fact(gpu, "max_threads_per_block") > 0)
    ltext_printf(out, ", at most %.0f threads per block", fact(gpu, "max_threads_per_block"));
  if (fact(gpu, "hbm_peak_GBps") > 0)
    ltext_printf(out, ", memory bandwidth %.2f TB/s peak", fact(gpu, "hbm_peak_GBps") / 1e3);
  if (fact(basis, "copy_bw_Bps") > 0)
    ltext_printf(out, " (%.2f TB/s measured for a copy)", fact(basis, "copy_bw_Bps") / 1e12);
  if (fact(basis, "fp32_peak_flops") > 0)
    ltext_printf(out, ", fp32 SIMT peak %.1f TFLOP/s", fact(basis, "fp32_peak_flops") / 1e12);
  ltext_puts(out, ".\n");
}

void prompt_verdict(json_t *candidate, struct ltext *out) {
  json_t *result = json_object_get(candidate, "result");
  json_t *failure = json_object_get(result, "failure");
  if (!json_is_object(result)) {
    ltext_puts(out, "not evaluated");
  } else if (json_is_object(failure)) {
    const char *stage = json_string_value(json_object_get(failure, "stage"));
    const char *cls = json_string_value(json_object_get(failure, "class"));
    const char *msg = json_string_value(json_object_get(failure, "message"));
    ltext_printf(out, "failed at %s (%s): ", stage ? stage : "?", cls ? cls : "?");
    one_line(out, msg ? msg : "", MESSAGE_MAX);
  } else if (json_is_true(json_object_get(result, "correct"))) {
    double ms = json_number_value(json_object_get(json_object_get(result, "time"), "median_ms"));
    json_t *eager = json_object_get(json_object_get(result, "speedup"), "eager");
    json_t *ff = json_object_get(result, "floor_fraction");
    ltext_puts(out, "correct, ");
    time_ms(out, ms);
    if (json_is_number(eager))
      ltext_printf(out, ", %.2fx eager", json_number_value(eager));
    if (json_is_number(ff) && isfinite(json_number_value(ff)))
      ltext_printf(out, ", %.0f%% of the floor's speed", 100.0 * json_number_value(ff));
  } else {
    ltext_puts(out, "incorrect");
  }
}

void prompt_origin(json_t *candidate, struct ltext *out) {
  json_t *step = json_object_get(candidate, "step");
  const char *kind = json_string_value(json_object_get(candidate, "step_kind"));
  const char *strategy = json_string_value(json_object_get(candidate, "strategy"));
  if (json_is_integer(step))
    ltext_printf(out, "step %lld", (long long)json_integer_value(step));
  else
    ltext_puts(out, "an earlier step");
  if (kind)
    ltext_printf(out, ", %s step", kind);
  if (strategy && *strategy)
    ltext_printf(out, ", strategy %s", strategy);
}

void prompt_accuracy(const struct proposal_request *req, struct ltext *out) {
  json_t *precision = json_object_get(req->profile, "precision");
  if (!json_is_string(precision))
    precision = json_object_get(req->task_options, "precision");
  json_t *tol = json_object_get(req->profile, "tolerance");
  if (!json_is_object(tol))
    tol = json_object_get(req->task_options, "tolerance");
  const char *p = json_is_string(precision) ? json_string_value(precision) : "fp32";
  double atol = json_number_value(json_object_get(tol, "atol"));
  double rtol = json_number_value(json_object_get(tol, "rtol"));
  if (strcmp(p, "fp32") == 0)
    ltext_printf(out, "the task is fp32. Every output must match PyTorch within atol %g and "
                 "rtol %g, and its error against a float64 reference may be at most 8 times "
                 "the error of PyTorch's own fp32 result: TF32 or half-precision arithmetic and "
                 "--use_fast_math fail, while other summation orders and error-compensated "
                 "tensor-core math (3xTF32) pass.", atol ? atol : 1e-4, rtol ? rtol : 1e-4);
  else
    ltext_printf(out, "the task allows %s arithmetic. Every output must match PyTorch within "
                 "atol %g and rtol %g.", p, atol ? atol : 1e-2, rtol ? rtol : 1e-2);
}
