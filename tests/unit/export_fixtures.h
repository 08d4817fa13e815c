/* Fixtures of tests/unit/test_export_kernelbench.c that the GPU check can run: tasks
 * (reference, profile) with single-kernel candidates and programs. Kept apart from the
 * tests because they are long literal texts. */
#ifndef OPFORGE_TESTS_UNIT_EXPORT_FIXTURES_H
#define OPFORGE_TESTS_UNIT_EXPORT_FIXTURES_H

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


/* ---- programs ------------------------------------------------------------------------- */

/* conv (a library step), then (x * scale) + 1 (a region), then max pooling (a library
 * step): the program of docs/architecture.md in one small task. */
static const char PROGRAM_REFERENCE[] =
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "\n"
    "class Model(nn.Module):\n"
    "    def __init__(self, channels, scale):\n"
    "        super().__init__()\n"
    "        self.conv = nn.Conv2d(3, channels, 3)\n"
    "        self.scale = nn.Parameter(torch.randn(channels, 1, 1) * scale)\n"
    "        self.pool = nn.MaxPool2d(2)\n"
    "\n"
    "    def forward(self, x):\n"
    "        y = self.conv(x)\n"
    "        y = y * self.scale + 1.0\n"
    "        return self.pool(y)\n"
    "\n"
    "\n"
    "def get_inputs():\n"
    "    return [torch.randn(8, 3, 34, 34)]\n"
    "\n"
    "\n"
    "def get_init_inputs():\n"
    "    return [16, 0.5]\n";

#define PROGRAM_TENSORS                                                                     \
  "\"inputs\":[{\"name\":\"input:0\",\"dtype\":\"float32\",\"shape\":[8,3,34,34]}],"         \
  "\"scalar_inputs\":[],"                                                                   \
  "\"params\":[{\"name\":\"param:conv.weight\",\"dtype\":\"float32\",\"shape\":[16,3,3,3]}," \
  "{\"name\":\"param:conv.bias\",\"dtype\":\"float32\",\"shape\":[16]},"                    \
  "{\"name\":\"param:scale\",\"dtype\":\"float32\",\"shape\":[16,1,1]}],"                   \
  "\"outputs\":[{\"name\":\"output:0\",\"dtype\":\"float32\",\"shape\":[8,16,16,16]}],"

#define PROGRAM_NODE(name, op, target, shape)                                                \
  "{\"name\":\"" name "\",\"op\":\"" op "\",\"target\":\"" target                            \
  "\",\"dtype\":\"float32\",\"shape\":" shape "}"

/* The profile as the evaluator writes it for torch.fx.symbolic_trace (fields the export
 * does not read left out). */
static const char PROGRAM_PROFILE_FX[] =
    "{" PROGRAM_TENSORS "\"graph_source\":\"fx\",\"graph\":["
    PROGRAM_NODE("x", "placeholder", "x", "[8,3,34,34]") ","
    PROGRAM_NODE("conv", "call_module", "Conv2d", "[8,16,32,32]") ","
    PROGRAM_NODE("scale", "get_attr", "scale", "[16,1,1]") ","
    PROGRAM_NODE("mul", "call_function", "operator.mul", "[8,16,32,32]") ","
    PROGRAM_NODE("add", "call_function", "operator.add", "[8,16,32,32]") ","
    PROGRAM_NODE("pool", "call_module", "MaxPool2d", "[8,16,16,16]") ","
    "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\",\"args\":[{\"node\":\"pool\"}]}]}";

/* The same task as torch.export.export traces it. */
static const char PROGRAM_PROFILE_EXPORT[] =
    "{" PROGRAM_TENSORS "\"graph_source\":\"export\",\"graph\":["
    PROGRAM_NODE("p_scale", "placeholder", "p_scale", "[16,1,1]") ","
    PROGRAM_NODE("p_conv_weight", "placeholder", "p_conv_weight", "[16,3,3,3]") ","
    PROGRAM_NODE("p_conv_bias", "placeholder", "p_conv_bias", "[16]") ","
    PROGRAM_NODE("x", "placeholder", "x", "[8,3,34,34]") ","
    PROGRAM_NODE("conv2d", "call_function", "aten.conv2d.default", "[8,16,32,32]") ","
    PROGRAM_NODE("mul", "call_function", "aten.mul.Tensor", "[8,16,32,32]") ","
    PROGRAM_NODE("add", "call_function", "aten.add.Tensor", "[8,16,32,32]") ","
    PROGRAM_NODE("max_pool2d", "call_function", "aten.max_pool2d.default", "[8,16,16,16]") ","
    "{\"name\":\"output\",\"op\":\"output\",\"target\":\"output\","
    "\"args\":[[{\"node\":\"max_pool2d\"}]]}]}";

/* (x * s[channel]) + OFFSET, each rounded as eager rounds it (no FMA contraction). */
static const char SCALE_ADD_SOURCE[] =
    "#ifndef BLOCK\n"
    "#define BLOCK 128\n"
    "#endif\n"
    "// One thread per element of [8, 16, 32, 32].\n"
    "extern \"C\" __global__ void __launch_bounds__(BLOCK)\n"
    "scale_add(const float* __restrict__ x, const float* __restrict__ s, float* __restrict__ y,\n"
    "          long long n, int hw, int c) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = __fadd_rn(__fmul_rn(x[i], s[(i / hw) % c]), OFFSET);\n"
    "}\n";

#define SCALE_ADD_ARGS(in, out)                                                              \
  "\"args\":[{\"tensor\":\"" in "\"},{\"tensor\":\"param:scale\"},{\"tensor\":\"" out "\"},"   \
  "{\"i64\":131072},{\"i32\":1024},{\"i32\":16}]"

/* The three steps over the fx graph: library, region 3, library; no CUDA graph. */
static const char PROGRAM_FX[] =
    "{\"graph\":false,\"steps\":["
    "{\"library\":\"Conv2d\",\"node\":\"conv\"},"
    "{\"region\":3,\"family\":\"pointwise\",\"nodes\":[\"mul\",\"add\"],"
    "\"options\":[\"-DBLOCK=256\",\"-DOFFSET=1.0f\"],"
    "\"plan\":{\"buffers\":[],\"launches\":[{\"kernel\":\"scale_add\",\"grid\":[512],"
    "\"block\":[256]," SCALE_ADD_ARGS("node:conv", "node:add") "}]},"
    "\"reads\":[\"node:conv\",\"param:scale\"],\"writes\":[\"node:add\"]},"
    "{\"library\":\"MaxPool2d\",\"node\":\"pool\"}]}";

/* The same over the torch.export graph, "auto" (the result says whether it was used). */
static const char PROGRAM_EXPORT[] =
    "{\"graph\":\"auto\",\"steps\":["
    "{\"library\":\"aten.conv2d.default\",\"node\":\"conv2d\"},"
    "{\"region\":3,\"family\":\"pointwise\",\"nodes\":[\"mul\",\"add\"],"
    "\"options\":[\"-DBLOCK=256\",\"-DOFFSET=1.0f\"],"
    "\"plan\":{\"launches\":[{\"kernel\":\"scale_add\",\"grid\":[512],\"block\":[256],"
    SCALE_ADD_ARGS("node:conv2d", "node:add") "}]},"
    "\"reads\":[\"node:conv2d\",\"param:scale\"],\"writes\":[\"node:add\"]},"
    "{\"library\":\"aten.max_pool2d.default\",\"node\":\"max_pool2d\"}]}";

/* Two regions that define the same kernel k and the same macros with other values, each
 * refusing to compile with the other's; the whole forward as one CUDA graph. */
static const char REGION_MUL_SOURCE[] =
    "#if STAGE != 1 || BLOCK != 128\n"
    "#error region 1 compiled with the macros of another region\n"
    "#endif\n"
    "extern \"C\" __global__ void __launch_bounds__(BLOCK)\n"
    "k(const float* __restrict__ x, const float* __restrict__ s, float* __restrict__ y,\n"
    "  long long n, int hw, int c) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = __fmul_rn(x[i], s[(i / hw) % c]);\n"
    "}\n";

static const char REGION_ADD_SOURCE[] =
    "#if STAGE != 2 || BLOCK != 256\n"
    "#error region 2 compiled with the macros of another region\n"
    "#endif\n"
    "extern \"C\" __global__ void __launch_bounds__(BLOCK)\n"
    "k(const float* __restrict__ x, float* __restrict__ y, long long n) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = __fadd_rn(x[i], 1.0f);\n"
    "}\n";

static const char PROGRAM_TWO_REGIONS[] =
    "{\"graph\":true,\"steps\":["
    "{\"library\":\"Conv2d\",\"node\":\"conv\"},"
    "{\"region\":1,\"family\":\"pointwise\",\"nodes\":[\"mul\"],"
    "\"options\":[\"-DBLOCK=128\",\"-DSTAGE=1\"],"
    "\"plan\":{\"launches\":[{\"kernel\":\"k\",\"grid\":[1024],\"block\":[128],"
    SCALE_ADD_ARGS("node:conv", "node:mul") "}]},"
    "\"reads\":[\"node:conv\",\"param:scale\"],\"writes\":[\"node:mul\"]},"
    "{\"region\":2,\"family\":\"pointwise\",\"nodes\":[\"add\"],"
    "\"options\":[\"-DBLOCK=256\",\"-DSTAGE=2\"],"
    "\"plan\":{\"launches\":[{\"kernel\":\"k\",\"grid\":[512],\"block\":[256],"
    "\"args\":[{\"tensor\":\"node:mul\"},{\"tensor\":\"node:add\"},{\"i64\":131072}]}]},"
    "\"reads\":[\"node:mul\"],\"writes\":[\"node:add\"]},"
    "{\"library\":\"MaxPool2d\",\"node\":\"pool\"}]}";

/* The program of a task whose graph could not be traced: the whole model. */
static const char PROGRAM_MODEL[] = "{\"steps\":[{\"library\":\"model\"}]}";

#endif
