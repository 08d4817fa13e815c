/* A scripted evaluator for the engine tests: speaks the evaluator protocol
 * (docs/architecture.md, "Evaluator protocol") without a GPU, and evaluates each candidate as its source
 * text says, so a fixture decides the outcome of its step.
 *
 * A candidate's source holds one directive, anywhere in the text:
 *   "SCRIPT correct <ms>"  correct, median time <ms> (a positive number)
 *   "SCRIPT budget <ms>"   the same, its trial passed by the float64 accuracy budget
 *                          ("judged_by" in its record), not element-wise
 *   "SCRIPT budget-robust <ms>"  correct, its robust trial (randn inputs) passed by the
 *                          budget, its trials on the task's own inputs element-wise
 *   "SCRIPT compile"       compile failure, class compile/syntax_error
 *   "SCRIPT wrong"         wrong result, class correctness/mismatch
 *   "SCRIPT crash"         the process aborts (SIGABRT) without a reply
 *   "SCRIPT fail STAGE CLASS MESSAGE"  a failure of that stage and class whose message
 *                          (and, for stage compile, compile log) is the rest of the line
 * Anything else gets an ok:false reply of stage "check", class "check/no_script", except
 * for a task whose name holds "timed": there it is correct in a time its text fixes.
 * A program (a candidate with "program" instead of a source: the reference of step 0,
 * or library steps composed with regions) follows SCRIPTED_EVAL_PROGRAM, a directive
 * of the same form ("correct 2.1" when unset; "wrong" for a task whose name starts with
 * "allfail", so that nothing of it is correct; for a name holding "slowref", 2.6 ms node
 * by node and 2.0 ms for the whole model as one library step; for a name holding
 * "inturn", a program of library steps only also reports eager timed in turn with it, 0.1 ms
 * slower than the program, in "eager", and its speed-up against that), and reports each step's
 * share of the time in "steps_ms", its library steps' in "library_ms" and a graph that
 * was not used. For a name holding "graphok" ("graphslow"), a program of library steps
 * only was captured, and its replay timed 1% (5%) slower than stream order, which it used;
 * for "graphoom", it was not captured for lack of device memory (graph.reason). Those and
 * "graphfail" (no replay timed) have the softmax graph as traced by torch.fx, a 512 KiB
 * input and a copy bandwidth of 2.62144e10 B/s.
 *
 * Environment:
 *   SCRIPTED_EVAL_DELAY_MS=n  sleep n ms before answering every evaluate
 *   SCRIPTED_EVAL_LOG=path    append "<pid> <op>" for every request (and "<pid> start");
 *                             "stderr" writes those lines to stderr
 *
 * A task whose name starts with "convtail" has a Conv2d module, then relu and the add of
 * a [4, 1, 1] bias, on [2, 3, 8, 8] (the pointwise family reads the convolution's output),
 * a copy bandwidth of 2.2e6 B/s (the region's floor: 2320 B, 1.0545 ms), and its programs
 * take 2.4 ms with library steps only, 1.5 ms with a region that reads channels-last (a
 * plan with "channels_last"), 2.0 ms otherwise. One whose name starts with "convgen" is the
 * same with the Conv2d's attributes and parameters (conv.weight [4,3,3,3], conv.bias [4])
 * recorded, so the builtin convolution family writes it; a program running its generated
 * kernel (ofg_conv) takes 1.2 ms, and its convolution step (library or generated) 90% of
 * a program's time. When the name also holds "slowconv", the generated convolution takes
 * 3.0 ms and the copy bandwidth is 2.2e7 B/s (every region far above its floor). When it
 * holds "only", the graph is the convolution alone (x -> conv -> output): one region, the
 * whole task, whose candidates are plain kernels. When it holds "fastcudnn", the copy
 * bandwidth is 1.2e6 B/s: the library convolution (1.8 ms of the first program) runs below
 * its region's floor (3136 B: 2.61 ms), yet the farthest above it of the two regions.
 *
 * The ready line reports a device named "scripted" with the index of --device N, capability
 * 9.0 and 150 GB, like an H200. The profile is fixed: eager 2.0 ms, compile 1.6 ms, floor
 * 1.0 ms, one torch.softmax node (torch.fft.fft when the task's name starts with
 * "exotic").
 * evaluate and profile before a load_task get ok:false (stage "protocol", class
 * "protocol/no_task"), so a supervisor that forgot to reload a restarted process shows. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/conv_tail.h"

static FILE *proto;   /* the protocol stream (the original fd 1) */
static bool loaded;   /* a task was loaded in this process */
static bool exotic;   /* the loaded task's name starts with "exotic": an FFT graph */
static bool plain;    /* it starts with "plain": the real evaluator's softmax graph */
static bool convtail; /* it starts with "convtail": a convolution, then a pointwise tail */
static bool convgen;  /* it starts with "convgen": convtail with the conv's attributes */
static bool slowconv; /* its name holds "slowconv": the generated convolution is slower */
static bool convonly; /* its name holds "only": the convolution is the whole graph */
static bool fastcudnn; /* its name holds "fastcudnn": the library convolution is below its
                          floor */
static bool allfail;  /* it starts with "allfail": its programs are wrong too */
static bool inturn;   /* its name holds "inturn": library-only programs report eager in turn */
static double graph_ratio; /* "graphok" 1.01, "graphslow" 1.05: graph_ms over stream_ms;
                              "graphfail" -1: no replay timed; "graphoom" -2: not captured
                              for lack of memory; else 0 (no traced graph) */
static bool slowref;  /* its name holds "slowref": programs node by node take 2.6 ms, the
                         whole model as one library step 2.0 ms (eager's time) */
static bool timed;    /* its name holds "timed": a source without a SCRIPT directive is
                         correct, in a time its text fixes (source_ms) */

/* A time in [1.50, 2.29] ms that the candidate's source and options fix (FNV-1a), so
 * that a builtin proposer's candidates are correct with distinct, repeatable times. */
static double source_ms(json_t *cand) {
  char *text = json_dumps(cand, JSON_COMPACT | JSON_SORT_KEYS);
  uint64_t h = 1469598103934665603ull;
  for (const char *c = text ? text : ""; *c; c++)
    h = (h ^ (unsigned char)*c) * 1099511628211ull;
  free(text);
  return 1.5 + (double)(h % 80) / 100.0;
}

/* A non-negative integer from the environment, or fallback when unset or malformed. */
static long env_long(const char *name, long fallback) {
  const char *v = getenv(name);
  if (!v || !*v)
    return fallback;
  char *end = NULL;
  errno = 0;
  long n = strtol(v, &end, 10);
  return (errno || *end || n < 0) ? fallback : n;
}

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* Appends "<pid> <what>\n" to SCRIPTED_EVAL_LOG, when set ("stderr": to stderr, which
 * a sandboxed evaluator's server copies into its evaluator log). */
static void log_op(const char *what) {
  const char *path = getenv("SCRIPTED_EVAL_LOG");
  if (path && strcmp(path, "stderr") == 0) {
    fprintf(stderr, "%ld %s\n", (long)getpid(), what);
    fflush(stderr);
    return;
  }
  FILE *f = path ? fopen(path, "a") : NULL;
  if (!f)
    return;
  fprintf(f, "%ld %s\n", (long)getpid(), what);
  fclose(f);
}

/* Writes one JSON value as a protocol line; takes over v. */
static void send_line(json_t *v) {
  char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
  if (text) {
    fprintf(proto, "%s\n", text);
    fflush(proto);
  }
  free(text);
  json_decref(v);
}

/* An ok:false reply (caller sends it). */
static json_t *error_reply(json_int_t id, const char *stage, const char *cls, const char *msg) {
  return json_pack("{s:I, s:b, s:{s:s, s:s, s:s, s:s}, s:b}", "id", id, "ok", 0, "error",
                   "stage", stage, "class", cls, "message", msg, "traceback", "", "fatal", 0);
}

/* The device index from --device N (0 for anything else). */
static long device_index(int argc, char **argv) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], "--device") == 0) {
      char *end = NULL;
      errno = 0;
      long n = strtol(argv[i + 1], &end, 10);
      return (errno || *end || n < 0) ? 0 : n;
    }
  return 0;
}

/* The profile of every task: eager 2.0 ms over one op, torch.softmax, or torch.fft.fft
 * for an "exotic" task (an op no builtin family covers). */
static json_t *profile_result_basic(void) {
  return json_pack(
      "{s:f, s:f, s:f, s:f, s:i, s:i, s:b, s:s, s:n,"
      " s:[{s:s, s:s, s:s, s:[s], s:{}, s:[i,i], s:s}],"
      " s:[{s:s, s:s, s:[i,i], s:i}], s:[], s:[{s:s, s:s, s:[i,i], s:i}]}",
      "eager_ms", 2.0, "compile_ms", 1.6, "floor_ms", 1.0, "impossible_ms", 0.4, "flops", 0,
      "min_bytes", 1048576, "degenerate", 0, "device", "cuda", "timing_skipped_reason",
      "graph", "name", exotic ? "fft" : "softmax", "op", "call_function", "target",
      exotic ? "torch.fft.fft" : "torch.softmax",
      "args", "input:0", "kwargs",
      "shape", 256, 512, "dtype", "float32",
      "inputs", "name", "input:0", "dtype", "float32", "shape", 256, 512, "numel", 131072,
      "params",
      "outputs", "name", "output:0", "dtype", "float32", "shape", 256, 512, "numel", 131072);
}

/* The FX graph the real evaluator reports for torch.softmax(x, dim=-1) on [256, 512]:
 * what the builtin proposer needs to match its softmax family. */
static json_t *softmax_graph(void) {
  return json_pack(
      "[{s:s, s:s, s:s, s:s, s:[], s:{}, s:[i,i], s:s},"
      " {s:s, s:s, s:s, s:[{s:s}], s:{s:i}, s:[i,i], s:s},"
      " {s:s, s:s, s:s, s:[{s:s}], s:{}, s:[i,i], s:s}]",
      "name", "x", "op", "placeholder", "target", "x", "tensor", "input:0", "args", "kwargs",
      "shape", 256, 512, "dtype", "float32",
      "name", "softmax", "op", "call_function", "target", "torch.softmax", "args", "node", "x",
      "kwargs", "dim", -1, "shape", 256, 512, "dtype", "float32",
      "name", "output", "op", "output", "target", "output", "args", "node", "softmax", "kwargs",
      "shape", 256, 512, "dtype", "float32");
}

/* The profile of a "convtail" task: x [2,3,8,8] -> conv (Conv2d) [2,4,6,6] -> relu ->
 * add param b [4,1,1] (caller owns). */
static json_t *convtail_profile(void) {
  json_t *g = conv_tail_graph();
  json_t *p = profile_result_basic();
  json_object_set_new(p, "graph", g);
  json_object_set_new(p, "inputs", json_pack("[{s:s, s:s, s:[i,i,i,i], s:i, s:i}]", "name",
                                             "input:0", "dtype", "float32", "shape", 2, 3, 8,
                                             8, "numel", 384, "bytes", 1536));
  json_object_set_new(p, "params", json_pack("[{s:s, s:s, s:[i,i,i], s:i, s:i}]", "name",
                                             "param:b", "dtype", "float32", "shape", 4, 1, 1,
                                             "numel", 4, "bytes", 16));
  if (convgen) {
    json_t *conv = json_array_get(g, 1);
    json_object_set_new(conv, "attrs",
                        json_pack("{s:i, s:i, s:[i,i], s:[i,i], s:[i,i], s:[i,i], s:[i,i], "
                                  "s:i, s:b, s:s}",
                                  "in_channels", 3, "out_channels", 4, "kernel_size", 3, 3,
                                  "stride", 1, 1, "padding", 0, 0, "dilation", 1, 1,
                                  "output_padding", 0, 0, "groups", 1, "bias", 1,
                                  "padding_mode", "zeros"));
    json_object_set_new(conv, "params", json_pack("[s, s]", "param:conv.weight",
                                                  "param:conv.bias"));
    json_array_append_new(json_object_get(p, "params"),
                          json_pack("{s:s, s:s, s:[i,i,i,i], s:i, s:i}", "name",
                                    "param:conv.weight", "dtype", "float32", "shape", 4, 3, 3,
                                    3, "numel", 108, "bytes", 432));
    json_array_append_new(json_object_get(p, "params"),
                          json_pack("{s:s, s:s, s:[i], s:i, s:i}", "name", "param:conv.bias",
                                    "dtype", "float32", "shape", 4, "numel", 4, "bytes", 16));
  }
  if (convgen && convonly) { /* drop relu, b and add; the output is the convolution's */
    for (size_t i = 4; i >= 2; i--)
      json_array_remove(g, i);
    json_object_set_new(json_array_get(g, 2), "args", json_pack("[{s:s}]", "node", "conv"));
    json_array_remove(json_object_get(p, "params"), 0);
  }
  json_object_set_new(p, "outputs", json_pack("[{s:s, s:s, s:[i,i,i,i], s:i, s:i}]", "name",
                                              "output:0", "dtype", "float32", "shape", 2, 4, 6,
                                              6, "numel", 288, "bytes", 1152));
  json_object_set_new(p, "graph_source", json_string("fx"));
  json_object_set_new(p, "precision", json_string("fp32"));
  json_object_set_new(p, "floor_basis", json_pack("{s:f, s:f}", "copy_bw_Bps",
                                                  slowconv    ? 2.2e7
                                                  : fastcudnn ? 1.2e6
                                                              : 2.2e6,
                                                  "fp32_peak_flops", 6.7e13));
  return p;
}

/* The time of a "convtail" program: 2.4 ms of library steps only, 1.2 ms (slowconv: 3.0)
 * when it runs the generated convolution, 1.5 ms when a region's plan lists channels-last
 * tensors, 2.0 ms otherwise. */
static double convtail_ms(json_t *program) {
  json_t *step;
  size_t i;
  double ms = 2.4;
  json_array_foreach(json_object_get(program, "steps"), i, step) {
    const char *src = json_string_value(json_object_get(step, "source"));
    if (src && strstr(src, "ofg_conv"))
      return slowconv ? 3.0 : 1.2;
  }
  json_array_foreach(json_object_get(program, "steps"), i, step) {
    if (json_object_get(json_object_get(step, "plan"), "channels_last"))
      return 1.5;
    if (json_object_get(step, "source"))
      ms = 2.0;
  }
  return ms;
}

/* The profile of the loaded task (caller owns): a "graphok" or "graphslow" task has the
 * softmax graph as traced by torch.fx. */
static json_t *profile_result(void) {
  if (convtail)
    return convtail_profile();
  if (plain) {
    json_t *p = profile_result_basic();
    json_object_set_new(p, "graph", softmax_graph());
    return p;
  }
  if (graph_ratio != 0) { /* a traced graph, so that the reference's library steps export */
    json_t *p = profile_result_basic();
    json_object_set_new(p, "graph", softmax_graph());
    json_object_set_new(p, "graph_source", json_string("fx"));
    /* copying the 512 KiB input: 2 * 524288 B / 2.62144e10 B/s = 0.04 ms */
    json_object_set_new(json_array_get(json_object_get(p, "inputs"), 0), "bytes",
                        json_integer(524288));
    json_object_set_new(p, "floor_basis", json_pack("{s:f}", "copy_bw_Bps", 2.62144e10));
    return p;
  }
  return profile_result_basic();
}

/* The evaluation result of a failed candidate. */
static json_t *failed_result(const char *stage, const char *cls, const char *message) {
  bool compiled = strcmp(stage, "compile") != 0;
  return json_pack("{s:{s:b, s:f, s:s}, s:b, s:[], s:n, s:n, s:n, s:n,"
                   " s:{s:s, s:s, s:s}}",
                   "compile", "ok", compiled, "ms", 12.5, "log",
                   compiled ? "" : "kernel.cu(3): error: expected a \";\"",
                   "correct", 0, "trials", "checks", "time", "speedup", "floor_fraction",
                   "failure", "stage", stage, "class", cls, "message", message);
}

/* The evaluation result of a correct candidate that runs in ms. */
static json_t *correct_result(double ms) {
  return json_pack("{s:{s:b, s:f, s:s}, s:b, s:[{s:i, s:b, s:f, s:f}],"
                   " s:{s:b, s:b, s:b, s:b}, s:{s:f, s:f, s:i}, s:{s:f, s:f}, s:f, s:n}",
                   "compile", "ok", 1, "ms", 12.5, "log", "", "correct", 1, "trials", "seed", 1,
                   "ok", 1, "max_abs", 1e-7, "max_rel", 1e-7, "checks", "inputs_unchanged", 1,
                   "outputs_written", 1, "repeat_consistent", 1, "above_floor", 1, "time",
                   "median_ms", ms, "mean_ms", ms, "reps", 50, "speedup", "eager", 2.0 / ms,
                   "compile", 1.6 / ms, "floor_fraction", 1.0 / ms, "failure");
}

/* Parses a positive time in ms that ends at whitespace or the end of the text. */
static bool parse_ms(const char *text, double *ret_ms) {
  char *end = NULL;
  errno = 0;
  double ms = strtod(text, &end);
  if (errno || end == text || !(ms > 0) || !isfinite(ms) ||
      (*end && *end != ' ' && *end != '\n' && *end != '\t' && *end != '\r'))
    return false;
  *ret_ms = ms;
  return true;
}

static bool directive_is(const char *d, const char *word) {
  size_t n = strlen(word);
  return strncmp(d, word, n) == 0 && (d[n] == '\0' || d[n] == ' ' || d[n] == '\n' ||
                                      d[n] == '\t' || d[n] == '\r');
}

/* True for the program that runs the whole model as its one library step. */
static bool whole_model(json_t *program) {
  json_t *steps = json_object_get(program, "steps");
  json_t *lib = json_object_get(json_array_get(steps, 0), "library");
  return json_array_size(steps) == 1 && json_is_string(lib) &&
         strcmp(json_string_value(lib), "model") == 0 &&
         !json_object_get(json_array_get(steps, 0), "node");
}

/* True when step runs the convolution: its library step, or the generated ofg_conv. */
static bool conv_step(json_t *step) {
  const char *lib = json_string_value(json_object_get(step, "library"));
  const char *src = json_string_value(json_object_get(step, "source"));
  return (lib && strcmp(lib, "Conv2d") == 0) || (src && strstr(src, "ofg_conv"));
}

/* The share of a program's ms that step (one of steps) reports in "steps_ms": an equal
 * share, except that in a "convgen" program the convolution's step (library or
 * generated) takes 90% (the rest shared equally), so that the search sees it above its
 * floor and compares its generated and library times. */
static double step_ms(json_t *steps, json_t *step, double ms) {
  size_t n = json_array_size(steps), i;
  json_t *s;
  bool has_conv = false;
  json_array_foreach(steps, i, s)
    has_conv = has_conv || conv_step(s);
  if (!convgen || !has_conv || n < 2)
    return ms / (double)n;
  return conv_step(step) ? 0.9 * ms : 0.1 * ms / (double)(n - 1);
}

/* The reply to evaluate: the outcome the candidate's SCRIPT directive asks for. */
static json_t *evaluate(json_t *req, json_int_t id) {
  char timed_directive[32], convtail_directive[32];
  if (!loaded)
    return error_reply(id, "protocol", "protocol/no_task", "evaluate before load_task");
  sleep_ms(env_long("SCRIPTED_EVAL_DELAY_MS", 0));
  json_t *cand = json_object_get(req, "candidate");
  json_t *program = json_object_get(cand, "program");
  const char *source = json_string_value(json_object_get(cand, "source"));
  const char *d = source ? strstr(source, "SCRIPT ") : NULL;
  if (program) {
    d = getenv("SCRIPTED_EVAL_PROGRAM");
    d = allfail ? "wrong" : d && *d ? d : "correct 2.1";
    if (slowref)
      d = whole_model(program) ? "correct 2.0" : "correct 2.6";
    if (convtail) {
      snprintf(convtail_directive, sizeof convtail_directive, "correct %.1f",
               convtail_ms(program));
      d = convtail_directive;
    }
  } else if (!d && convtail && source && strstr(source, "ofg_conv")) {
    d = slowconv ? "correct 3.0" : "correct 1.2";  /* convonly: the generated kernel alone */
  } else if (!d && timed) {
    snprintf(timed_directive, sizeof timed_directive, "correct %.2f", source_ms(cand));
    d = timed_directive;
  } else if (!d) {
    return error_reply(id, "check", "check/no_script", "the source holds no SCRIPT directive");
  } else {
    d += strlen("SCRIPT ");
  }
  double ms = 0;
  json_t *result = NULL;
  if (strncmp(d, "correct ", 8) == 0 && parse_ms(d + 8, &ms)) {
    result = correct_result(ms);
    json_t *steps = json_object_get(program, "steps"), *step;
    size_t n = json_array_size(steps), i, library = 0;
    if (n) {
      json_t *steps_ms = json_array();
      json_array_foreach(steps, i, step) {
        json_array_append_new(steps_ms, json_real(step_ms(steps, step, ms)));
        library += json_object_get(step, "library") != NULL;
      }
      json_object_set_new(result, "steps_ms", steps_ms);
      json_object_set_new(result, "library_ms", json_real(ms * (double)library / (double)n));
      json_object_set_new(result, "graph",
                          json_pack("{s:O, s:b, s:s, s:n}", "mode",
                                    json_object_get(program, "graph"), "captured", 0, "used",
                                    "stream", "reason"));
      if (graph_ratio == -2 && library == n)
        json_object_set_new(result, "graph",
                            json_pack("{s:O, s:b, s:s, s:s}", "mode",
                                      json_object_get(program, "graph"), "captured", 0, "used",
                                      "stream", "reason",
                                      "out of device memory with the graph captured: rerun "
                                      "in stream order"));
      if (graph_ratio > 0 && library == n)
        json_object_set_new(result, "graph",
                            json_pack("{s:O, s:b, s:s, s:n, s:f, s:f}", "mode",
                                      json_object_get(program, "graph"), "captured", 1, "used",
                                      "stream", "reason", "stream_ms", ms, "graph_ms",
                                      ms * graph_ratio));
      if (inturn && library == n) {
        json_object_set_new(result, "eager", json_pack("{s:f, s:f, s:i, s:f}", "median_ms",
                                                       ms + 0.1, "mean_ms", ms + 0.1, "reps",
                                                       50, "rse", 0.004));
        json_object_set_new(json_object_get(result, "speedup"), "eager",
                            json_real((ms + 0.1) / ms));
      }
    }
  } else if (strncmp(d, "budget-robust ", 14) == 0 && parse_ms(d + 14, &ms)) {
    result = correct_result(ms);
    json_object_set_new(result, "robust",
                        json_pack("{s:i, s:b, s:f, s:f, s:s}", "seed", 4, "ok", 1, "max_abs",
                                  3e-3, "max_rel", 2e-2, "judged_by", "float64 accuracy budget"));
  } else if (strncmp(d, "budget ", 7) == 0 && parse_ms(d + 7, &ms)) {
    result = correct_result(ms);
    json_object_set_new(json_array_get(json_object_get(result, "trials"), 0), "judged_by",
                        json_string("float64 accuracy budget"));
  } else if (directive_is(d, "compile")) {
    result = failed_result("compile", "compile/syntax_error",
                           "kernel.cu(3): error: expected a \";\"");
  } else if (directive_is(d, "wrong")) {
    result = failed_result("correctness", "correctness/mismatch",
                           "output:0 differs from the reference (max_abs 0.5)");
  } else if (strncmp(d, "fail ", 5) == 0) {
    char stage[32], cls[96];
    int used = 0;
    if (sscanf(d + 5, "%31s %95s %n", stage, cls, &used) != 2 || used == 0)
      return error_reply(id, "check", "check/no_script", "SCRIPT fail needs STAGE CLASS MESSAGE");
    const char *msg = d + 5 + used;
    size_t len = strcspn(msg, "\n");
    char *message = strndup(msg, len);
    result = failed_result(stage, cls, message ? message : "");
    if (strcmp(stage, "compile") == 0)
      json_object_set_new(json_object_get(result, "compile"), "log",
                          json_string(message ? message : ""));
    free(message);
  } else if (directive_is(d, "crash")) {
    log_op("abort");
    signal(SIGABRT, SIG_DFL);  /* a sanitizer build would otherwise turn it into exit 1 */
    abort();
  } else {
    return error_reply(id, "check", "check/no_script", "unknown SCRIPT directive");
  }
  return json_pack("{s:I, s:b, s:o}", "id", id, "ok", 1, "result", result);
}

/* The reply to one request (caller sends it); *ret_bye is set for shutdown. */
static json_t *answer(json_t *req, bool *ret_bye) {
  const char *op = json_string_value(json_object_get(req, "op"));
  json_int_t id = json_integer_value(json_object_get(req, "id"));
  log_op(op ? op : "?");
  if (!op)
    return error_reply(id, "protocol", "protocol/bad_request", "request without an op");
  if (strcmp(op, "load_task") == 0) {
    const char *name = json_string_value(json_object_get(req, "name"));
    loaded = true;
    exotic = name && strncmp(name, "exotic", 6) == 0;
    plain = name && strncmp(name, "plain", 5) == 0;
    convgen = name && strncmp(name, "convgen", 7) == 0;
    slowconv = name && strstr(name, "slowconv") != NULL;
    convonly = name && strstr(name, "only") != NULL;
    fastcudnn = name && strstr(name, "fastcudnn") != NULL;
    convtail = convgen || (name && strncmp(name, "convtail", 8) == 0);
    allfail = name && strncmp(name, "allfail", 7) == 0;
    slowref = name && strstr(name, "slowref") != NULL;
    inturn = name && strstr(name, "inturn") != NULL;
    graph_ratio = name && strstr(name, "graphok")     ? 1.01
                  : name && strstr(name, "graphslow") ? 1.05
                  : name && strstr(name, "graphfail") ? -1
                  : name && strstr(name, "graphoom")  ? -2
                                                      : 0;
    timed = name && strstr(name, "timed") != NULL;
    return json_pack("{s:I, s:b, s:{s:b, s:{s:[], s:{}}}}", "id", id, "ok", 1, "result",
                     "loaded", 1, "init_inputs", "args", "kwargs");
  }
  if (strcmp(op, "profile") == 0)
    return loaded ? json_pack("{s:I, s:b, s:o}", "id", id, "ok", 1, "result", profile_result())
                  : error_reply(id, "protocol", "protocol/no_task", "profile before load_task");
  if (strcmp(op, "evaluate") == 0)
    return evaluate(req, id);
  if (strcmp(op, "shutdown") == 0) {
    *ret_bye = true;
    return json_pack("{s:I, s:b, s:{s:b}}", "id", id, "ok", 1, "result", "bye", 1);
  }
  return error_reply(id, "protocol", "protocol/unknown_op", op);
}

int main(int argc, char **argv) {
  /* Like the real evaluator: the protocol on a private fd, fd 1 pointed at stderr. */
  int fd = dup(1);
  if (fd < 0 || dup2(2, 1) < 0 || !(proto = fdopen(fd, "w")))
    return 2;
  log_op("start");
  send_line(json_pack("{s:s, s:i, s:{s:s, s:I, s:s, s:I}}", "event", "ready", "pid",
                      (int)getpid(), "device", "name", "scripted", "index",
                      (json_int_t)device_index(argc, argv), "capability", "9.0",
                      "memory_bytes", (json_int_t)150000000000LL));
  char *line = NULL;
  size_t cap = 0;
  bool bye = false;
  while (!bye && getline(&line, &cap, stdin) > 0) {
    json_t *req = json_loads(line, 0, NULL);
    send_line(req ? answer(req, &bye)
                  : error_reply(0, "protocol", "protocol/bad_json", "request is not JSON"));
    json_decref(req);
  }
  free(line);
  fclose(proto);
  return 0;
}
