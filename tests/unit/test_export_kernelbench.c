/* KernelBench export: the C++ launcher against a golden text written by hand, the Python
 * around it, the refusals, and the export of the GPU fixtures (written to
 * $OPFORGE_EXPORT_EMIT_DIR when set, for tests/evaluator/test_export_kernelbench.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "handlers/export_kernelbench.h"

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
    "    return []"; /* no final newline: the export must add one */

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

static void test_file_layout(void **state) {
  (void)state;
  /* A source that needs escaping inside a Python triple-quoted string. */
  json_t *c = candidate("// \"\"\" and \\n stay text\nextern \"C\" __global__ void k_main() {}\n\"",
                        "[\"-DBLOCK=256\",\"-DFAST\",\"--maxrregcount=64\",\"-use_fast_math\"]");
  json_t *profile = load(PROFILE);
  char *text = NULL, err[256] = "";
  int rc = export_kernelbench(REFERENCE, profile, c, &text, err, sizeof err);
  if (rc != 0)
    print_error("export failed: %s\n", err);
  assert_int_equal(rc, 0);
  /* The reference comes first, verbatim, completed by a newline. */
  assert_memory_equal(text, REFERENCE, strlen(REFERENCE));
  assert_int_equal(text[strlen(REFERENCE)], '\n');
  expect_section(text, "_OFG_CUDA_SOURCE = ", "\n# The launcher",
                 "_OFG_CUDA_SOURCE = \"\"\"// The candidate's -D options.\n"
                 "#define BLOCK 256\n#define FAST 1\n"
                 "// \\\"\\\"\" and \\\\n stay text\nextern \"C\" __global__ void k_main() {}\n"
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
  emit("layout", text); /* Python reads the escaped source back: the pytest checks it */
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
  int rc = export_kernelbench(REFERENCE, profile, c, &text, err, sizeof err);
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
  assert_int_equal(export_kernelbench(REFERENCE, profile, c, &text, err, sizeof err), -1);
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

/* y = (x * weight + shift) * alpha and the row maxima of x: parameters, a buffer, a
 * scalar argument, a -D knob the kernel needs, dynamic shared memory above 48 KiB and a
 * tuple return, in one task the GPU check can run. */
static const char AFFINE_REFERENCE[] =
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "\n"
    "class Model(nn.Module):\n"
    "    \"\"\"(x * weight + shift) * alpha, and the maximum of each row of x.\"\"\"\n"
    "\n"
    "    def __init__(self, dim):\n"
    "        super().__init__()\n"
    "        self.weight = nn.Parameter(torch.randn(dim))\n"
    "        self.register_buffer(\"shift\", torch.randn(dim))\n"
    "\n"
    "    def forward(self, x, alpha):\n"
    "        return (x * self.weight + self.shift) * alpha, torch.amax(x, dim=1)\n"
    "\n"
    "\n"
    "rows = 64\n"
    "dim = 16384\n"
    "\n"
    "\n"
    "def get_inputs():\n"
    "    return [torch.randn(rows, dim), 0.5]\n"
    "\n"
    "\n"
    "def get_init_inputs():\n"
    "    return [dim]\n";

/* BLOCK must arrive as 256 through the options: the launch bounds would refuse the launch
 * of 256 threads with the default of 128. */
static const char AFFINE_SOURCE[] =
    "#ifndef BLOCK\n"
    "#define BLOCK 128\n"
    "#endif\n"
    "#define NEG_INF __int_as_float(0xff800000)\n"
    "\n"
    "extern \"C\" __global__ void __launch_bounds__(BLOCK)\n"
    "affine(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,\n"
    "       float alpha, float* __restrict__ y, long long rows, long long dim) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < rows * dim) {\n"
    "    long long c = i % dim;\n"
    "    y[i] = __fmul_rn(__fadd_rn(__fmul_rn(x[i], w[c]), b[c]), alpha);\n"
    "  }\n"
    "}\n"
    "\n"
    "// One block per row, staged in dynamic shared memory (64 KiB for dim 16384).\n"
    "extern \"C\" __global__ void row_max(const float* __restrict__ x, float* __restrict__ partial,\n"
    "                                    int dim) {\n"
    "  extern __shared__ float row[];\n"
    "  const float* xr = x + (long long)blockIdx.x * dim;\n"
    "  for (int j = threadIdx.x; j < dim; j += blockDim.x) row[j] = xr[j];\n"
    "  __syncthreads();\n"
    "  float m = NEG_INF;\n"
    "  for (int j = threadIdx.x; j < dim; j += blockDim.x) m = fmaxf(m, row[j]);\n"
    "  __syncthreads();\n"
    "  row[threadIdx.x] = m;\n"
    "  __syncthreads();\n"
    "  for (int s = blockDim.x / 2; s > 0; s >>= 1) {\n"
    "    if (threadIdx.x < s) row[threadIdx.x] = fmaxf(row[threadIdx.x], row[threadIdx.x + s]);\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (threadIdx.x == 0) partial[blockIdx.x] = row[0];\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void copy_out(const float* __restrict__ partial, float* __restrict__ out,\n"
    "                                     int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) out[i] = partial[i];\n"
    "}\n";

static const char AFFINE_CANDIDATE[] =
    "{\"options\":[\"-DBLOCK=256\"],"
    " \"plan\":{\"buffers\":[{\"name\":\"partials\",\"bytes\":256}],"
    "  \"launches\":["
    "   {\"kernel\":\"affine\",\"grid\":[4096],\"block\":[256],"
    "    \"args\":[{\"tensor\":\"input:0\"},{\"tensor\":\"param:weight\"},{\"tensor\":\"param:shift\"},"
    "              {\"f32\":0.5},{\"tensor\":\"output:0\"},{\"i64\":64},{\"i64\":16384}]},"
    "   {\"kernel\":\"row_max\",\"grid\":[64],\"block\":[1024],\"shared_bytes\":65536,"
    "    \"args\":[{\"tensor\":\"input:0\"},{\"buffer\":\"partials\"},{\"i32\":16384}]},"
    "   {\"kernel\":\"copy_out\",\"grid\":[1],\"block\":[64],"
    "    \"args\":[{\"buffer\":\"partials\"},{\"tensor\":\"output:1\"},{\"i32\":64}]}]}}";

static const char AFFINE_PROFILE[] =
    "{\"inputs\":[{\"name\":\"input:0\",\"dtype\":\"float32\",\"shape\":[64,16384]}],"
    " \"scalar_inputs\":[{\"name\":\"input:1\",\"value\":0.5}],"
    " \"params\":[{\"name\":\"param:weight\",\"dtype\":\"float32\",\"shape\":[16384],"
    "              \"kind\":\"parameter\"},"
    "             {\"name\":\"param:shift\",\"dtype\":\"float32\",\"shape\":[16384],"
    "              \"kind\":\"buffer\"}],"
    " \"outputs\":[{\"name\":\"output:0\",\"dtype\":\"float32\",\"shape\":[64,16384]},"
    "              {\"name\":\"output:1\",\"dtype\":\"float32\",\"shape\":[64]}],"
    " \"graph_source\":\"fx\","
    " \"graph\":[{\"name\":\"output\",\"op\":\"output\","
    "             \"args\":[[{\"node\":\"mul_1\"},{\"node\":\"amax\"}]]}]}";

/* The KernelBench tasks of tests/gpu/kernels, with the profile the evaluator gives them. */
static const struct kb_fixture {
  const char *name, *task, *kernel;
  const char *profile;
} KB_FIXTURES[] = {
  {"relu", "level1/19_ReLU.py", "relu",
   "{\"inputs\":[{\"name\":\"input:0\",\"dtype\":\"float32\",\"shape\":[4096,393216]}],"
   "\"params\":[],\"outputs\":[{\"name\":\"output:0\",\"dtype\":\"float32\","
   "\"shape\":[4096,393216]}],\"graph\":null}"},
  {"softmax", "level1/23_Softmax.py", "softmax",
   "{\"inputs\":[{\"name\":\"input:0\",\"dtype\":\"float32\",\"shape\":[4096,393216]}],"
   "\"params\":[],\"outputs\":[{\"name\":\"output:0\",\"dtype\":\"float32\","
   "\"shape\":[4096,393216]}],\"graph\":null}"},
  {"sgemm", "level1/1_Square_matrix_multiplication_.py", "sgemm",
   "{\"inputs\":[{\"name\":\"input:0\",\"dtype\":\"float32\",\"shape\":[4096,4096]},"
   "{\"name\":\"input:1\",\"dtype\":\"float32\",\"shape\":[4096,4096]}],"
   "\"params\":[],\"outputs\":[{\"name\":\"output:0\",\"dtype\":\"float32\","
   "\"shape\":[4096,4096]}],\"graph\":null}"},
};

/* Exports one fixture, checks it, and writes it to $OPFORGE_EXPORT_EMIT_DIR/<name>.py. */
static void export_fixture(const char *name, const char *reference, json_t *profile,
                           json_t *cand) {
  char *text = NULL, err[256] = "";
  int rc = export_kernelbench(reference, profile, cand, &text, err, sizeof err);
  if (rc != 0)
    print_error("%s: %s\n", name, err);
  assert_int_equal(rc, 0);
  assert_memory_equal(text, reference, strlen(reference));
  assert_non_null(strstr(text, "class ModelNew(torch.nn.Module):"));
  emit(name, text);
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

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_launcher_matches_golden),
    cmocka_unit_test(test_file_layout),
    cmocka_unit_test(test_return_structure),
    cmocka_unit_test(test_refusals),
    cmocka_unit_test(test_gpu_fixtures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
