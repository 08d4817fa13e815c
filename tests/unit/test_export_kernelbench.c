/* KernelBench export: the C++ launcher against a golden text written by hand, the Python
 * around it, programs (steps, regions' files, renamed kernels), the refusals, KernelBench's
 * strict static checks, and the export of the GPU fixtures (written with their references
 * to $OPFORGE_EXPORT_EMIT_DIR when set, for tests/evaluator/test_export_kernelbench.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <regex.h>

#include "handlers/export_internal.h"
#include "handlers/export_kernelbench.h"
#include "tests/unit/export_fixtures.h"

/* Six tensors of every kind, with a scalar argument between the inputs (input:1), an
 * int64 input, a float16 buffer with a dotted key, and two outputs. */
static const char PROFILE[] =
    "{\"inputs\":[{\"name\":\"input:0\",\"dtype\":\"float32\",\"shape\":[8,32]},"
    "             {\"name\":\"input:2\",\"dtype\":\"int64\",\"shape\":[8]}],"
    " \"scalar_inputs\":[{\"name\":\"input:1\",\"value\":0.5}],"
    " \"params\":[{\"name\":\"param:weight\",\"dtype\":\"float32\",\"shape\":[32],"
    "              \"kind\":\"parameter\"},"
    "             {\"name\":\"param:norm.running_mean\",\"dtype\":\"float16\",\"shape\":[32],"
    "              \"kind\":\"buffer\"}],"
    " \"outputs\":[{\"name\":\"output:0\",\"dtype\":\"float32\",\"shape\":[8,32]},"
    "              {\"name\":\"output:1\",\"dtype\":\"float32\",\"shape\":[8]}],"
    " \"graph_source\":\"fx\","
    " \"graph\":[{\"name\":\"x\",\"op\":\"placeholder\"},"
    "            {\"name\":\"output\",\"op\":\"output\","
    "             \"args\":[[{\"node\":\"mul\"},[{\"node\":\"amax\"}]]]}]}";

/* Three launches: dynamic shared memory above the 48 KiB default (opt-in), literals of
 * every kind and edge values, a buffer, and a kernel without arguments at exactly 48 KiB
 * (no opt-in). */
static const char PLAN[] =
    "{\"buffers\":[{\"name\":\"partials\",\"bytes\":4096}],"
    " \"launches\":["
    "  {\"kernel\":\"k_main\",\"grid\":[8],\"block\":[256,1,1],\"shared_bytes\":65536,"
    "   \"args\":[{\"tensor\":\"input:0\"},{\"tensor\":\"param:weight\"},{\"tensor\":\"output:0\"},"
    "             {\"buffer\":\"partials\"},{\"f32\":0.5},{\"i32\":-7},{\"i64\":256}]},"
    "  {\"kernel\":\"k_tail\",\"grid\":[1,2,3],\"block\":[32],"
    "   \"args\":[{\"buffer\":\"partials\"},{\"tensor\":\"input:2\"},{\"tensor\":\"output:1\"},"
    "             {\"f64\":1e-5},{\"i32\":-2147483648},{\"f32\":1}]},"
    "  {\"kernel\":\"k_empty\",\"grid\":[1],\"block\":[1],\"shared_bytes\":49152,\"args\":[]}]}";

/* What the launcher must be, line by line (written by hand from the plan above). */
static const char GOLDEN_LAUNCHER[] =
    "// opforge launcher: tensors are the profile's inputs, then its params, then its\n"
    "// outputs, each in profile order; launches run in plan order on stream.\n"
    "void ofg_launch(std::vector<torch::Tensor> tensors, int64_t stream) {\n"
    "  TORCH_CHECK(tensors.size() == 6, \"ofg_launch: expected 6 tensors, got \", tensors.size());\n"
    "  cudaStream_t ofg_stream = reinterpret_cast<cudaStream_t>(stream);\n"
    "  cudaError_t ofg_err;\n"
    "  float* ofg_t0 = tensors[0].data_ptr<float>();  // input:0\n"
    "  long long* ofg_t1 = reinterpret_cast<long long*>(tensors[1].data_ptr<int64_t>());  // input:2\n"
    "  float* ofg_t2 = tensors[2].data_ptr<float>();  // param:weight\n"
    "  at::Half* ofg_t3 = tensors[3].data_ptr<at::Half>();  // param:norm.running_mean\n"
    "  float* ofg_t4 = tensors[4].data_ptr<float>();  // output:0\n"
    "  float* ofg_t5 = tensors[5].data_ptr<float>();  // output:1\n"
    "  torch::Tensor ofg_buffer0 = torch::zeros({4096}, tensors[0].options().dtype(torch::kUInt8));  // partials\n"
    "  void* ofg_b0 = ofg_buffer0.data_ptr();\n"
    "  {  // launch 0\n"
    "    float ofg_a4 = 0.5f;\n"
    "    int ofg_a5 = -7;\n"
    "    long long ofg_a6 = 256LL;\n"
    "    void* ofg_args[] = {&ofg_t0, &ofg_t2, &ofg_t4, &ofg_b0, &ofg_a4, &ofg_a5, &ofg_a6};\n"
    "    ofg_err = cudaFuncSetAttribute((const void*)k_main, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536);\n"
    "    TORCH_CHECK(ofg_err == cudaSuccess, \"opforge launch 0 (kernel k_main): cannot raise dynamic shared memory to 65536 bytes: \", cudaGetErrorString(ofg_err));\n"
    "    ofg_err = cudaLaunchKernel((const void*)k_main, dim3(8, 1, 1), dim3(256, 1, 1), ofg_args, 65536, ofg_stream);\n"
    "    if (ofg_err == cudaSuccess) ofg_err = cudaGetLastError();\n"
    "    TORCH_CHECK(ofg_err == cudaSuccess, \"opforge launch 0 (kernel k_main) failed: \", cudaGetErrorString(ofg_err));\n"
    "  }\n"
    "  {  // launch 1\n"
    "    double ofg_a3 = 1.0000000000000001e-05;\n"
    "    int ofg_a4 = (-2147483647 - 1);\n"
    "    float ofg_a5 = 1.0f;\n"
    "    void* ofg_args[] = {&ofg_b0, &ofg_t1, &ofg_t5, &ofg_a3, &ofg_a4, &ofg_a5};\n"
    "    ofg_err = cudaLaunchKernel((const void*)k_tail, dim3(1, 2, 3), dim3(32, 1, 1), ofg_args, 0, ofg_stream);\n"
    "    if (ofg_err == cudaSuccess) ofg_err = cudaGetLastError();\n"
    "    TORCH_CHECK(ofg_err == cudaSuccess, \"opforge launch 1 (kernel k_tail) failed: \", cudaGetErrorString(ofg_err));\n"
    "  }\n"
    "  {  // launch 2\n"
    "    void** ofg_args = nullptr;\n"
    "    ofg_err = cudaLaunchKernel((const void*)k_empty, dim3(1, 1, 1), dim3(1, 1, 1), ofg_args, 49152, ofg_stream);\n"
    "    if (ofg_err == cudaSuccess) ofg_err = cudaGetLastError();\n"
    "    TORCH_CHECK(ofg_err == cudaSuccess, \"opforge launch 2 (kernel k_empty) failed: \", cudaGetErrorString(ofg_err));\n"
    "  }\n"
    "}\n";

/* The task of PROFILE, which the export must not repeat. */
static const char REFERENCE[] =
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "class Model(nn.Module):\n"
    "    def forward(self, x, alpha, idx):\n"
    "        return x * alpha, (x.amax(dim=1),)\n"
    "\n"
    "def get_inputs():\n"
    "    return [torch.rand(8, 32), 0.5, torch.arange(8)]\n"
    "\n"
    "def get_init_inputs():\n"
    "    return []\n";

static json_t *load(const char *text) {
  json_error_t jerr;
  json_t *v = json_loads(text, 0, &jerr);
  if (!v)
    print_error("fixture JSON: %s at %d\n", jerr.text, jerr.position);
  assert_non_null(v);
  return v;
}

/* A candidate with the plan above, the given options and source (caller decrefs). */
static json_t *candidate(const char *source, const char *options_json) {
  json_t *c = json_pack("{s:s, s:s, s:s, s:o, s:o}", "id",
                        "0b6c2f4e-1d1a-4c55-9a7e-6f3b2d1c0a99", "task_id",
                        "5d0e8c1b-2a3f-4b6c-8d7e-9f0a1b2c3d4e", "source", source, "options",
                        load(options_json), "plan", load(PLAN));
  assert_non_null(c);
  return c;
}

/* Prints the first line where got and want differ, for a readable failure. */
static void show_first_difference(const char *got, const char *want) {
  size_t line = 1;
  const char *g = got, *w = want;
  while (*g && *g == *w) {
    if (*g == '\n')
      line++;
    g++;
    w++;
  }
  const char *gl = g, *wl = w;
  while (gl > got && gl[-1] != '\n')
    gl--;
  while (wl > want && wl[-1] != '\n')
    wl--;
  print_error("first difference on line %zu:\n  got:  %.*s\n  want: %.*s\n", line,
              (int)strcspn(gl, "\n"), gl, (int)strcspn(wl, "\n"), wl);
}

static void test_launcher_matches_golden(void **state) {
  (void)state;
  json_t *profile = load(PROFILE), *plan = load(PLAN);
  char *text = NULL, err[256] = "";
  int rc = export_kernelbench_launcher(profile, plan, &text, err, sizeof err);
  if (rc != 0)
    print_error("export failed: %s\n", err);
  assert_int_equal(rc, 0);
  if (strcmp(text, GOLDEN_LAUNCHER) != 0)
    show_first_difference(text, GOLDEN_LAUNCHER);
  assert_string_equal(text, GOLDEN_LAUNCHER);
  free(text);
  json_decref(plan);
  json_decref(profile);
}

/* The text between the first occurrence of start and the next occurrence of end after it
 * (a pointer into text), with its length; fails the test when either is absent. */
static const char *section(const char *text, const char *start, const char *end, int *ret_len) {
  const char *a = strstr(text, start);
  if (!a)
    print_error("missing: %s\n", start);
  assert_non_null(a);
  const char *b = strstr(a + strlen(start), end);
  assert_non_null(b);
  *ret_len = (int)(b - a);
  return a;
}

static void expect_section(const char *text, const char *start, const char *end,
                           const char *want) {
  int len;
  const char *got = section(text, start, end, &len);
  if ((size_t)len != strlen(want) || strncmp(got, want, (size_t)len) != 0)
    print_error("section %s:\n  got:  %.*s\n  want: %s\n", start, len, got, want);
  assert_int_equal(len, (int)strlen(want));
  assert_memory_equal(got, want, strlen(want));
}

/* Writes text to $OPFORGE_EXPORT_EMIT_DIR/<name>.py when that variable is set. */
static void emit(const char *name, const char *text) {
  const char *dir = getenv("OPFORGE_EXPORT_EMIT_DIR");
  if (!dir || !*dir)
    return;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s.py", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_int_equal(fputs(text, f) >= 0, 1);
  assert_int_equal(fclose(f), 0);
}

/* Writes text as <name>.py and reference as <name>_reference.py (see emit). */
static void emit_with_reference(const char *name, const char *text, const char *reference) {
  char ref_name[256];
  snprintf(ref_name, sizeof ref_name, "%s_reference", name);
  emit(name, text);
  emit(ref_name, reference);
}

/* Fails unless text holds none of reference's lines that define something. */
static void assert_no_reference(const char *text, const char *reference) {
  static const char *const defining[] = {"class Model(", "def get_inputs(",
                                         "def get_init_inputs("};
  for (size_t i = 0; i < sizeof defining / sizeof defining[0]; i++) {
    if (strstr(reference, defining[i]) && strstr(text, defining[i]))
      print_error("the export repeats the reference's '%s'\n", defining[i]);
    assert_false(strstr(reference, defining[i]) && strstr(text, defining[i]));
  }
}

/* text as KernelBench's static checker reads it (kernel_static_checker._strip_comments):
 * each line cut at its first '#' and then at its first "//". The caller frees it. */
static char *strip_comments(const char *text) {
  char *out = malloc(strlen(text) + 1), *w = out;
  assert_non_null(out);
  for (const char *line = text; *line;) {
    size_t len = strcspn(line, "\n");
    size_t keep = strcspn(line, "#\n");
    const char *slashes = strstr(line, "//");
    if (slashes && (size_t)(slashes - line) < keep)
      keep = (size_t)(slashes - line);
    memcpy(w, line, keep);
    w += keep;
    line += len;
    if (*line == '\n')
      *w++ = *line++;
  }
  *w = '\0';
  return out;
}

/* Fails when text matches one of KernelBench's strict static checks (code_bypass,
 * timing_event_patch, thread_injection, lazy_eval), or lacks what cuda_impl asks for:
 * the patterns of src/kernelbench/kernel_static_checker.py, in POSIX form. */
static void assert_passes_static_check(const char *text) {
  static const char *const forbidden[] = {
    "\\btry\\s*:", "\\bexcept\\s*:", "\\bexcept\\s+\\w+", "\\bpass\\b",
    "torch\\.cuda\\.Event\\.record\\s*=", "torch\\.cuda\\.Event\\.elapsed_time\\s*=",
    "torch\\.cuda\\.synchronize\\s*=", "torch\\.cuda\\.Event\\s*=", "time\\.perf_counter\\s*=",
    "time\\.time\\s*=", "threading\\.Thread\\s*\\(", "import\\s+threading",
    "from\\s+threading\\s+import", "multiprocessing\\.(Process|Pool|Manager|Queue|Pipe)",
    "import\\s+multiprocessing", "concurrent\\.futures", "ThreadPoolExecutor",
    "ProcessPoolExecutor", "_make_subclass", "class\\s+\\w+.*\\(torch\\.Tensor\\)",
    "class\\s+\\w+.*\\(Tensor\\)", "torch\\.Tensor\\.__new__"};
  char *code = strip_comments(text);
  for (size_t i = 0; i < sizeof forbidden / sizeof forbidden[0]; i++) {
    regex_t re;
    regmatch_t m;
    assert_int_equal(regcomp(&re, forbidden[i], REG_EXTENDED | REG_NEWLINE), 0);
    if (regexec(&re, code, 1, &m, 0) == 0)
      print_error("static check: '%s' matches '%.*s'\n", forbidden[i],
                  (int)(m.rm_eo - m.rm_so), code + m.rm_so);
    assert_int_not_equal(regexec(&re, code, 1, &m, 0), 0);
    regfree(&re);
  }
  assert_non_null(strstr(code, "__global__"));
  assert_true(strstr(code, "load_inline") || strstr(code, "cpp_extension"));
  static const char *const features[] = {"threadIdx.", "blockIdx.", "blockDim.", "gridDim.",
                                         "__syncthreads", "__shared__", "__device__", "atomic"};
  bool featured = false;
  for (size_t i = 0; i < sizeof features / sizeof features[0]; i++)
    featured = featured || strstr(code, features[i]) != NULL;
  assert_true(featured);
  free(code);
}

static void test_file_layout(void **state) {
  (void)state;
  /* A source that needs escaping inside a Python triple-quoted string. */
  json_t *c = candidate("// \"\"\" and \\n stay text\nextern \"C\" __global__ void "
                        "k_main(int* y) { y[threadIdx.x] = 0; }\n\"",
                        "[\"-DBLOCK=256\",\"-DFAST\",\"--maxrregcount=64\",\"-use_fast_math\"]");
  json_t *profile = load(PROFILE);
  char *text = NULL, err[256] = "";
  int rc = export_kernelbench(profile, c, &text, err, sizeof err);
  if (rc != 0)
    print_error("export failed: %s\n", err);
  assert_int_equal(rc, 0);
  /* The reference is not repeated: the file is exec'd after it, and says so at import. */
  assert_no_reference(text, REFERENCE);
  assert_true(strncmp(text, "# ---- opforge export ---", 24) == 0);
  assert_non_null(strstr(text, "if \"Model\" not in globals():\n    raise NameError("));
  assert_passes_static_check(text);
  expect_section(text, "_OFG_CUDA_SOURCE = ", "\n# The launcher",
                 "_OFG_CUDA_SOURCE = \"\"\"// The candidate's -D options.\n"
                 "#define BLOCK 256\n#define FAST 1\n"
                 "// \\\"\\\"\" and \\\\n stay text\nextern \"C\" __global__ void "
                 "k_main(int* y) { y[threadIdx.x] = 0; }\n"
                 "\"\n#undef BLOCK\n#undef FAST\n\"\"\"");
  expect_section(text, "_OFG_FLAGS = ", "\n",
                 "_OFG_FLAGS = [\"-O3\", \"-U__CUDA_NO_HALF_OPERATORS__\", "
                 "\"-U__CUDA_NO_HALF_CONVERSIONS__\",");
  expect_section(text, "\"-U__CUDA_NO_BFLOAT16", "\n",
                 "\"-U__CUDA_NO_BFLOAT16_CONVERSIONS__\", \"-U__CUDA_NO_HALF2_OPERATORS__\", "
                 "\"-maxrregcount=64\", \"--use_fast_math\"]");
  expect_section(text, "_OFG_INPUTS = [", "]\n",
                 "_OFG_INPUTS = [\n    (0, torch.float32, (8, 32)),\n"
                 "    (2, torch.int64, (8,)),\n");
  expect_section(text, "_OFG_PARAMS = [", "]\n",
                 "_OFG_PARAMS = [\n    (\"weight\", torch.float32, (32,)),\n"
                 "    (\"norm.running_mean\", torch.float16, (32,)),\n");
  expect_section(text, "_OFG_OUTPUTS = [", "]\n",
                 "_OFG_OUTPUTS = [\n    (torch.float32, (8, 32)),\n    (torch.float32, (8,)),\n");
  expect_section(text, "_OFG_SCALARS = [", "\n_OFG_MODULES",
                 "_OFG_SCALARS = [\n    (1, 0.5),\n]\n_OFG_NARGS = 3");
  /* The return follows Model's structure from the FX graph, nesting included. */
  expect_section(strstr(text, "class ModelNew"), "        return ", "\n",
                 "        return (outputs[0], (outputs[1],))");
  /* The launcher travels inside the file unchanged but for escaping. */
  assert_non_null(strstr(text, "_OFG_LAUNCHER = \"\"\"// opforge launcher"));
  assert_non_null(strstr(text, "# Candidate 0b6c2f4e-1d1a-4c55-9a7e-6f3b2d1c0a99 of task "
                               "5d0e8c1b-2a3f-4b6c-8d7e-9f0a1b2c3d4e.\n"));
  assert_non_null(strstr(text, "class ModelNew(torch.nn.Module):\n"));
  assert_non_null(strstr(text, "        self.ref = Model(*init_inputs)\n"));
  /* Python reads the escaped source back: the pytest checks it */
  emit_with_reference("layout", text, REFERENCE);
  free(text);
  json_decref(profile);
  json_decref(c);
}

/* Exports with the profile changed by edit (a JSON object merged over PROFILE's keys) and
 * returns the line of the return statement (static buffer). */
static const char *return_line(const char *edit) {
  static char line[128];
  json_t *profile = load(PROFILE), *patch = load(edit), *c = candidate("x", "[]");
  json_object_update(profile, patch);
  if (json_array_size(json_object_get(profile, "outputs")) == 1) {
    /* The plan then writes output:0 where it wrote output:1. */
    char plan[sizeof PLAN];
    memcpy(plan, PLAN, sizeof PLAN);
    memcpy(strstr(plan, "output:1"), "output:0", 8);
    json_object_set_new(c, "plan", load(plan));
  }
  char *text = NULL, err[256] = "";
  int rc = export_kernelbench(profile, c, &text, err, sizeof err);
  if (rc != 0)
    print_error("export failed: %s\n", err);
  assert_int_equal(rc, 0);
  const char *r = strstr(strstr(text, "class ModelNew"), "        return ");
  assert_non_null(r);
  snprintf(line, sizeof line, "%.*s", (int)strcspn(r + 15, "\n"), r + 15);
  free(text);
  json_decref(c);
  json_decref(patch);
  json_decref(profile);
  return line;
}

static void test_return_structure(void **state) {
  (void)state;
  /* No graph: a tuple of the outputs (there are two). */
  assert_string_equal(return_line("{\"graph\":null,\"graph_source\":null}"), "tuple(outputs)");
  /* torch.export graphs return a flat tuple always: not trusted. */
  assert_string_equal(return_line("{\"graph_source\":\"export\"}"), "tuple(outputs)");
  /* A graph whose return holds a different number of nodes than there are outputs. */
  assert_string_equal(return_line("{\"graph\":[{\"op\":\"output\",\"args\":[{\"node\":\"a\"}]}]}"),
                      "tuple(outputs)");
  assert_string_equal(return_line("{\"graph\":[{\"op\":\"output\",\"args\":"
                                  "[[{\"node\":\"a\"},{\"node\":\"b\"}]]}]}"),
                      "(outputs[0], outputs[1])");
  /* One output without a graph: the tensor itself. */
  assert_string_equal(return_line("{\"graph\":null,\"outputs\":[{\"name\":\"output:0\","
                                  "\"dtype\":\"float32\",\"shape\":[8,32]}]}"),
                      "outputs[0]");
}

/* Export with PLAN patched by replacing the text from with to; returns the error. */
static const char *refusal(const char *profile_text, const char *from, const char *to,
                           const char *options) {
  static char err[256];
  const char *hit = strstr(PLAN, from);
  assert_non_null(hit);
  char plan_text[sizeof PLAN + 256];
  snprintf(plan_text, sizeof plan_text, "%.*s%s%s", (int)(hit - PLAN), PLAN, to,
           hit + strlen(from));
  json_t *profile = load(profile_text), *c = candidate("x", options);
  json_object_set_new(c, "plan", load(plan_text));
  char *text = NULL;
  err[0] = '\0';
  assert_int_equal(export_kernelbench(profile, c, &text, err, sizeof err), -1);
  assert_null(text);
  json_decref(c);
  json_decref(profile);
  return err;
}

static void test_refusals(void **state) {
  (void)state;
  assert_string_equal(refusal(PROFILE, "\"tensor\":\"param:weight\"", "\"tensor\":\"param:bias\"", "[]"),
                      "launch 0 arg 1: unknown tensor 'param:bias'");
  assert_string_equal(refusal(PROFILE, "{\"buffer\":\"partials\"},{\"tensor\":\"input:2\"}",
                              "{\"buffer\":\"scratch\"},{\"tensor\":\"input:2\"}", "[]"),
                      "launch 1 arg 0: unknown buffer 'scratch'");
  assert_string_equal(refusal(PROFILE, "{\"i32\":-7}", "{\"i32\":2147483648}", "[]"),
                      "launch 0 arg 5: value is not a valid i32");
  assert_string_equal(refusal(PROFILE, "{\"i32\":-7}", "{\"u8\":1}", "[]"),
                      "launch 0 arg 5: unknown argument type 'u8'");
  assert_string_equal(refusal(PROFILE, "\"k_tail\"", "\"k-tail\"", "[]"),
                      "launch 1: kernel must name an extern \"C\" function");
  assert_string_equal(refusal(PROFILE, "\"grid\":[1,2,3]", "\"grid\":[1,0]", "[]"),
                      "launch 1: grid[1] must be an integer from 1 to 2147483647");
  assert_string_equal(refusal(PROFILE, "\"bytes\":4096", "\"bytes\":0", "[]"),
                      "buffer 0: needs a name and bytes > 0");
  assert_string_equal(refusal(PROFILE, "\"k_main\"", "\"k_main\"", "[\"-O3\"]"),
                      "candidate: option 0 ('-O3') is not one the evaluator accepts");
  assert_string_equal(refusal(PROFILE, "\"k_main\"", "\"k_main\"", "[\"-DX=a;b\"]"),
                      "candidate: option 0 ('-DX=a;b') is not -DNAME[=VALUE]");
  char bad_dtype[sizeof PROFILE + 16];
  const char *f16 = strstr(PROFILE, "float16");
  snprintf(bad_dtype, sizeof bad_dtype, "%.*scomplex64%s", (int)(f16 - PROFILE), PROFILE,
           f16 + strlen("float16"));
  assert_string_equal(refusal(bad_dtype, "\"k_main\"", "\"k_main\"", "[]"),
                      "profile: param:norm.running_mean has dtype 'complex64', which the "
                      "export does not support");
  assert_string_equal(refusal("{\"inputs\":[],\"params\":[],\"outputs\":[]}", "\"k_main\"",
                              "\"k_main\"", "[]"),
                      "profile: the task has no output tensor");
}

/* ---- the GPU fixtures -------------------------------------------------------------------- */

/* Reads a whole file (caller frees), or NULL when it cannot. */
static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  char *data = NULL;
  size_t len = 0, cap = 0, n;
  char chunk[65536];
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
    if (len + n + 1 > cap) {
      cap = (len + n + 1) * 2;
      char *grown = realloc(data, cap);
      assert_non_null(grown);
      data = grown;
    }
    memcpy(data + len, chunk, n);
    len += n;
    data[len] = '\0';
  }
  fclose(f);
  return data;
}

/* Exports one fixture, checks it, and writes it to $OPFORGE_EXPORT_EMIT_DIR/<name>.py
 * with its reference beside it. */
static void export_fixture(const char *name, const char *reference, json_t *profile,
                           json_t *cand) {
  char *text = NULL, err[256] = "";
  int rc = export_kernelbench(profile, cand, &text, err, sizeof err);
  if (rc != 0)
    print_error("%s: %s\n", name, err);
  assert_int_equal(rc, 0);
  assert_no_reference(text, reference);
  assert_non_null(strstr(text, "class ModelNew(torch.nn.Module):"));
  assert_passes_static_check(text);
  emit_with_reference(name, text, reference);
  free(text);
}

static void test_gpu_fixtures(void **state) {
  (void)state;
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  char path[4096];
  if (!root) {
    print_message("skipped: OPFORGE_SOURCE_ROOT is not set\n");
    skip();
  }
  json_t *cand = load(AFFINE_CANDIDATE), *profile = load(AFFINE_PROFILE);
  json_object_set_new(cand, "source", json_string(AFFINE_SOURCE));
  export_fixture("affine", AFFINE_REFERENCE, profile, cand);
  json_decref(cand);
  json_decref(profile);
  for (size_t i = 0; i < sizeof KB_FIXTURES / sizeof KB_FIXTURES[0]; i++) {
    const struct kb_fixture *fx = &KB_FIXTURES[i];
    snprintf(path, sizeof path, "%s/../shared/kernelbench/%s", root, fx->task);
    char *reference = read_file(path);
    if (!reference) {
      print_message("skipped: KernelBench task %s not found\n", path);
      skip();
    }
    snprintf(path, sizeof path, "%s/tests/gpu/kernels/%s.cu", root, fx->kernel);
    char *source = read_file(path);
    snprintf(path, sizeof path, "%s/tests/gpu/kernels/%s.plan.json", root, fx->kernel);
    char *plan = read_file(path);
    assert_non_null(source);
    assert_non_null(plan);
    cand = json_pack("{s:s, s:s, s:[], s:o}", "id", fx->name, "source", source, "options",
                     "plan", load(plan));
    profile = load(fx->profile);
    export_fixture(fx->name, reference, profile, cand);
    json_decref(cand);
    json_decref(profile);
    free(reference);
    free(source);
    free(plan);
  }
}

/* ---- programs -------------------------------------------------------------------------- */

/* A program candidate (caller decrefs) with result as its evaluation (JSON text or NULL).
 * Regions without a source get the fixture's of their id: 3 SCALE_ADD_SOURCE, 1
 * REGION_MUL_SOURCE, 2 REGION_ADD_SOURCE. */
static json_t *program_candidate(const char *program, const char *result) {
  json_t *c = json_pack("{s:s, s:s, s:o}", "id", "7e1f3a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",
                        "task_id", "5d0e8c1b-2a3f-4b6c-8d7e-9f0a1b2c3d4e", "program",
                        load(program));
  assert_non_null(c);
  json_t *step;
  size_t i;
  json_array_foreach(json_object_get(json_object_get(c, "program"), "steps"), i, step) {
    json_int_t id = json_integer_value(json_object_get(step, "region"));
    const char *source = id == 3 ? SCALE_ADD_SOURCE : id == 1 ? REGION_MUL_SOURCE
                                                    : REGION_ADD_SOURCE;
    if (json_object_get(step, "region") && !json_object_get(step, "source"))
      json_object_set_new(step, "source", json_string(source));
  }
  if (result)
    json_object_set_new(c, "result", load(result));
  return c;
}

/* The export of program (with result) for profile (caller frees); fails the test on a
 * refusal. */
static char *export_program_text(const char *profile_text, const char *program,
                                 const char *result) {
  json_t *profile = load(profile_text), *c = program_candidate(program, result);
  char *text = NULL, err[256] = "";
  int rc = export_kernelbench(profile, c, &text, err, sizeof err);
  if (rc != 0)
    print_error("export failed: %s\n", err);
  assert_int_equal(rc, 0);
  json_decref(c);
  json_decref(profile);
  return text;
}

static void expect_text(const char *text, const char *want) {
  if (!strstr(text, want))
    print_error("missing from the export:\n%s\n", want);
  assert_non_null(strstr(text, want));
}

static void test_program_layout(void **state) {
  (void)state;
  char *text = export_program_text(PROGRAM_PROFILE_FX, PROGRAM_FX, NULL);
  assert_no_reference(text, PROGRAM_REFERENCE);
  assert_passes_static_check(text);
  /* The steps: library, region 3 (its tensors in order of first use), library. */
  expect_section(text, "_OFG_STEPS = [", "]\n\n",
                 "_OFG_STEPS = [\n"
                 "    (\"library\", \"Conv2d\", \"conv\"),\n"
                 "    (\"region\", \"ofg_r3\", [\n"
                 "        (\"node:conv\", torch.float32, (8, 16, 32, 32), False),\n"
                 "        (\"param:scale\", torch.float32, (16, 1, 1), False),\n"
                 "        (\"node:add\", torch.float32, (8, 16, 32, 32), True),\n"
                 "    ]),\n"
                 "    (\"library\", \"MaxPool2d\", \"pool\"),\n");
  /* Region 3's file: its options as #defines at the top, its kernel renamed. */
  expect_text(text, "_OFG_REGIONS = [\n    (\"r3\", \"\"\"// opforge region 3 (pointwise: mul, "
                    "add). Its -D options:\n#define BLOCK 256\n#define OFFSET 1.0f\n"
                    "#ifndef BLOCK\n");
  expect_text(text, "extern \"C\" __global__ void __launch_bounds__(BLOCK)\nr3_scale_add(");
  expect_text(text, "}\n#undef BLOCK\n#undef OFFSET\n\"\"\", ");
  assert_null(strstr(text, "\nscale_add("));
  expect_text(text, "void ofg_r3(std::vector<torch::Tensor> tensors, int64_t stream) {\n"
                    "  TORCH_CHECK(tensors.size() == 3, \"ofg_r3: expected 3 tensors, got \", "
                    "tensors.size());\n");
  expect_text(text, "cudaLaunchKernel((const void*)r3_scale_add, dim3(512, 1, 1), "
                    "dim3(256, 1, 1), ofg_args, 0, ofg_stream);");
  expect_text(text, "void ofg_r3(std::vector<torch::Tensor> tensors, int64_t stream);\n\n"
                    "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
                    "  m.def(\"ofg_r3\", &ofg_r3, \"region 3's launches, in plan order\");\n}\n");
  expect_text(text, "_OFG_GRAPH_SOURCE = \"fx\"\n_OFG_TRACE = True\n_OFG_CAPTURE = False\n"
                    "_OFG_N_OUTPUTS = 1\n");
  expect_text(text, "_OFG_OUTPUT_NODES = [\"pool\"]\n");
  expect_text(text, "torch.utils.cpp_extension.load(\n");
  expect_text(text, "_OFG_FLAGS = [\"-O3\", ");
  expect_text(text, "def _ofg_pack(outputs):\n    \"\"\"What forward returns, in Model's "
                    "structure.\"\"\"\n    return outputs[0]\n");
  emit_with_reference("program_fx", text, PROGRAM_REFERENCE);
  free(text);
}

static void test_program_graphs(void **state) {
  (void)state;
  /* "auto" captures only when the evaluation kept the CUDA graph. */
  char *text = export_program_text(PROGRAM_PROFILE_EXPORT, PROGRAM_EXPORT,
                                   "{\"graph\":{\"used\":true}}");
  expect_text(text, "_OFG_GRAPH_SOURCE = \"export\"\n_OFG_TRACE = True\n_OFG_CAPTURE = True\n");
  free(text);
  text = export_program_text(PROGRAM_PROFILE_EXPORT, PROGRAM_EXPORT,
                             "{\"graph\":{\"used\":false,\"reason\":\"slower\"}}");
  expect_text(text, "_OFG_CAPTURE = False\n");
  expect_text(text, "_OFG_OUTPUT_NODES = [\"max_pool2d\"]\n");
  expect_text(text, "    (\"library\", \"aten.conv2d.default\", \"conv2d\"),\n");
  expect_text(text, "        (\"node:conv2d\", torch.float32, (8, 16, 32, 32), False),\n");
  /* torch.export graphs return flat tuples: Model's structure is not read from them. */
  expect_text(text, "    return outputs[0]\n");
  assert_passes_static_check(text);
  emit_with_reference("program_export", text, PROGRAM_REFERENCE);
  free(text);
  /* A graph of the evaluator's meta tracer: the runtime traces Model the same way. */
  const char *fx = PROGRAM_PROFILE_FX;
  char meta[sizeof PROGRAM_PROFILE_FX + 8];
  const char *source = strstr(fx, "\"graph_source\":\"fx\"");
  snprintf(meta, sizeof meta, "%.*s\"graph_source\":\"fx_meta\"%s", (int)(source - fx), fx,
           source + strlen("\"graph_source\":\"fx\""));
  text = export_program_text(meta, PROGRAM_FX, NULL);
  expect_text(text, "_OFG_GRAPH_SOURCE = \"fx_meta\"\n_OFG_TRACE = True\n");
  expect_text(text, "    return outputs[0]\n");
  assert_passes_static_check(text);
  emit_with_reference("program_fx_meta", text, PROGRAM_REFERENCE);
  free(text);
  /* The whole model: no trace, no region, and in stream order no kernel: the file says
   * that KernelBench's static checker refuses it. */
  text = export_program_text(PROGRAM_PROFILE_FX, PROGRAM_MODEL, NULL);
  expect_text(text, "_OFG_TRACE = False\n_OFG_CAPTURE = False\n");
  expect_text(text, "_OFG_REGIONS = [\n]\n");
  expect_text(text, "_OFG_STEPS = [\n    (\"model\", \"model\", None),\n]\n");
  expect_text(text, "_OFG_STAGE = None\n");
  assert_null(strstr(text, "# Captured, its outputs"));
  expect_text(text, "# order: it has no kernel of its own, so KernelBench's static checker "
                    "refuses it\n");
  char *code = strip_comments(text);
  assert_null(strstr(code, "__global__"));
  assert_null(strstr(code, "ofg_stage_kernel"));
  free(code);
  emit_with_reference("program_model", text, PROGRAM_REFERENCE);
  free(text);
}

/* The whole model captured as one CUDA graph: its one kernel is the input staging
 * (handlers/export_stage.cu), bound beside no launcher, and the file passes the static
 * checks. */
static void test_program_model_captured(void **state) {
  (void)state;
  char *text = export_program_text(PROGRAM_PROFILE_FX,
                                   "{\"graph\":\"auto\",\"steps\":[{\"library\":\"model\"}]}",
                                   "{\"graph\":{\"used\":\"graph\"}}");
  expect_text(text, "_OFG_TRACE = False\n_OFG_CAPTURE = True\n");
  expect_text(text, "_OFG_REGIONS = [\n]\n");
  expect_text(text, "#include <torch/extension.h>\n\n"
                    "void ofg_stage(std::vector<torch::Tensor> dsts, "
                    "std::vector<torch::Tensor> srcs,\n               int64_t stream);\n\n"
                    "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {\n"
                    "  m.def(\"ofg_stage\", &ofg_stage, \"copies the inputs into the captured "
                    "ones\");\n}\n");
  expect_text(text, "_OFG_STAGE = \"\"\"// opforge input staging of a captured program");
  expect_text(text, "__global__ void __launch_bounds__(kOfgStageThreads) "
                    "ofg_stage_kernel(OfgStageTable table) {\n");
  expect_text(text, "# as one CUDA graph: each call copies its inputs into the captured "
                    "buffers with\n");
  expect_text(text, "# then replays the graph.\n# Captured, its outputs are the graph's own "
                    "buffers, which the next call\n# overwrites (as torch.compile's CUDA "
                    "graphs do): clone an output to keep it.\nimport hashlib\n");
  assert_passes_static_check(text);
  emit_with_reference("program_model_graph", text, PROGRAM_REFERENCE);
  free(text);
}

/* The text of region name's entry in _OFG_REGIONS (static buffer). */
static const char *region_kernels(const char *text, const char *name) {
  static char kernels[4096];
  char head[32];
  snprintf(head, sizeof head, "    (\"%s\", \"\"\"", name);
  int len;
  const char *at = section(text, head, "\"\"\", \"\"\"", &len);
  snprintf(kernels, sizeof kernels, "%.*s", len - (int)strlen(head), at + strlen(head));
  return kernels;
}

static void test_program_two_regions(void **state) {
  (void)state;
  char *text = export_program_text(PROGRAM_PROFILE_FX, PROGRAM_TWO_REGIONS, NULL);
  const char *r1 = region_kernels(text, "r1");
  assert_non_null(strstr(r1, "#define BLOCK 128\n#define STAGE 1\n#if STAGE != 1"));
  assert_non_null(strstr(r1, "__launch_bounds__(BLOCK)\nr1_k(const float*"));
  assert_non_null(strstr(r1, "#undef BLOCK\n#undef STAGE\n"));
  const char *r2 = region_kernels(text, "r2");
  assert_non_null(strstr(r2, "#define BLOCK 256\n#define STAGE 2\n#if STAGE != 2"));
  assert_non_null(strstr(r2, "__launch_bounds__(BLOCK)\nr2_k(const float*"));
  expect_text(text, "cudaLaunchKernel((const void*)r1_k, dim3(1024, 1, 1), dim3(128, 1, 1)");
  expect_text(text, "cudaLaunchKernel((const void*)r2_k, dim3(512, 1, 1), dim3(256, 1, 1)");
  expect_text(text, "  m.def(\"ofg_r1\", &ofg_r1, \"region 1's launches, in plan order\");\n"
                    "  m.def(\"ofg_r2\", &ofg_r2, \"region 2's launches, in plan order\");\n");
  expect_text(text, "_OFG_CAPTURE = True\n");
  /* Captured: the staging function is bound after the launchers. */
  expect_text(text, "  m.def(\"ofg_r2\", &ofg_r2, \"region 2's launches, in plan order\");\n"
                    "  m.def(\"ofg_stage\", &ofg_stage, ");
  assert_passes_static_check(text);
  emit_with_reference("program_two_regions", text, PROGRAM_REFERENCE);
  free(text);
}

/* A model of hundreds of ops (ResNet-101's reference program has over 300 library steps)
 * exports: PROGRAM_PROFILE_FX with 300 ReLUs chained after its pool, every call node a
 * library step (304 steps). */
static void test_program_of_300_library_steps(void **state) {
  (void)state;
  json_t *profile = load(PROGRAM_PROFILE_FX);
  json_t *graph = json_object_get(profile, "graph");
  json_array_remove(graph, json_array_size(graph) - 1);  /* the output node */
  json_t *steps = json_array();
  const char *calls[] = {"conv", "mul", "add", "pool"};
  for (size_t i = 0; i < 4; i++)
    json_array_append_new(steps, json_pack("{s:s, s:s}", "library", "op", "node", calls[i]));
  char prev[16] = "pool", name[16];
  for (int i = 0; i < 300; i++) {
    snprintf(name, sizeof name, "r%d", i);
    json_array_append_new(graph, json_pack("{s:s, s:s, s:s, s:[{s:s}], s:s, s:[i,i,i,i]}",
                                           "name", name, "op", "call_function", "target",
                                           "torch.relu", "args", "node", prev, "dtype",
                                           "float32", "shape", 8, 16, 16, 16));
    json_array_append_new(steps, json_pack("{s:s, s:s}", "library", "torch.relu", "node", name));
    snprintf(prev, sizeof prev, "%s", name);
  }
  json_array_append_new(graph, json_pack("{s:s, s:s, s:s, s:[{s:s}]}", "name", "output", "op",
                                         "output", "target", "output", "args", "node", prev));
  json_t *c = json_pack("{s:s, s:s, s:{s:b, s:o}}", "id", "7e1f3a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",
                        "task_id", "5d0e8c1b-2a3f-4b6c-8d7e-9f0a1b2c3d4e", "program", "graph",
                        0, "steps", steps);
  char *text = NULL, err[256] = "";
  assert_int_equal(export_kernelbench(profile, c, &text, err, sizeof err), 0);
  expect_text(text, "    (\"library\", \"torch.relu\", \"r299\"),\n]\n");
  expect_text(text, "_OFG_OUTPUT_NODES = [\"r299\"]\n");
  free(text);
  json_decref(c);
  json_decref(profile);
}

/* A candidate's export_note (why /best chose it) goes into the head as comment lines
 * after the banner, any byte but printable ASCII as '?'. */
static void test_export_note_in_head(void **state) {
  (void)state;
  json_t *profile = load(PROGRAM_PROFILE_FX), *c = program_candidate(PROGRAM_MODEL, NULL);
  json_object_set_new(c, "export_note", json_string("first line, 2%\nsecond \xc3\xa9 line"));
  char *text = NULL, err[256] = "";
  assert_int_equal(export_kernelbench(profile, c, &text, err, sizeof err), 0);
  expect_text(text, "# Candidate 7e1f3a2b-4c5d-4e6f-8a9b-0c1d2e3f4a5b of task "
                    "5d0e8c1b-2a3f-4b6c-8d7e-9f0a1b2c3d4e.\n# first line, 2%\n"
                    "# second ?? line\n# This file goes with");
  free(text);
  json_decref(c);
  json_decref(profile);
}

/* A program of more regions than ResNet-101's generated programs have (211): PROGRAM_FX
 * with its region step repeated as regions 3 to 302, each one file and launcher. */
static void test_program_of_300_regions(void **state) {
  (void)state;
  json_t *profile = load(PROGRAM_PROFILE_FX), *c = program_candidate(PROGRAM_FX, NULL);
  json_t *steps = json_object_get(json_object_get(c, "program"), "steps");
  const json_t *region = json_array_get(steps, 1);
  for (int id = 4; id <= 302; id++) {
    json_t *copy = json_deep_copy(region);
    json_object_set_new(copy, "region", json_integer(id));
    assert_int_equal(json_array_insert_new(steps, (size_t)id - 2, copy), 0);
  }
  assert_int_equal(json_array_size(steps), 302);
  char *text = NULL, err[256] = "";
  assert_int_equal(export_kernelbench(profile, c, &text, err, sizeof err), 0);
  expect_text(text, "    (\"region\", \"ofg_r302\", [\n");
  expect_text(text, "    (\"r302\", \"\"\"// opforge region 302 (pointwise: mul, add)");
  expect_text(text, "  m.def(\"ofg_r302\", &ofg_r302, \"region 302's launches, in plan "
                    "order\");\n}\n");
  size_t launchers = 0;
  for (const char *at = text; (at = strstr(at, "  m.def(\"ofg_r")); at++)
    launchers++;
  assert_int_equal(launchers, 300);
  free(text);
  json_decref(c);
  json_decref(profile);
}

/* The refusal of PROGRAM_FX with from replaced by to (in the program's text). */
static const char *program_refusal(const char *profile, const char *from, const char *to) {
  static char err[256];
  const char *hit = strstr(PROGRAM_FX, from);
  assert_non_null(hit);
  char program[sizeof PROGRAM_FX + 512];
  snprintf(program, sizeof program, "%.*s%s%s", (int)(hit - PROGRAM_FX), PROGRAM_FX, to,
           hit + strlen(from));
  json_t *p = load(profile), *c = program_candidate(program, NULL);
  char *text = NULL;
  err[0] = '\0';
  assert_int_equal(export_kernelbench(p, c, &text, err, sizeof err), -1);
  assert_null(text);
  json_decref(c);
  json_decref(p);
  return err;
}

static void test_program_refusals(void **state) {
  (void)state;
  const char *fx = PROGRAM_PROFILE_FX;
  assert_string_equal(program_refusal(fx, "\"node\":\"conv\"", "\"node\":\"conv9\""),
                      "program: step 0: node 'conv9' is not in the graph");
  assert_string_equal(program_refusal(fx, "\"node\":\"conv\"", "\"node\":\"x\""),
                      "program: step 0: node 'x' is a placeholder, not a call");
  char untraced[sizeof PROGRAM_PROFILE_FX];
  const char *source = strstr(fx, "\"graph_source\":\"fx\"");
  snprintf(untraced, sizeof untraced, "%.*s\"graph_source\":null%s", (int)(source - fx), fx,
           source + strlen("\"graph_source\":\"fx\""));
  assert_string_equal(program_refusal(untraced, "\"node\":\"conv\"", "\"node\":\"mul\""),
                      "program: step 0 runs a node, but the profile has no traced graph");
  assert_string_equal(program_refusal(fx, "\"region\":3", "\"region\":-1"),
                      "program: step 1: region must be an integer from 0 to 999999");
  assert_string_equal(program_refusal(fx, "\"writes\":[\"node:add\"]",
                                      "\"writes\":[\"node:mul\"]"),
                      "program: step 1 (region 3): writes 'node:mul', which its plan never "
                      "names");
  assert_string_equal(program_refusal(fx, "{\"tensor\":\"node:conv\"}",
                                      "{\"tensor\":\"node:nope\"}"),
                      "program: step 1 (region 3): unknown tensor 'node:nope'");
  assert_string_equal(program_refusal(fx, "\"grid\":[512]", "\"grid\":[0]"),
                      "program: step 1 (region 3): launch 0: grid[0] must be an integer from "
                      "1 to 2147483647");
  assert_string_equal(program_refusal(fx, "\"-DOFFSET=1.0f\"", "\"-O2\""),
                      "program: step 1 (region 3): candidate: option 1 ('-O2') is not one the "
                      "evaluator accepts");
  assert_string_equal(program_refusal(fx, "\"graph\":false", "\"graph\":1"),
                      "program: graph must be true, false or \"auto\"");
  assert_string_equal(program_refusal(fx, "{\"library\":\"MaxPool2d\",\"node\":\"pool\"}",
                                      "{\"oops\":1}"),
                      "program: step 2 is neither a library step nor a region");
  assert_string_equal(
      program_refusal(fx, "{\"library\":\"MaxPool2d\",\"node\":\"pool\"}",
                      "{\"region\":3,\"source\":\"x\",\"plan\":{\"launches\":[]}}"),
      "program: step 2: region 3 appears twice");
  assert_string_equal(
      program_refusal(fx, "{\"library\":\"MaxPool2d\",\"node\":\"pool\"}",
                      "{\"region\":4,\"source\":\"x\",\"options\":[\"-use_fast_math\"],"
                      "\"plan\":{\"launches\":[{\"kernel\":\"k\",\"grid\":[1],\"block\":[1],"
                      "\"args\":[{\"tensor\":\"node:pool\"}]}]}}"),
      "program: regions 3 and 4 ask for different nvcc flags, and one build compiles every "
      "region");
}

static void test_rename_kernels(void **state) {
  (void)state;
  static const char source[] =
      "#define LAUNCHER k1 // k1 in a directive is renamed too\n"
      "#define DECLARE __global__ void not_a_kernel(int x)\n"
      "/* k1 in a comment stays */ const char* s = \"k1\";\n"
      "extern \"C\" __global__ void OFG_BOUNDS __launch_bounds__(BLOCK, 2) k1(float* y) {\n"
      "  float k1x = 1e5f + 0x1e+5; y[0] = k1x;\n"
      "}\n"
      "template <int N> __global__ void\n  k2(float* y) {}\n"
      "extern \"C\" __global__ void k3(float* y) { k2<4><<<1, 1>>>(y); }\n";
  json_t *extra = load("[\"k4\", \"not an identifier\"]");
  char *out = export_rename_kernels(source, "r7_", extra);
  assert_non_null(out);
  assert_string_equal(
      out,
      "#define LAUNCHER r7_k1 // k1 in a directive is renamed too\n"
      "#define DECLARE __global__ void not_a_kernel(int x)\n"
      "/* k1 in a comment stays */ const char* s = \"k1\";\n"
      "extern \"C\" __global__ void OFG_BOUNDS __launch_bounds__(BLOCK, 2) r7_k1(float* y) {\n"
      "  float k1x = 1e5f + 0x1e+5; y[0] = k1x;\n"
      "}\n"
      "template <int N> __global__ void\n  r7_k2(float* y) {}\n"
      "extern \"C\" __global__ void r7_k3(float* y) { r7_k2<4><<<1, 1>>>(y); }\n");
  free(out);
  json_decref(extra);
}

static void test_library_steps(void **state) {
  (void)state;
  char list[64];
  json_t *c = program_candidate(PROGRAM_FX, NULL);
  assert_int_equal(export_library_steps(c, list, sizeof list), 2);
  assert_string_equal(list, "Conv2d conv, MaxPool2d pool");
  assert_int_equal(export_library_steps(c, list, 20), 2);
  assert_string_equal(list, "Conv2d conv, ...");
  json_decref(c);
  c = program_candidate(PROGRAM_MODEL, NULL);
  assert_int_equal(export_library_steps(c, list, sizeof list), 1);
  assert_string_equal(list, "model");
  json_decref(c);
  c = candidate("x", "[]");
  assert_int_equal(export_library_steps(c, list, sizeof list), 0);
  assert_string_equal(list, "");
  json_decref(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_launcher_matches_golden),
    cmocka_unit_test(test_file_layout),
    cmocka_unit_test(test_return_structure),
    cmocka_unit_test(test_refusals),
    cmocka_unit_test(test_gpu_fixtures),
    cmocka_unit_test(test_program_layout),
    cmocka_unit_test(test_program_graphs),
    cmocka_unit_test(test_program_two_regions),
    cmocka_unit_test(test_program_model_captured),
    cmocka_unit_test(test_program_of_300_regions),
    cmocka_unit_test(test_export_note_in_head),
    cmocka_unit_test(test_program_refusals),
    cmocka_unit_test(test_rename_kernels),
    cmocka_unit_test(test_library_steps),
    cmocka_unit_test(test_program_of_300_library_steps),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
