/* Helpers shared by the builtin-family unit tests: the environment lookups, a client of one
 * meta-device evaluator process, and the CPU-emulation harness of generated candidates. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#define BUILTIN_TESTLIB_EMULATOR
#include "builtin_testlib.h"
#include "proposers/builtin/builtin.h"
#include "gpu/nvrtc_compile.h"

/* ---- environment: source tree, KernelBench, the venv's python ---- */

/* KernelBench's directory (static storage), or NULL with a printed reason. */
const char *kernelbench_dir(void) {
  static char dir[1024];
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  if (!root || !root[0]) {
    printf("OPFORGE_SOURCE_ROOT is not set\n");
    return NULL;
  }
  snprintf(dir, sizeof dir, "%s/../shared/kernelbench", root);
  if (access(dir, R_OK) != 0) {
    printf("no KernelBench tasks at %s\n", dir);
    return NULL;
  }
  return dir;
}

/* The evaluator's python (static storage), or NULL with a printed reason. */
const char *python_path(void) {
  static char path[1024];
  const char *p = getenv("OPFORGE_PYTHON");
  if (p && p[0])
    snprintf(path, sizeof path, "%s", p);
  else
    snprintf(path, sizeof path, "%s/.cache/opforge/venv/bin/python",
             getenv("HOME") ? getenv("HOME") : "");
  if (access(path, X_OK) != 0) {
    printf("no python venv at %s\n", path);
    return NULL;
  }
  return path;
}

/* The whole file at path (caller frees), or NULL. */
char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  rewind(f);
  char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  if (b)
    b[n] = 0;
  fclose(f);
  return b;
}

/* Writes text to path, replacing it; fails the running test on any error. Takes nothing
 * over. */
void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
}

/* A small task's source (caller frees): source itself, or the KernelBench file followed by
 * sizes. Takes nothing over. */
char *task_source(const char *source, const char *file, const char *sizes) {
  if (source)
    return strdup(source);
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", kernelbench_dir(), file);
  char *src = read_file(path);
  assert_non_null(src);
  size_t n = strlen(src) + strlen(sizes) + 2;
  char *all = malloc(n);
  assert_non_null(all);
  snprintf(all, n, "%s\n%s", src, sizes);
  free(src);
  return all;
}

/* ---- one evaluator process speaking JSON lines (docs/architecture.md, "Evaluator protocol") ---- */

/* Starts `python gpu/evaluator/main.py --device meta` into *ev; false (printing why) when the
 * venv or the source tree is missing. The caller stops a started one with evaluator_stop. */
bool evaluator_start(struct evaluator *ev) {
  const char *py = python_path(), *root = getenv("OPFORGE_SOURCE_ROOT");
  if (!py || !root)
    return false;
  char script[1024];
  snprintf(script, sizeof script, "%s/gpu/evaluator/main.py", root);
  int in[2], out[2];
  assert_int_equal(pipe(in), 0);
  assert_int_equal(pipe(out), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    close(in[1]);
    close(out[0]);
    execl(py, py, script, "--device", "meta", (char *)NULL);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  ev->pid = pid;
  ev->to = fdopen(in[1], "w");
  ev->from = fdopen(out[0], "r");
  ev->next_id = 1;
  char line[4096];
  assert_non_null(fgets(line, sizeof line, ev->from));
  assert_non_null(strstr(line, "\"ready\""));
  return true;
}

/* Sends one request (stolen); the reply's result (caller owns), or NULL on an error
 * reply (printed). */
json_t *evaluator_call(struct evaluator *ev, json_t *req) {
  json_object_set_new(req, "id", json_integer(ev->next_id++));
  char *s = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  fprintf(ev->to, "%s\n", s);
  fflush(ev->to);
  free(s);
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  int c;
  while ((c = fgetc(ev->from)) != EOF && c != '\n') {
    if (len + 2 > cap)
      assert_non_null(buf = realloc(buf, cap *= 2));
    buf[len++] = (char)c;
  }
  buf[len] = 0;
  json_t *reply = json_loads(buf, 0, NULL);
  free(buf);
  assert_non_null(reply);
  json_t *result = NULL;
  if (json_is_true(json_object_get(reply, "ok")))
    result = json_incref(json_object_get(reply, "result"));
  else
    printf("evaluator error: %s\n",
           json_string_value(json_object_get(json_object_get(reply, "error"), "message")));
  json_decref(reply);
  return result;
}

/* The profile of a task source (caller owns), or NULL. */
json_t *evaluator_profile(struct evaluator *ev, const char *name, const char *source) {
  json_t *r = evaluator_call(ev, json_pack("{s:s,s:s,s:i,s:s,s:{s:f,s:f},s:i,s:s}", "op",
                                           "load_task", "source", source, "seed", 42,
                                           "precision", "fp32", "tolerance", "atol", 1e-4,
                                           "rtol", 1e-4, "trials", 1, "name", name));
  if (!r)
    return NULL;
  json_decref(r);
  return evaluator_call(ev, json_pack("{s:s}", "op", "profile"));
}

/* Shuts down the evaluator started by evaluator_start and releases its pipes and process. */
void evaluator_stop(struct evaluator *ev) {
  json_decref(evaluator_call(ev, json_pack("{s:s}", "op", "shutdown")));
  fclose(ev->to);
  fclose(ev->from);
  int status;
  waitpid(ev->pid, &status, 0);
}

/* ---- the evaluator a test program shares ---- */

struct evaluator g_ev;
bool g_have_ev;

int builtin_group_setup(void **state) {
  (void)state;
  g_have_ev = kernelbench_dir() && evaluator_start(&g_ev);
  return 0;
}

static json_t *g_public_profiles; /* file -> profile at full size, owned here */

int builtin_group_teardown(void **state) {
  (void)state;
  if (g_have_ev)
    evaluator_stop(&g_ev);
  g_have_ev = false;
  json_decref(g_public_profiles);
  g_public_profiles = NULL;
  return 0;
}

json_t *public_profile(const char *file) {
  if (!g_have_ev)
    return NULL;
  if (!g_public_profiles)
    g_public_profiles = json_object();
  json_t *p = json_object_get(g_public_profiles, file);
  if (p)
    return p;
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", kernelbench_dir(), file);
  char *src = read_file(path);
  assert_non_null(src);
  p = evaluator_profile(&g_ev, file, src);
  free(src);
  if (!p)
    fail_msg("%s: no profile", file);
  json_object_set_new(g_public_profiles, file, p);
  return p;
}

size_t for_each_public_task(const char *level, public_task_fn fn, void *ctx) {
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "ls %s/%s", kernelbench_dir(), level);
  FILE *ls = popen(cmd, "r");
  assert_non_null(ls);
  size_t seen = 0;
  char name[512];
  while (fgets(name, sizeof name, ls)) {
    name[strcspn(name, "\n")] = 0;
    if (!strstr(name, ".py"))
      continue;
    char file[700];
    snprintf(file, sizeof file, "%s/%s", level, name);
    fn(file, ctx);
    seen++;
  }
  pclose(ls);
  return seen;
}

/* ---- CPU emulation of generated candidates: shared by the pointwise and reduce tests ---- */

/* Python, one line per string: each task's inputs, parameters, eager output and float64
 * output as raw files in their own dtypes. */
const char *const ref_script[] = {
    "# For each (task, dir): inputs, parameters, eager output and float64 output as raw files.",
    "import os, sys, types, torch",
    "def name(n): return ''.join(c if c.isalnum() else '_' for c in n)",
    "def save(t, path): t.detach().contiguous().cpu().numpy().tofile(path)",
    "for src, out in zip(sys.argv[1::2], sys.argv[2::2]):",
    "    mod = types.ModuleType('task')",
    "    exec(compile(open(src).read(), src, 'exec'), mod.__dict__)",
    "    torch.manual_seed(42)",
    "    model = mod.Model(*mod.get_init_inputs())",
    "    with torch.no_grad():",
    "        for p in model.parameters():",
    "            p.add_(0.1 * torch.randn_like(p))",
    "    torch.manual_seed(7)",
    "    inputs = mod.get_inputs()",
    "    for i, t in enumerate(inputs):",
    "        if isinstance(t, torch.Tensor):",
    "            save(t, os.path.join(out, name('input:%d' % i) + '.bin'))",
    "    def copy(t, f64):",
    "        if not isinstance(t, torch.Tensor): return t",
    "        return t.clone().double() if f64 and t.is_floating_point() else t.clone()",
    "    state = {k: v.clone() for k, v in model.state_dict().items()}",
    "    for k, t in state.items():",
    "        save(t, os.path.join(out, name('param:' + k) + '.bin'))",
    "    with torch.no_grad():",
    "        y = model(*[copy(t, False) for t in inputs])",
    "    save(y, os.path.join(out, 'expected.bin'))",
    "    m64 = mod.Model(*mod.get_init_inputs())",
    "    m64.load_state_dict(state)",
    "    m64 = m64.double()",
    "    with torch.no_grad():",
    "        y64 = m64(*[copy(t, True) for t in inputs])",
    "    save(y64 if y64.is_floating_point() else y64.long(), os.path.join(out, 'expected64.bin'))",
    NULL,
};

/* The size in bytes of one element of dtype. */
size_t dtype_size(const char *dtype) {
  return strcmp(dtype, "int64") == 0 || strcmp(dtype, "float64") == 0 ? 8
         : strcmp(dtype, "bool") == 0 || strcmp(dtype, "uint8") == 0  ? 1
                                                                       : 4;
}

/* Copies n into out (len bytes, NUL-terminated) with every non-alphanumeric replaced by
 * '_', so that a tensor name becomes a C identifier. The caller owns both buffers. */
void sanitize(const char *n, char *out, size_t len) {
  size_t i = 0;
  for (; n[i] && i + 1 < len; i++)
    out[i] = (n[i] >= 'a' && n[i] <= 'z') || (n[i] >= 'A' && n[i] <= 'Z') ||
                     (n[i] >= '0' && n[i] <= '9')
                 ? n[i]
                 : '_';
  out[i] = 0;
}

/* Writes `#define`s for the options, the source (without extern "C") in namespace ns,
 * a run() that executes the plan on the files of dir, and #undefs of every macro the
 * options or the source define, so that the next candidate starts clean. Takes nothing
 * over: profile and cand stay the caller's. */
void write_candidate(FILE *f, const char *ns, json_t *profile, json_t *cand,
                            const char *dir, const char *result) {
  json_t *macros = json_array();
  size_t i;
  json_t *o;
  json_array_foreach(json_object_get(cand, "options"), i, o) {
    char name[64], value[64] = "1";
    assert_int_equal(sscanf(json_string_value(o), "-D%63[^=]=%63s", name, value) >= 1, 1);
    fprintf(f, "#define %s %s\n", name, value);
    json_array_append_new(macros, json_string(name));
  }
  const char *src = json_string_value(json_object_get(cand, "source"));
  fprintf(f, "namespace %s {\n", ns);
  for (const char *line = src; *line;) {
    const char *end = strchr(line, '\n');
    size_t len = end ? (size_t)(end - line) : strlen(line);
    const char *ex = strstr(line, "extern \"C\" ");
    if (ex && ex < line + len) {
      fprintf(f, "%.*s%.*s\n", (int)(ex - line), line, (int)(len - (size_t)(ex - line) - 11),
              ex + 11);
    } else {
      fprintf(f, "%.*s\n", (int)len, line);
    }
    char name[128];
    if ((sscanf(line, " # define %127[A-Za-z0-9_]", name) == 1 ||
         sscanf(line, " #define %127[A-Za-z0-9_]", name) == 1) &&
        strcmp(name, "INFINITY") != 0)
      json_array_append_new(macros, json_string(name));
    line = end ? end + 1 : line + len;
  }
  fprintf(f, "static void run() {\n  const char* dir = \"%s\";\n", dir);
  static const char *const lists[] = {"inputs", "params", "outputs"};
  for (int l = 0; l < 3; l++) {
    json_t *t;
    json_array_foreach(json_object_get(profile, lists[l]), i, t) {
      char s[256];
      sanitize(json_string_value(json_object_get(t, "name")), s, sizeof s);
      size_t bytes = (size_t)json_integer_value(json_object_get(t, "numel")) *
                     dtype_size(json_string_value(json_object_get(t, "dtype")));
      if (l < 2)
        fprintf(f, "  ofg_emu_ptr %s{ofg_emu_load(dir, \"%s\", %zu)};\n", s, s, bytes);
      else
        fprintf(f, "  ofg_emu_ptr %s{ofg_emu_alloc(%zu, 0xff)};\n", s, bytes);
    }
  }
  json_t *plan = json_object_get(cand, "plan"), *x;
  json_array_foreach(json_object_get(plan, "buffers"), i, x) {
    char s[256];
    sanitize(json_string_value(json_object_get(x, "name")), s, sizeof s);
    fprintf(f, "  ofg_emu_ptr buf_%s{ofg_emu_alloc(%lld, 0)};\n", s,
            (long long)json_integer_value(json_object_get(x, "bytes")));
  }
  fprintf(f, "  unsigned cl = 1;\n#ifdef OFG_CL\n  cl = OFG_CL;\n#endif\n");
  json_array_foreach(json_object_get(plan, "launches"), i, x) {
    json_t *g = json_object_get(x, "grid"), *b = json_object_get(x, "block");
    fprintf(f, "  ofg_emu_launch(%lld, %lld, %lld, %lld, %lld, %lld, %lld, cl, [&] { %s(",
            json_integer_value(json_array_get(g, 0)), json_integer_value(json_array_get(g, 1)),
            json_integer_value(json_array_get(g, 2)), json_integer_value(json_array_get(b, 0)),
            json_integer_value(json_array_get(b, 1)), json_integer_value(json_array_get(b, 2)),
            json_integer_value(json_object_get(x, "shared_bytes")),
            json_string_value(json_object_get(x, "kernel")));
    size_t j;
    json_t *a;
    json_array_foreach(json_object_get(x, "args"), j, a) {
      char s[256];
      const char *t = json_string_value(json_object_get(a, "tensor"));
      const char *bf = json_string_value(json_object_get(a, "buffer"));
      if (!t && !bf) {  /* a scalar: i32, i64, f32 or f64 */
        json_t *num = json_object_get(a, json_object_get(a, "i32")   ? "i32"
                                         : json_object_get(a, "i64") ? "i64"
                                         : json_object_get(a, "f32") ? "f32"
                                                                     : "f64");
        assert_true(json_is_number(num));
        if (json_is_integer(num))
          fprintf(f, "%s%lldLL", j ? ", " : "", (long long)json_integer_value(num));
        else
          fprintf(f, "%s%.17g", j ? ", " : "", json_number_value(num));
        continue;
      }
      sanitize(t ? t : bf, s, sizeof s);
      fprintf(f, "%s%s%s", j ? ", " : "", t ? "" : "buf_", s);
    }
    fprintf(f, "); });\n");
  }
  json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
  fprintf(f, "  ofg_emu_save(\"%s\", output_0.p, %zu);\n}\n}  // namespace %s\n", result,
          (size_t)json_integer_value(json_object_get(out, "numel")) *
              dtype_size(json_string_value(json_object_get(out, "dtype"))),
          ns);
  json_array_foreach(macros, i, o) fprintf(f, "#undef %s\n", json_string_value(o));
  json_decref(macros);
}

/* The whole raw file at path (caller frees) and its size in bytes; fails the running test
 * when it cannot be read. */
void *read_raw(const char *path, size_t *ret_bytes) {
  FILE *f = fopen(path, "rb");
  if (!f)
    fail_msg("cannot read %s", path);
  fseek(f, 0, SEEK_END);
  long bytes = ftell(f);
  rewind(f);
  void *p = malloc((size_t)bytes + 8);
  assert_non_null(p);
  assert_int_equal(fread(p, 1, (size_t)bytes, f), (size_t)bytes);
  fclose(f);
  *ret_bytes = (size_t)bytes;
  return p;
}

/* The evaluator's rules: allclose(1e-4, 1e-4) against eager fp32, and an error against
 * float64 of at most 8 times eager's own plus 1e-6 of the largest output (gpu/evaluator/candidate.py
 * accuracy_budget); int64 outputs exactly. Describes the comparison in msg (len bytes,
 * caller's buffer); takes nothing over. */
bool compare_result(const char *dir, const char *result, const char *dtype, char *msg,
                           size_t len) {
  char p1[1200], p2[1200];
  size_t nr, ne, n64;
  snprintf(p1, sizeof p1, "%s/expected.bin", dir);
  snprintf(p2, sizeof p2, "%s/expected64.bin", dir);
  void *res = read_raw(result, &nr), *eager = read_raw(p1, &ne), *ref = read_raw(p2, &n64);
  bool ok = nr == ne;
  size_t bad = 0;
  double err_c = 0, err_e = 0, max_ref = 0;
  if (ok && strcmp(dtype, "int64") == 0) {
    for (size_t i = 0; i < nr / 8; i++)
      bad += ((long long *)res)[i] != ((long long *)eager)[i];
  } else if (ok) {
    const float *r = res, *e = eager;
    const double *d = ref;
    for (size_t i = 0; i < nr / 4; i++) {
      if (!(fabs((double)r[i] - e[i]) <= 1e-4 + 1e-4 * fabs(e[i])))
        bad++;
      double dc = fabs(r[i] - d[i]), de = fabs(e[i] - d[i]);
      err_c = dc > err_c || isnan(dc) ? dc : err_c;
      err_e = de > err_e ? de : err_e;
      max_ref = fabs(d[i]) > max_ref ? fabs(d[i]) : max_ref;
    }
  }
  ok = ok && bad == 0 && err_c <= 8 * err_e + 1e-6 * max_ref;
  snprintf(msg, len, "%zu bytes, %zu mismatches, err64 %.3g (eager %.3g)", nr, bad, err_c,
           err_e);
  free(res);
  free(eager);
  free(ref);
  return ok;
}

/* Writes every task's source into its own directory of tmp and runs ref_script over them in
 * one python process (one torch start-up for the whole table). tmp stays the caller's; each
 * source task() returns is freed here. */
void prepare_tasks(const char *tmp, size_t n, task_source_fn task) {
  const char *py = python_path();
  size_t cap = 1 << 16;
  char *cmd = malloc(cap);
  assert_non_null(cmd);
  char script[1100];
  snprintf(script, sizeof script, "%s/ref.py", tmp);
  FILE *f = fopen(script, "w");
  assert_non_null(f);
  for (size_t i = 0; ref_script[i]; i++)
    fprintf(f, "%s\n", ref_script[i]);
  assert_int_equal(fclose(f), 0);
  int used = snprintf(cmd, cap, "%s %s", py, script);
  for (size_t i = 0; i < n; i++) {
    const char *name = NULL;
    char *src = task(i, &name);
    char dir[1100], path[1200];
    snprintf(dir, sizeof dir, "%s/%s", tmp, name);
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(path, sizeof path, "%s/task.py", dir);
    write_file(path, src);
    free(src);
    used += snprintf(cmd + used, cap - (size_t)used, " %s %s", path, dir);
  }
  assert_int_equal(system(cmd), 0);
  free(cmd);
}

/* Compares every run's result with its references and prints the verdicts; fails the
 * running test on a mismatch. Takes nothing over: runs stays the caller's. */
void check_runs(json_t *runs, int name_width, int what_width) {
  size_t failed = 0;
  size_t i;
  json_t *r;
  json_array_foreach(runs, i, r) {
    char msg[256];
    const char *dir = json_string_value(json_object_get(r, "dir"));
    const char *what = json_string_value(json_object_get(r, "what"));
    bool ok = compare_result(dir, json_string_value(json_object_get(r, "result")),
                             json_string_value(json_object_get(r, "dtype")), msg, sizeof msg);
    printf("  %-8s %-*s %-*s %s\n", ok ? "ok" : "MISMATCH", name_width, strrchr(dir, '/') + 1,
           what_width, what[0] ? what : "defaults", msg);
    failed += !ok;
  }
  printf("  %zu candidates emulated, %zu mismatched\n", json_array_size(runs), failed);
  assert_int_equal(failed, 0);
}

/* A C++ prelude, one line per string, that runs CUDA kernels on the CPU. Threads are
 * ucontext fibers of one OS thread per block; __syncthreads is a block barrier, shuffles
 * and __syncwarp warp barriers. A cluster's blocks run on OS threads at once: __shared__
 * variables are thread_local (so per block), the cluster barrier is an OS barrier, and a
 * distributed shared memory load reads another block's copy at the same TLS offset. */
const char *const emu_cuda_prelude[] = {
    "// CPU emulator of CUDA kernels for the builtin-family tests.",
    "#include <math.h>",
    "#include <cmath>",
    "#include <condition_variable>",
    "#include <cstdio>",
    "#include <cstdlib>",
    "#include <csetjmp>",
    "#include <cstring>",
    "#include <functional>",
    "#include <memory>",
    "#include <mutex>",
    "#include <thread>",
    "#include <ucontext.h>",
    "#include <vector>",
    "#define OFG_EMU 1",
    "#define __global__",
    "#define __device__",
    "#define __forceinline__ inline",
    "#define __shared__ static thread_local",
    "#define __restrict__",
    "#define __launch_bounds__(...)",
    "#define __cluster_dims__(...)",
    "struct float4 { float x, y, z, w; };",
    "struct float2 { float x, y; };",
    "static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }",
    "static inline float2 make_float2(float a, float b) { return {a, b}; }",
    "struct ofg_u3 { unsigned x, y, z; };",
    "struct ofg_fiber { ucontext_t ctx; jmp_buf jb; ofg_u3 tid; int lin; int state; bool started; };",
    "static thread_local ofg_fiber* ofg_emu_cur;",
    "static thread_local ofg_u3 ofg_emu_block;",
    "static ofg_u3 ofg_emu_bdim, ofg_emu_gdim;",
    "#define threadIdx (ofg_emu_cur->tid)",
    "#define blockIdx ofg_emu_block",
    "#define blockDim ofg_emu_bdim",
    "#define gridDim ofg_emu_gdim",
    "static thread_local jmp_buf ofg_emu_sched;",
    "static thread_local std::vector<unsigned long long> ofg_emu_warpvals;",
    "static thread_local std::vector<unsigned char> ofg_emu_smem;",
    "static thread_local unsigned ofg_emu_rank;",
    "static thread_local char ofg_emu_anchor;",
    "static char* ofg_emu_anchors[16];",
    "static std::function<void()>* ofg_emu_kernel;",
    "struct ofg_emu_cbar { std::mutex m; std::condition_variable cv; int n = 1, count = 0; long gen = 0; };",
    "static ofg_emu_cbar* ofg_emu_cb;",
    "static void ofg_emu_fail(const char* what) { fprintf(stderr, \"emu: %s\\n\", what); exit(90); }",
    "// States: 0 runnable, 1 block barrier, 2 warp barrier, 3 exited, 4 cluster barrier.",
    "// Fibers start with swapcontext once, then switch with _setjmp/_longjmp (no syscalls).",
    "static inline void ofg_emu_wait(int st) {",
    "  ofg_emu_cur->state = st;",
    "  if (!_setjmp(ofg_emu_cur->jb)) _longjmp(ofg_emu_sched, 1);",
    "}",
    "static void ofg_emu_resume(ofg_fiber* f) {",
    "  ofg_emu_cur = f;",
    "  if (_setjmp(ofg_emu_sched)) return;",
    "  if (f->started) _longjmp(f->jb, 1);",
    "  f->started = true;",
    "  ucontext_t here;",
    "  swapcontext(&here, &f->ctx);",
    "}",
    "static inline void __syncthreads() { ofg_emu_wait(1); }",
    "static inline void __syncwarp(unsigned = 0xffffffffu) { ofg_emu_wait(2); }",
    "template <class T> static inline T __shfl_xor_sync(unsigned, T v, int o) {",
    "  int lane = ofg_emu_cur->lin & 31, w = ofg_emu_cur->lin >> 5;",
    "  unsigned long long bits = 0;",
    "  memcpy(&bits, &v, sizeof v);",
    "  ofg_emu_warpvals[w * 32 + lane] = bits;",
    "  ofg_emu_wait(2);",
    "  bits = ofg_emu_warpvals[w * 32 + (lane ^ o)];",
    "  ofg_emu_wait(2);",
    "  T r;",
    "  memcpy(&r, &bits, sizeof r);",
    "  return r;",
    "}",
    "template <class T> static inline T __ldg(const T* p) { return *p; }",
    "template <class T> static inline void __stcs(T* p, T v) { *p = v; }",
    "template <class T> static inline void __stwb(T* p, T v) { *p = v; }",
    "static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }",
    "static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }",
    "static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }",
    "#define __expf(x) expf(x)",
    "#define __logf(x) logf(x)",
    "static inline float __fdividef(float a, float b) { return a / b; }",
    "static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }",
    "static inline void* ofg_emu_dyn_smem() { return ofg_emu_smem.data(); }",
    "static inline unsigned ofg_emu_cluster_rank() { return ofg_emu_rank; }",
    "static inline void ofg_emu_cluster_sync() { ofg_emu_wait(4); }",
    "static inline float ofg_emu_dsmem_ld(const float* p, unsigned rank) {",
    "  const char* q = ofg_emu_anchors[rank] + ((const char*)p - &ofg_emu_anchor);",
    "  float v;",
    "  memcpy(&v, q, 4);",
    "  return v;",
    "}",
    "static void ofg_emu_cbar_wait() {",
    "  std::unique_lock<std::mutex> l(ofg_emu_cb->m);",
    "  long g = ofg_emu_cb->gen;",
    "  if (++ofg_emu_cb->count == ofg_emu_cb->n) {",
    "    ofg_emu_cb->count = 0;",
    "    ofg_emu_cb->gen++;",
    "    ofg_emu_cb->cv.notify_all();",
    "  } else {",
    "    ofg_emu_cb->cv.wait(l, [&] { return ofg_emu_cb->gen != g; });",
    "  }",
    "}",
    "static void ofg_emu_entry() {",
    "  (*ofg_emu_kernel)();",
    "  ofg_emu_cur->state = 3;",
    "  _longjmp(ofg_emu_sched, 1);",
    "}",
    "// Releases warps whose live threads all wait at a shuffle; true when any was released.",
    "static bool ofg_emu_release_warps(std::vector<ofg_fiber>& f) {",
    "  bool released = false;",
    "  for (size_t w = 0; w * 32 < f.size(); w++) {",
    "    bool any2 = false, other = false;",
    "    for (size_t t = w * 32; t < f.size() && t < w * 32 + 32; t++) {",
    "      any2 |= f[t].state == 2;",
    "      other |= f[t].state == 1 || f[t].state == 4;",
    "    }",
    "    if (any2 && other) ofg_emu_fail(\"divergent warp (shuffle against a barrier)\");",
    "    for (size_t t = w * 32; any2 && t < f.size() && t < w * 32 + 32; t++)",
    "      if (f[t].state == 2) f[t].state = 0;",
    "    released |= any2;",
    "  }",
    "  return released;",
    "}",
    "static thread_local std::vector<std::unique_ptr<char[]>> ofg_emu_stacks;",
    "static thread_local ucontext_t ofg_emu_proto;",
    "static void ofg_emu_run_block(ofg_u3 b, unsigned rank, size_t shared) {",
    "  ofg_emu_block = b;",
    "  ofg_emu_rank = rank;",
    "  ofg_emu_anchors[rank] = &ofg_emu_anchor;",
    "  const size_t nt = (size_t)ofg_emu_bdim.x * ofg_emu_bdim.y * ofg_emu_bdim.z;",
    "  const size_t stack = 64 * 1024;",
    "  std::vector<ofg_fiber> f(nt);",
    "  if (ofg_emu_stacks.empty()) getcontext(&ofg_emu_proto);",
    "  while (ofg_emu_stacks.size() < nt) ofg_emu_stacks.emplace_back(new char[stack]);",
    "  ofg_emu_smem.assign(shared + 16, 0xff);",
    "  ofg_emu_warpvals.assign((nt + 31) / 32 * 32, 0);",
    "  for (size_t t = 0; t < nt; t++) {",
    "    f[t].ctx = ofg_emu_proto;",
    "    f[t].ctx.uc_stack.ss_sp = ofg_emu_stacks[t].get();",
    "    f[t].ctx.uc_stack.ss_size = stack;",
    "    f[t].ctx.uc_link = nullptr;",
    "    makecontext(&f[t].ctx, ofg_emu_entry, 0);",
    "    f[t].tid = {(unsigned)(t % ofg_emu_bdim.x), (unsigned)(t / ofg_emu_bdim.x % ofg_emu_bdim.y),",
    "                (unsigned)(t / (ofg_emu_bdim.x * ofg_emu_bdim.y))};",
    "    f[t].lin = (int)t;",
    "    f[t].state = 0;",
    "    f[t].started = false;",
    "  }",
    "  for (;;) {",
    "    for (size_t t = 0; t < nt; t++)",
    "      if (f[t].state == 0) ofg_emu_resume(&f[t]);",
    "    if (ofg_emu_release_warps(f)) continue;",
    "    size_t n[5] = {0, 0, 0, 0, 0};",
    "    for (size_t t = 0; t < nt; t++) n[f[t].state]++;",
    "    if (n[3] == nt) break;",
    "    if (n[4] && (n[1] || n[3])) ofg_emu_fail(\"cluster barrier not reached by every thread\");",
    "    if (n[1] && n[3]) ofg_emu_fail(\"block barrier after some threads exited\");",
    "    if (n[4]) ofg_emu_cbar_wait();",
    "    for (size_t t = 0; t < nt; t++)",
    "      if (f[t].state == 1 || f[t].state == 4) f[t].state = 0;",
    "  }",
    "}",
    "static void ofg_emu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,",
    "                           unsigned bz, size_t shared, unsigned cl, std::function<void()> k) {",
    "  ofg_emu_kernel = &k;",
    "  ofg_emu_bdim = {bx, by, bz};",
    "  ofg_emu_gdim = {gx, gy, gz};",
    "  if (gx % cl) ofg_emu_fail(\"grid not a multiple of the cluster\");",
    "  for (unsigned z = 0; z < gz; z++)",
    "    for (unsigned y = 0; y < gy; y++)",
    "      for (unsigned x = 0; x < gx; x += cl) {",
    "        if (cl == 1) {",
    "          ofg_emu_run_block({x, y, z}, 0, shared);",
    "          continue;",
    "        }",
    "        ofg_emu_cbar bar;",
    "        bar.n = (int)cl;",
    "        ofg_emu_cb = &bar;",
    "        std::vector<std::thread> th;",
    "        for (unsigned r = 0; r < cl; r++)",
    "          th.emplace_back(ofg_emu_run_block, ofg_u3{x + r, y, z}, r, shared);",
    "        for (auto& t : th) t.join();",
    "      }",
    "}",
    "// A tensor or buffer argument: converts to any kernel pointer type.",
    "struct ofg_emu_ptr {",
    "  void* p;",
    "  template <class T> operator T*() const { return (T*)p; }",
    "};",
    "static void* ofg_emu_alloc(size_t bytes, int fill) {",
    "  void* p = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);",
    "  memset(p, fill, bytes + 16);",
    "  return p;",
    "}",
    "static void* ofg_emu_load(const char* dir, const char* name, size_t bytes) {",
    "  char path[1024];",
    "  snprintf(path, sizeof path, \"%s/%s.bin\", dir, name);",
    "  void* p = ofg_emu_alloc(bytes, 0);",
    "  FILE* fp = fopen(path, \"rb\");",
    "  if (!fp || fread(p, 1, bytes, fp) != bytes) ofg_emu_fail(path);",
    "  fclose(fp);",
    "  return p;",
    "}",
    "static void ofg_emu_save(const char* path, const void* p, size_t bytes) {",
    "  FILE* fp = fopen(path, \"wb\");",
    "  if (!fp || fwrite(p, 1, bytes, fp) != bytes) ofg_emu_fail(path);",
    "  fclose(fp);",
    "}",
    NULL,
};

/* ---- NVRTC compiles of many candidates ---- */

/* Candidates to compile, shared by the compile threads. */
struct compile_queue {
  json_t *cands; /* [{"source", "options", "tag"}] */
  size_t next, failed;
  pthread_mutex_t lock;
};

/* Compiles the queue's next candidates until none is left; prints each failure. */
static void *compile_worker(void *arg) {
  struct compile_queue *q = arg;
  for (;;) {
    pthread_mutex_lock(&q->lock);
    size_t i = q->next++;
    pthread_mutex_unlock(&q->lock);
    json_t *cand = json_array_get(q->cands, i);
    if (!cand)
      return NULL;
    const char *opts[NVRTC_MAX_OPTIONS];
    size_t n = 0, j;
    json_t *o;
    json_array_foreach(json_object_get(cand, "options"), j, o) opts[n++] = json_string_value(o);
    struct compile_request req = {json_string_value(json_object_get(cand, "source")), opts, n,
                                  "sm_90a", GPU_PREC_FP32, NULL};
    struct compile_result r;
    if (nvrtc_compile(&req, &r) != 0 || !r.ok) {
      pthread_mutex_lock(&q->lock);
      q->failed++;
      printf("  COMPILE FAILED (%s): %.800s\n", json_string_value(json_object_get(cand, "tag")),
             r.log ? r.log : "");
      pthread_mutex_unlock(&q->lock);
    }
    compile_result_clear(&r);
  }
}

size_t compile_all(json_t *cands) {
  struct compile_queue q = {.cands = cands};
  pthread_mutex_init(&q.lock, NULL);
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    assert_int_equal(pthread_create(&t[i], NULL, compile_worker, &q), 0);
  for (int i = 0; i < 2; i++)
    pthread_join(t[i], NULL);
  pthread_mutex_destroy(&q.lock);
  return q.failed;
}

void expect_knob_refusals(const struct builtin_family *f, json_t *m, const struct knob_set *k0,
                          const struct knob_refusal *refused, size_t n) {
  char why[256];
  for (size_t i = 0; i < n; i++) {
    struct knob_set k = *k0;
    json_t *move = json_pack("{s:s, s:s, s:i}", "knob", refused[i].knob, "op", "set", "value",
                             refused[i].value);
    assert_int_equal(knob_apply_move(&k, move, why, sizeof why), 0);
    json_decref(move);
    if (f->check(m, &k, why, sizeof why) != -1)
      fail_msg("%s=%d was accepted", refused[i].knob, refused[i].value);
    if (strcmp(why, refused[i].why) != 0)
      fail_msg("%s=%d: \"%s\", want \"%s\"", refused[i].knob, refused[i].value, why,
               refused[i].why);
  }
}

bool need_evaluator(void) {
  if (g_have_ev)
    return true;
  printf("needs KernelBench and the python venv\n");
  return false;
}

int match_case_run(family_match_fn match, const struct match_case *c, json_t **ret_match,
                   char *why, size_t whylen) {
  json_t *p = evaluator_profile(&g_ev, c->name, c->src);
  assert_non_null(p);
  *ret_match = NULL;
  why[0] = 0;
  int rc = match(p, ret_match, why, whylen);
  json_decref(p);
  return rc;
}

void expect_match_cases(family_match_fn match, const struct match_case *cases, size_t n,
                        bool exact) {
  for (size_t i = 0; i < n; i++) {
    json_t *m;
    char why[512];
    int rc = match_case_run(match, &cases[i], &m, why, sizeof why);
    const char *text = rc == 1 ? json_string_value(json_object_get(m, "summary")) : why;
    printf("  %-18s %2d  %s\n", cases[i].name, rc, text);
    bool same = exact ? strcmp(text, cases[i].text) == 0 : strstr(text, cases[i].text) != NULL;
    if (rc != cases[i].rc || !same)
      fail_msg("%s: got %d \"%s\", want %d \"%s\"", cases[i].name, rc, text, cases[i].rc,
               cases[i].text);
    json_decref(m);
  }
}

json_t *match_case_named(family_match_fn match, const struct match_case *cases, size_t n,
                         const char *name) {
  for (size_t i = 0; i < n; i++) {
    json_t *m;
    char why[512];
    if (strcmp(cases[i].name, name) != 0)
      continue;
    assert_int_equal(match_case_run(match, &cases[i], &m, why, sizeof why), 1);
    return m;
  }
  fail_msg("no case %s", name);
  return NULL;
}
