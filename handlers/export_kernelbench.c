/* KernelBench export of a single-kernel candidate (source, options, plan): its CUDA
 * source and C++ launcher as strings, compiled by load_inline, and ModelNew around them.
 * export_kernelbench() also hands programs to export_program.c. */
#include "handlers/export_kernelbench.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/export_internal.h"

/* Writes the tensor tables _OFG_INPUTS, _OFG_PARAMS and _OFG_OUTPUTS. */
static void put_tensor_tables(FILE *f, const struct xtensors *ts) {
  static const char *const heads[] = {
      "# (position in forward's arguments, dtype, shape) of each tensor input.\n_OFG_INPUTS = [\n",
      "]\n# (key in Model's state_dict, dtype, shape) of each parameter and buffer.\n"
      "_OFG_PARAMS = [\n",
      "]\n# (dtype, shape) of each output.\n_OFG_OUTPUTS = [\n"};
  for (int kind = TENSOR_INPUT; kind <= TENSOR_OUTPUT; kind++) {
    fputs(heads[kind], f);
    for (size_t i = 0; i < ts->n; i++) {
      const struct xtensor *t = &ts->items[i];
      if (t->kind != (enum export_tensor_kind)kind)
        continue;
      fputs("    (", f);
      if (kind == TENSOR_INPUT)
        fprintf(f, "%ld, ", t->position);
      if (kind == TENSOR_PARAM) {
        export_put_py_string(f, t->name + strlen("param:"), false);
        fputs(", ", f);
      }
      fprintf(f, "%s, ", t->dtype->torch);
      export_put_py_shape(f, t->shape);
      fputs("),\n", f);
    }
  }
  fputs("]\n", f);
}

/* The Python after the tables: load_inline and the argument checks; py_model follows. */
static const char py_body[] =
    "_OFG_MODULES = {}\n"
    "\n"
    "\n"
    "def _ofg_module(device):\n"
    "    \"\"\"The compiled kernels and launcher for device's architecture (sm_90a for\n"
    "    capability 9.0, as the evaluator compiled them), built once per process; the module\n"
    "    name is a hash of sources and flags, so several exports can coexist.\"\"\"\n"
    "    major, minor = torch.cuda.get_device_capability(device)\n"
    "    module = _OFG_MODULES.get((major, minor))\n"
    "    if module is None:\n"
    "        arch = \"%d%d%s\" % (major, minor, \"a\" if major >= 9 else \"\")\n"
    "        flags = _OFG_FLAGS + [\"-gencode\", \"arch=compute_%s,code=sm_%s\" % (arch, arch)]\n"
    "        digest = hashlib.sha256(\"\\0\".join([_OFG_CUDA_SOURCE, _OFG_LAUNCHER] + flags)\n"
    "                                .encode(\"utf-8\")).hexdigest()[:16]\n"
    "        module = torch.utils.cpp_extension.load_inline(\n"
    "            name=\"opforge_\" + digest, cpp_sources=[_OFG_DECLARATION],\n"
    "            cuda_sources=[_OFG_CUDA_SOURCE, _OFG_LAUNCHER], functions=[\"" EXPORT_LAUNCHER_NAME "\"],\n"
    "            extra_cuda_cflags=flags)\n"
    "        _OFG_MODULES[(major, minor)] = module\n"
    "    return module\n"
    "\n"
    "\n"
    "def _ofg_layout(name, shape):\n"
    "    \"\"\"The memory order the kernels address the tensor called name in: channels-last\n"
    "    ((N, H, W, C) or (N, D, H, W, C)) when the plan lists it, else row-major.\"\"\"\n"
    "    if name in _OFG_CHANNELS_LAST and len(shape) == 4:\n"
    "        return torch.channels_last\n"
    "    if name in _OFG_CHANNELS_LAST and len(shape) == 5:\n"
    "        return torch.channels_last_3d\n"
    "    return torch.contiguous_format\n"
    "\n"
    "\n"
    "def _ofg_check(name, tensor, dtype, shape, device):\n"
    "    \"\"\"tensor, dense in the order the kernels address it (_ofg_layout; itself when\n"
    "    already so), once it is checked to be what the kernels were built for: the plan\n"
    "    has its sizes built in.\"\"\"\n"
    "    if (not isinstance(tensor, torch.Tensor) or tensor.dtype != dtype\n"
    "            or tuple(tensor.shape) != shape or tensor.device != device):\n"
    "        got = (\"%s %s on %s\" % (tensor.dtype, tuple(tensor.shape), tensor.device)\n"
    "               if isinstance(tensor, torch.Tensor) else type(tensor).__name__)\n"
    "        raise ValueError(\"ModelNew: %s must be %s %s on %s, as the kernels were built \"\n"
    "                         \"for; got %s\" % (name, dtype, shape, device, got))\n"
    "    return tensor.detach().contiguous(memory_format=_ofg_layout(name, shape))\n"
    "\n"
    "\n";

/* ModelNew, after py_body (one string would pass the length C17 compilers must take). */
static const char py_model[] =
    "class ModelNew(torch.nn.Module):\n"
    "    \"\"\"Drop-in for Model running opforge's kernels; the parameters live in self.ref.\"\"\"\n"
    "\n"
    "    def __init__(self, *init_inputs):\n"
    "        super().__init__()\n"
    "        # First, so that it draws the same random numbers as Model(*init_inputs) would\n"
    "        # under the same seed: the parameters are then equal.\n"
    "        self.ref = Model(*init_inputs)\n"
    "        if torch.cuda.is_available():\n"
    "            _ofg_module(torch.device(\"cuda\", torch.cuda.current_device()))\n"
    "\n"
    "    def forward(self, *inputs):\n"
    "        if len(inputs) != _OFG_NARGS:\n"
    "            raise TypeError(\"ModelNew.forward takes %d arguments, got %d\"\n"
    "                            % (_OFG_NARGS, len(inputs)))\n"
    "        for position, value in _OFG_SCALARS:\n"
    "            if inputs[position] != value:\n"
    "                raise ValueError(\"ModelNew: argument %d must be %r, as the plan has it \"\n"
    "                                 \"built in; got %r\" % (position, value, inputs[position]))\n"
    "        state = dict(self.ref.named_parameters())\n"
    "        state.update(self.ref.named_buffers())\n"
    "        named = ([(\"input:%d\" % p, inputs[p], d, s) for p, d, s in _OFG_INPUTS]\n"
    "                 + [(\"param:\" + k, state.get(k), d, s) for k, d, s in _OFG_PARAMS])\n"
    "        first = named[0][1] if named else None\n"
    "        device = (first.device if isinstance(first, torch.Tensor)\n"
    "                  else torch.device(\"cuda\", torch.cuda.current_device()))\n"
    "        if device.type != \"cuda\":\n"
    "            raise RuntimeError(\"ModelNew runs CUDA kernels: %s is on %s, move the model \"\n"
    "                               \"and inputs to a GPU\" % (named[0][0], device))\n"
    "        tensors = [_ofg_check(n, t, d, s, device) for n, t, d, s in named]\n"
    "        outputs = [torch.empty(s, dtype=d, device=device,\n"
    "                               memory_format=_ofg_layout(\"output:%d\" % j, s))\n"
    "                   for j, (d, s) in enumerate(_OFG_OUTPUTS)]\n"
    "        with torch.cuda.device(device):\n"
    "            _ofg_module(device)." EXPORT_LAUNCHER_NAME "(\n"
    "                tensors + outputs, torch.cuda.current_stream(device).cuda_stream)\n";

/* Writes the CUDA source string: the candidate's macros, its source, their #undefs.
 * Returns -1 when out of memory. */
static int put_cuda_source(FILE *f, const char *source, const char *defines,
                           const char *undefs) {
  static const char note[] = "// The candidate's -D options.\n";
  size_t len = strlen(source), dlen = strlen(defines), ulen = strlen(undefs);
  bool newline = len > 0 && source[len - 1] != '\n';
  char *text = malloc(sizeof note + dlen + len + 1 + ulen + 1);
  if (!text)
    return -1;
  char *w = text;
  if (dlen) {
    memcpy(w, note, sizeof note - 1);
    w += sizeof note - 1;
  }
  memcpy(w, defines, dlen);
  memcpy(w + dlen, source, len);
  w += dlen + len;
  if (newline)
    *w++ = '\n';
  memcpy(w, undefs, ulen + 1);
  fputs("# The candidate's CUDA source (the evaluator verified it compiled with NVRTC).\n"
        "_OFG_CUDA_SOURCE = ", f);
  export_put_py_string(f, text, true);
  fputc('\n', f);
  free(text);
  return 0;
}

/* Writes the whole Python file into f; -1 when out of memory. */
static int put_python(FILE *f, const json_t *profile, const json_t *candidate,
                      const struct xtensors *ts, const char *launcher,
                      const struct export_options *o) {
  export_put_head(f, candidate,
                  "# It compiles the candidate's CUDA source with\n"
                  "# torch.utils.cpp_extension.load_inline and runs the candidate's launch plan\n"
                  "# through the C++ launcher below.\n",
                  false);
  if (put_cuda_source(f, json_string_value(json_object_get(candidate, "source")), o->defines,
                      o->undefs) != 0)
    return -1;
  fputs("# The launcher: its tensors are those of _OFG_INPUTS, _OFG_PARAMS and _OFG_OUTPUTS,\n"
        "# in that order.\n_OFG_LAUNCHER = ", f);
  export_put_py_string(f, launcher, true);
  fputs("\n_OFG_DECLARATION = \"void " EXPORT_LAUNCHER_NAME
        "(std::vector<torch::Tensor> tensors, int64_t stream);\"\n"
        "# nvcc flags: optimize; lift PyTorch's half-precision restrictions, which NVRTC\n"
        "# (where the evaluator compiled the candidate) does not have; the candidate's flags.\n"
        "_OFG_FLAGS = [\"-O3\", \"-U__CUDA_NO_HALF_OPERATORS__\", "
        "\"-U__CUDA_NO_HALF_CONVERSIONS__\",\n"
        "              \"-U__CUDA_NO_BFLOAT16_CONVERSIONS__\", "
        "\"-U__CUDA_NO_HALF2_OPERATORS__\"", f);
  fputs(o->flags, f);
  fputs("]\n# The tensors the kernels address in channels-last order ((N, H, W, C) or\n"
        "# (N, D, H, W, C)): passed so, and allocated so when outputs.\n_OFG_CHANNELS_LAST = ", f);
  export_put_channels_last(f, ts);
  fputc('\n', f);
  put_tensor_tables(f, ts);
  export_put_scalars(f, profile, ts);
  fputs(py_body, f);
  fputs(py_model, f);
  fputs("        return ", f);
  export_put_structure(f, profile, ts->n_outputs);
  fputc('\n', f);
  return 0;
}

/* The file of a candidate with source, options and plan. */
static int export_single(const json_t *profile, const json_t *candidate, char **ret_text,
                         char *err, size_t errlen) {
  const char *source = json_string_value(json_object_get(candidate, "source"));
  if (!source || !*source)
    return export_fail(err, errlen, "candidate: source is empty");
  struct xtensors *ts = malloc(sizeof *ts);
  if (!ts)
    return export_fail(err, errlen, "out of memory");
  char *launcher = NULL;
  struct export_options o = {NULL, NULL, NULL};
  struct export_text t;
  int rc = export_collect_tensors(ts, profile, err, errlen);
  if (rc == 0)
    rc = export_read_channels_last(json_object_get(candidate, "plan"), ts, err, errlen);
  if (rc == 0 && (rc = export_text_open(&t, err, errlen)) == 0)
    rc = export_text_close(&t,
                           export_put_launcher(t.f, ts, json_object_get(candidate, "plan"),
                                               EXPORT_LAUNCHER_NAME, EXPORT_LAUNCHER_COMMENT,
                                               err, errlen) == 0,
                           &launcher, err, errlen);
  if (rc == 0)
    rc = export_options_build(json_object_get(candidate, "options"), &o, err, errlen);
  if (rc == 0 && (rc = export_text_open(&t, err, errlen)) == 0) {
    bool ok = put_python(t.f, profile, candidate, ts, launcher, &o) == 0;
    rc = export_text_close(&t, ok, ret_text, err, errlen);
    if (!ok)
      export_fail(err, errlen, "out of memory");
  }
  export_options_clear(&o);
  free(launcher);
  free(ts);
  return rc;
}

int export_kernelbench(const json_t *profile, const json_t *candidate, char **ret_text,
                       char *err, size_t errlen) {
  if (!json_is_object(candidate))
    return export_fail(err, errlen, "candidate: must be an object");
  if (json_is_object(json_object_get(candidate, "program")))
    return export_program(profile, candidate, ret_text, err, errlen);
  return export_single(profile, candidate, ret_text, err, errlen);
}
