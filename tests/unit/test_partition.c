/* Unit tests of the partition of task graphs into regions and of program composition
 * (engine/partition.c, engine/program.c), on the FX graphs of every KernelBench task in
 * ../shared/kernelbench (profiled by the real evaluator on the meta device) and on small
 * hand-made graphs. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "../common/conv_tail.h"
#include "builtin_testlib.h"
#include "engine/partition.h"
#include "engine/program.h"
#include "proposers/builtin/builtin.h"
#include "proposers/builtin/propose.h"
#include "proposers/proposer.h"

/* ---- hand-made graphs ---- */

/* A placeholder, call and output node list for y = relu(conv(x)) + 1 style graphs. */
static json_t *node(const char *name, const char *op, const char *target, json_t *args,
                    int d0, int d1) {
  return json_pack("{s:s, s:s, s:s, s:o, s:{}, s:[i,i], s:s}", "name", name, "op", op,
                   "target", target, "args", args, "kwargs", "shape", d0, d1, "dtype",
                   "float32");
}

static json_t *ref(const char *name) {
  return json_pack("{s:s}", "node", name);
}

/* x -> fft (no family) -> relu -> add 1 -> output: the fft stays a library step and the
 * pointwise tail after it fuses into one generated region reading fft's value. */
static json_t *fft_then_pointwise(void) {
  json_t *g = json_array();
  json_t *x = node("x", "placeholder", "x", json_array(), 64, 128);
  json_object_set_new(x, "tensor", json_string("input:0"));
  json_array_append_new(g, x);
  json_array_append_new(g, node("fft", "call_function", "torch.fft.fft", json_pack("[o]", ref("x")), 64, 128));
  json_array_append_new(g, node("relu", "call_function", "torch.relu", json_pack("[o]", ref("fft")), 64, 128));
  json_array_append_new(g, node("add", "call_function", "operator.add", json_pack("[o, f]", ref("relu"), 1.0), 64, 128));
  json_array_append_new(g, node("output", "output", "output", json_pack("[o]", ref("add")), 64, 128));
  return json_pack("{s:o, s:[{s:s, s:s, s:[i,i], s:i, s:i}], s:[], s:[{s:s, s:s, s:[i,i], s:i, "
                   "s:i}], s:s, s:s, s:{s:f, s:f}, s:i, s:s, s:{s:f, s:f}, s:f}",
                   "graph", g, "inputs", "name", "input:0", "dtype", "float32", "shape", 64, 128,
                   "numel", 8192, "bytes", 32768, "params", "outputs", "name", "output:0",
                   "dtype", "float32", "shape", 64, 128, "numel", 8192, "bytes", 32768,
                   "graph_source", "fx", "precision", "fp32", "tolerance", "atol", 1e-4, "rtol",
                   1e-4, "min_bytes", 65536, "name", "fft_tail", "floor_basis", "copy_bw_Bps",
                   4e12, "fp32_peak_flops", 6.7e13, "floor_ms", 1.6e-5);
}

static void test_library_then_fused_tail(void **state) {
  (void)state;
  struct proposer p;
  char why[256];
  assert_int_equal(proposer_open("builtin", NULL, &p, why, sizeof why), 0);
  json_t *profile = fft_then_pointwise();
  struct partition pt;
  assert_int_equal(partition_build(profile, &p, &pt), 0);
  assert_int_equal(pt.n, 2);
  assert_false(pt.regions[0].generated);
  assert_string_equal(json_string_value(json_array_get(pt.regions[0].nodes, 0)), "fft");
  assert_non_null(strstr(pt.regions[0].reason, "fft"));
  assert_true(pt.regions[1].generated);
  assert_string_equal(pt.regions[1].family, "pointwise");
  assert_int_equal(json_array_size(pt.regions[1].nodes), 2);  /* relu and add, fused */
  /* It reads fft's value once, as its input:0, and writes the task's output. */
  assert_string_equal(json_string_value(json_object_get(pt.regions[1].io, "input:0")), "node:fft");
  assert_string_equal(json_string_value(json_object_get(pt.regions[1].io, "output:0")),
                      "output:0");
  /* Minimal traffic: 8192 floats in, 8192 out; floor = 65536 B / 4e12 B/s = 1.6384e-5 ms. */
  assert_float_equal(pt.regions[1].bytes, 65536.0, 0);
  assert_float_equal(program_region_floor(&pt, profile, 1), 65536.0 / 4e12 * 1e3, 1e-15);

  /* The reference program: two library steps (fft, relu) and the add, all library. */
  json_t *reference = program_reference(&pt);
  json_t *steps = json_object_get(json_object_get(reference, "program"), "steps");
  assert_int_equal(json_array_size(steps), 3);
  assert_string_equal(json_string_value(json_object_get(json_array_get(steps, 0), "library")),
                      "torch.fft.fft");
  assert_string_equal(json_string_value(json_object_get(json_object_get(reference, "program"),
                                                        "graph")), "auto");
  /* A program with the region generated: its plan reads node:fft and writes output:0,
   * and reading it back gives the region's candidate in local names again. */
  json_t *local = json_pack("{s:s, s:[s], s:{s:[], s:[{s:s, s:[{s:s}, {s:s}]}]}}", "source",
                            "k", "options", "-DVEC=4", "plan", "buffers", "launches", "kernel",
                            "k", "args", "tensor", "input:0", "tensor", "output:0");
  json_t *choices[2] = {NULL, local};
  json_t *program = program_compose(&pt, choices, "auto");
  steps = json_object_get(json_object_get(program, "program"), "steps");
  assert_int_equal(json_array_size(steps), 2);
  json_t *step = json_array_get(steps, 1);
  json_t *args = json_object_get(json_array_get(json_object_get(json_object_get(step, "plan"),
                                                                "launches"), 0), "args");
  assert_string_equal(json_string_value(json_object_get(json_array_get(args, 0), "tensor")),
                      "node:fft");
  assert_string_equal(json_string_value(json_object_get(json_array_get(args, 1), "tensor")),
                      "output:0");
  assert_int_equal(program_library_steps(program), 1);
  json_t *back[2];
  program_choices(&pt, program, back);
  assert_null(back[0]);
  assert_true(json_equal(back[1], local));
  /* Region times from a result's steps_ms: step 0 is region 0, step 1 region 1. */
  json_t *result = json_pack("{s:[f, f], s:{s:f}}", "steps_ms", 0.5, 0.25, "time", "median_ms", 0.75);
  double ms[2];
  program_region_times(&pt, program, result, ms);
  assert_float_equal(ms[0], 0.5, 0);
  assert_float_equal(ms[1], 0.25, 0);
  program_choices_clear(back, 2);
  json_decref(result);
  json_decref(program);
  json_decref(local);
  json_decref(reference);
  partition_clear(&pt);
  json_decref(profile);
  proposer_clear(&p);
}

/* x -> (fft -> relu) x k -> output: each relu alone is a generated region (a fft, which
 * no family covers, stands between any two). */
static json_t *fft_relu_chain(size_t k) {
  json_t *profile = fft_then_pointwise();
  json_t *g = json_array();
  json_array_append(g, json_array_get(json_object_get(profile, "graph"), 0));  /* x */
  char prev[32] = "x", fft[32], relu[32];
  for (size_t i = 0; i < k; i++) {
    snprintf(fft, sizeof fft, "fft_%zu", i);
    snprintf(relu, sizeof relu, "relu_%zu", i);
    json_array_append_new(g, node(fft, "call_function", "torch.fft.fft", json_pack("[o]", ref(prev)), 64, 128));
    json_array_append_new(g, node(relu, "call_function", "torch.relu", json_pack("[o]", ref(fft)), 64, 128));
    snprintf(prev, sizeof prev, "%s", relu);
  }
  json_array_append_new(g, node("output", "output", "output", json_pack("[o]", ref(prev)), 64, 128));
  json_object_set_new(profile, "graph", g);
  return profile;
}

/* A program has at most PARTITION_MAX_GENERATED generated regions, the GPU library's
 * OFG_MAX_PREPARED_CANDIDATES (1024; ResNet-101 has 107). With a limit of 3, of 5 relus
 * each a region of its own the first 3 are generated, and the last 2 are library steps
 * that say why (the fft steps keep their own reason). */
static void test_generated_regions_are_capped(void **state) {
  (void)state;
  assert_int_equal(PARTITION_MAX_GENERATED, 1024);
  assert_int_equal(PARTITION_MAX_GENERATED, OFG_MAX_PREPARED_CANDIDATES);
  struct proposer p;
  char why[256];
  assert_int_equal(proposer_open("builtin", NULL, &p, why, sizeof why), 0);
  json_t *profile = fft_relu_chain(5);
  struct partition pt;
  assert_int_equal(partition_build_limited(profile, &p, 3, &pt), 0);
  assert_int_equal(pt.n, 10);
  assert_int_equal(partition_generated(&pt), 3);
  for (size_t i = 0; i < pt.n; i++) {
    bool relu = i % 2 == 1;
    assert_int_equal(pt.regions[i].generated, relu && i < 6);
    if (relu && i >= 6)
      assert_non_null(strstr(pt.regions[i].reason, "torch.relu (relu_"));
    if (relu && i >= 6)
      assert_non_null(strstr(pt.regions[i].reason, "the program has 3 generated regions "
                                                   "already, as many as the GPU library "
                                                   "prepares at once"));
    if (!relu)
      assert_non_null(strstr(pt.regions[i].reason, "torch.fft.fft"));
  }
  partition_clear(&pt);
  /* partition_build itself: all 5 generated, far under its limit. */
  assert_int_equal(partition_build(profile, &p, &pt), 0);
  assert_int_equal(partition_generated(&pt), 5);
  partition_clear(&pt);
  json_decref(profile);
  proposer_clear(&p);
}

/* x [2,3,8,8] -> conv (a dense Conv2d module) [2,4,6,6] -> relu -> add b [4,1,1] ->
 * output, as a profile. */
static json_t *conv_then_pointwise(void) {
  json_t *g = conv_tail_graph();
  return json_pack("{s:o, s:[{s:s, s:s, s:[i,i,i,i], s:i, s:i}], s:[{s:s, s:s, s:[i,i,i], "
                   "s:i, s:i}], s:[{s:s, s:s, s:[i,i,i,i], s:i, s:i}], s:s, s:s, s:i, s:s}",
                   "graph", g, "inputs", "name", "input:0", "dtype", "float32", "shape", 2, 3,
                   8, 8, "numel", 384, "bytes", 1536, "params", "name", "param:b", "dtype",
                   "float32", "shape", 4, 1, 1, "numel", 4, "bytes", 16, "outputs", "name",
                   "output:0", "dtype", "float32", "shape", 2, 4, 6, 6, "numel", 288, "bytes",
                   1152, "graph_source", "fx", "precision", "fp32", "sm_count", 132, "name",
                   "conv_tail");
}

/* A value made by a library convolution is marked "from_library_conv" in the sub-profile
 * of the region reading it; the pointwise family's default candidate then names the move
 * channels_last_conv_output as an outside move, its MODE channels_last candidate lists the
 * value and the output as channels-last tensors, and the composed program names the
 * library value in its plan's channels_last list. */
static void test_conv_output_read_channels_last(void **state) {
  (void)state;
  struct proposer p;
  char why[256];
  assert_int_equal(proposer_open("builtin", NULL, &p, why, sizeof why), 0);
  json_t *profile = conv_then_pointwise();
  struct partition pt;
  assert_int_equal(partition_build(profile, &p, &pt), 0);
  assert_int_equal(pt.n, 2);
  /* The hand-made Conv2d node has no attributes: the convolution family refuses it and it
   * is a plain library step (library-first regions: test_every_shared_task). */
  assert_false(pt.regions[0].generated);
  assert_true(pt.regions[1].generated);
  json_t *in = json_array_get(json_object_get(pt.regions[1].profile, "inputs"), 0);
  assert_true(json_is_true(json_object_get(in, "from_library_conv")));
  const struct builtin_family *fam = NULL;
  json_t *match = NULL, *cand = NULL;
  assert_int_equal(builtin_match(pt.regions[1].profile, &fam, &match, why, sizeof why), 0);
  struct knob_set k;
  fam->defaults(match, &k);
  assert_string_equal(k.mode, "");
  assert_int_equal(fam->generate(match, &k, &cand, why, sizeof why), 0);
  json_t *outside = json_object_get(cand, "outside_moves");
  assert_int_equal(json_array_size(outside), 1);
  assert_string_equal(json_string_value(json_array_get(outside, 0)), "channels_last_conv_output");
  assert_null(json_object_get(json_object_get(cand, "plan"), "channels_last"));
  json_decref(cand);
  snprintf(k.mode, sizeof k.mode, "channels_last");
  assert_int_equal(fam->generate(match, &k, &cand, why, sizeof why), 0);
  assert_null(json_object_get(cand, "outside_moves"));
  json_t *choices[2] = {NULL, cand};
  json_t *program = program_compose(&pt, choices, "auto");
  json_t *plan = json_object_get(json_array_get(json_object_get(json_object_get(program,
                                                                                "program"),
                                                                "steps"), 1), "plan");
  json_t *listed = json_object_get(plan, "channels_last");
  assert_int_equal(json_array_size(listed), 2);
  assert_string_equal(json_string_value(json_array_get(listed, 0)), "node:conv");
  assert_string_equal(json_string_value(json_array_get(listed, 1)), "output:0");
  /* The bias [4,1,1] is read at the channel, the innermost dim of (N, H, W, C). */
  assert_non_null(strstr(json_string_value(json_object_get(cand, "source")), "(e % 4)"));
  /* MODE channels_last is refused where no convolution feeds the chain. */
  json_object_del(in, "from_library_conv");
  json_decref(match);
  assert_int_equal(builtin_match(pt.regions[1].profile, &fam, &match, why, sizeof why), 0);
  fam->defaults(match, &k);
  json_t *plain = NULL;
  assert_int_equal(fam->generate(match, &k, &plain, why, sizeof why), 0);
  assert_null(json_object_get(plain, "outside_moves"));
  json_decref(plain);
  snprintf(k.mode, sizeof k.mode, "channels_last");
  json_t *refused = NULL;
  assert_int_equal(fam->generate(match, &k, &refused, why, sizeof why), -1);
  assert_string_equal(why, "MODE channels_last: no full-size input comes from a library "
                           "convolution");
  json_decref(match);
  json_decref(program);
  json_decref(cand);
  partition_clear(&pt);
  json_decref(profile);
  proposer_clear(&p);
}

/* A task without a graph is one library step running the whole model. */
static void test_no_graph_is_the_whole_model(void **state) {
  (void)state;
  struct proposer p;
  char why[256];
  assert_int_equal(proposer_open("builtin", NULL, &p, why, sizeof why), 0);
  json_t *profile = json_pack("{s:n, s:[], s:[]}", "graph", "inputs", "outputs");
  struct partition pt;
  assert_int_equal(partition_build(profile, &p, &pt), 0);
  assert_true(pt.whole_model);
  assert_int_equal(pt.n, 0);
  json_t *reference = program_reference(&pt);
  json_t *steps = json_object_get(json_object_get(reference, "program"), "steps");
  assert_int_equal(json_array_size(steps), 1);
  assert_string_equal(json_string_value(json_object_get(json_array_get(steps, 0), "library")),
                      "model");
  json_t *described = partition_describe(&pt);
  assert_int_equal(json_array_size(described), 1);
  assert_string_equal(json_string_value(json_object_get(json_array_get(described, 0), "kind")),
                      "library");
  json_decref(described);
  json_decref(reference);
  partition_clear(&pt);
  json_decref(profile);
  proposer_clear(&p);
}

/* ---- every shared KernelBench task ---- */

/* Checks the invariants of a partition of profile: every call node in exactly one
 * region, in graph order; library regions one node with a reason; generated regions'
 * sub-profiles supported again; the reference program one library step per call node.
 * Returns the number of generated regions. */
static size_t check_partition(const char *task, json_t *profile, struct proposer *p,
                              struct partition *pt) {
  json_t *calls = json_array(), *n;
  size_t i;
  json_array_foreach(json_object_get(profile, "graph"), i, n) {
    const char *op = json_string_value(json_object_get(n, "op"));
    if (op && strncmp(op, "call_", 5) == 0)
      json_array_append(calls, json_object_get(n, "name"));
  }
  size_t at = 0, generated = 0;
  for (size_t k = 0; k < pt->n; k++) {
    const struct region *r = &pt->regions[k];
    json_t *name;
    json_array_foreach(r->nodes, i, name) {
      if (!json_equal(name, json_array_get(calls, at)))
        fail_msg("%s: region %zu node %s out of graph order", task, k, json_string_value(name));
      at++;
    }
    if (r->generated) {
      const char *family = NULL;
      char why[512];
      if (p->supports(p->self, r->profile, &family, why, sizeof why) != 0)
        fail_msg("%s: region %zu is no longer supported: %s", task, k, why);
      assert_string_equal(family, r->family);
      generated++;
    } else {
      if (json_array_size(r->nodes) != 1 || !r->reason[0])
        fail_msg("%s: library region %zu has %zu nodes, reason '%s'", task, k,
                 json_array_size(r->nodes), r->reason);
    }
  }
  if (!pt->whole_model && at != json_array_size(calls))
    fail_msg("%s: %zu of %zu call nodes are in a region", task, at, json_array_size(calls));
  json_t *reference = program_reference(pt);
  size_t lib = program_library_steps(reference);
  if (lib != (pt->whole_model ? 1 : json_array_size(calls)))
    fail_msg("%s: the reference has %zu library steps for %zu call nodes", task, lib,
             json_array_size(calls));
  json_decref(reference);
  json_decref(calls);
  return generated;
}

/* What some tasks must partition into: the families of their regions in order, "lib"
 * for a library step, "gemm~lib" for a convolution region that starts as its library step,
 * "*" for any number of further regions. */
static const struct {
  const char *task;
  const char *regions;
} expected[] = {
  {"level1/19_ReLU", "pointwise"},
  {"level1/23_Softmax", "softmax"},
  {"level1/1_Square_matrix_multiplication_", "gemm"},
  {"level1/63_conv_standard_2D__square_input__square_kernel", "gemm~lib"},
  {"level1/58_conv_transposed_3D__asymmetric_input__asymmetric_kernel", "gemm~lib"},
  {"level1/82_conv_depthwise_2D_square_input_square_kernel", "pooling"},
  {"level2/12_Gemm_Multiply_LeakyReLU", "gemm"},
  {"level2/1_Conv2D_ReLU_BiasAdd", "gemm~lib pointwise"},
  {"level2/71_Conv2d_Divide_LeakyReLU", "gemm~lib pointwise"},
  {"level2/47_Conv3d_Mish_Tanh", "gemm~lib pointwise"},
  {"level3/1_MLP", "gemm gemm gemm"},
  {"level3/2_ShallowWideMLP", "gemm gemm gemm"},
};

/* level2/1 (conv, relu, add): the convolution region is generated but starts as its library
 * step, says so when described, and the chain after it reads a library convolution's
 * value (from_library_conv), which channels-last outside moves need. */
static void check_library_first_conv(const struct partition *pt) {
  assert_int_equal(pt->n, 2);
  assert_true(pt->regions[0].generated && pt->regions[0].library_first);
  json_t *in = json_array_get(json_object_get(pt->regions[1].profile, "inputs"), 0);
  assert_true(json_is_true(json_object_get(in, "from_library_conv")));
  json_t *described = partition_describe(pt);
  json_t *d0 = json_array_get(described, 0);
  assert_string_equal(json_string_value(json_object_get(d0, "kind")), "generated");
  assert_string_equal(json_string_value(json_object_get(d0, "starts")), "library");
  assert_string_equal(json_string_value(json_object_get(d0, "reason")),
                      "a convolution starts as its library step (cuDNN); the search tries "
                      "generated code when that runs above the region's floor");
  assert_null(json_object_get(json_array_get(described, 1), "starts"));
  json_decref(described);
}

/* Checks pt against an expected[] row when task has one. */
static void check_expected_regions(const char *task, const struct partition *pt) {
  for (size_t e = 0; e < sizeof expected / sizeof expected[0]; e++) {
    if (strcmp(expected[e].task, task) != 0)
      continue;
    char got[512] = "";
    size_t used = 0;
    for (size_t k = 0; k < pt->n && used < sizeof got; k++)
      used += (size_t)snprintf(got + used, sizeof got - used, "%s%s%s", k ? " " : "",
                               pt->regions[k].generated ? pt->regions[k].family : "lib",
                               pt->regions[k].library_first ? "~lib" : "");
    if (strcmp(got, expected[e].regions) != 0)
      fail_msg("%s: regions '%s', expected '%s'", task, got, expected[e].regions);
  }
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The .py files of dir, sorted (caller frees each and the array). */
static char **list_tasks(const char *dir, size_t *ret_n) {
  DIR *d = opendir(dir);
  char **names = NULL;
  size_t n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len > 3 && strcmp(e->d_name + len - 3, ".py") == 0) {
      names = realloc(names, (n + 1) * sizeof *names);
      names[n++] = strndup(e->d_name, len - 3);
    }
  }
  if (d)
    closedir(d);
  if (n)
    qsort(names, n, sizeof *names, by_name);
  *ret_n = n;
  return names;
}

static void test_every_shared_task(void **state) {
  (void)state;
  const char *kb = kernelbench_dir();
  struct evaluator ev;
  if (!kb || !python_path() || !evaluator_start(&ev)) {
    print_message("skipped: needs ../shared/kernelbench and the venv (reason above)\n");
    skip();
  }
  struct proposer p;
  char why[256];
  assert_int_equal(proposer_open("builtin", NULL, &p, why, sizeof why), 0);
  size_t tasks = 0, regions = 0, generated = 0, library = 0;
  for (int level = 1; level <= 3; level++) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/level%d", kb, level);
    size_t n;
    char **names = list_tasks(dir, &n);
    for (size_t i = 0; i < n; i++) {
      char path[1400], task[256];
      snprintf(path, sizeof path, "%s/%s.py", dir, names[i]);
      snprintf(task, sizeof task, "level%d/%s", level, names[i]);
      char *source = read_file(path);
      json_t *profile = source ? evaluator_profile(&ev, names[i], source) : NULL;
      if (!profile)
        fail_msg("%s: no profile", task);
      struct partition pt;
      assert_int_equal(partition_build(profile, &p, &pt), 0);
      size_t g = check_partition(task, profile, &p, &pt);
      check_expected_regions(task, &pt);
      if (strcmp(task, "level2/1_Conv2D_ReLU_BiasAdd") == 0)
        check_library_first_conv(&pt);
      print_message("%-64s %4zu regions, %3zu generated%s\n", task, pt.n, g,
                    pt.whole_model ? " (whole model)" : "");
      tasks++;
      regions += pt.n;
      generated += g;
      library += pt.n - g;
      partition_clear(&pt);
      json_decref(profile);
      free(source);
      free(names[i]);
    }
    free(names);
  }
  print_message("%zu tasks: %zu regions, %zu generated, %zu library steps\n", tasks, regions,
                generated, library);
  assert_int_equal(tasks, 95);
  proposer_clear(&p);
  evaluator_stop(&ev);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_library_then_fused_tail),
    cmocka_unit_test(test_generated_regions_are_capped),
    cmocka_unit_test(test_conv_output_read_channels_last),
    cmocka_unit_test(test_no_graph_is_the_whole_model),
    cmocka_unit_test(test_every_shared_task),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
