/* Unit tests of the builtin space (proposers/builtin/space.h; docs/architecture.md, section
 * 8, "The builtin space"):
 *   - the canonical point key and its parse from -D options;
 *   - the space API on one small task per family module: every enumerated point valid,
 *     samples and neighbours valid, draws reproducible, the proposer's space moves;
 *   - the table of valid points of every shared KernelBench task (levels 1-3) that the
 *     builtin proposer generates code for, per region (cut by engine/partition.c), printed;
 *   - a sample of points of every family module compiled with NVRTC for sm_90a, without
 *     spills;
 *   - a smaller sample run in the CPU emulator against PyTorch.
 * The parts that need ../shared/kernelbench, the python venv or a C++ compiler skip with
 * the reason printed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "engine/partition.h"
#include "gpu/nvrtc_compile.h"
#include "proposers/builtin/builtin.h"
#include "proposers/builtin/propose.h"
#include "proposers/builtin/space.h"
#include "proposers/proposer.h"

#define BUILTIN_TESTLIB_EMULATOR
#include "builtin_testlib.h"

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- (1) the point key ---- */

static void test_point_key(void **state) {
  (void)state;
  struct knob_set k = {.block = 256, .vec = 4, .items = 2, .rows = 1, .unroll = 1, .split = 1};
  snprintf(k.mode, sizeof k.mode, "warp_per_row");
  char key[SPACE_KEY_MAX], from_opts[SPACE_KEY_MAX];
  space_point_key(&k, key, sizeof key);
  assert_string_equal(key, "BLOCK=256,ITEMS=2,MODE=warp_per_row,ROWS=1,SPLIT=1,UNROLL=1,VEC=4");
  json_t *opts = knob_options(&k);
  assert_int_equal(space_options_key(opts, from_opts, sizeof from_opts), 0);
  assert_string_equal(from_opts, key);
  json_decref(opts);
  /* GEMM: BK sorts before BLOCK (strcmp), the 3xTF32 alias is spelled tf32x3. */
  struct knob_set g = {.bm = 128, .bn = 64, .bk = 16, .tm = 8, .tn = 4, .stages = 4,
                       .split = 1, .minb = 2};
  snprintf(g.mode, sizeof g.mode, "3xtf32");
  space_point_key(&g, key, sizeof key);
  assert_string_equal(key, "BK=16,BM=128,BN=64,MINB=2,MODE=tf32x3,SPLIT=1,STAGES=4,TM=8,TN=4");
  /* Options that are no knob are ignored; no knob at all is the empty key. */
  opts = json_pack("[s, s, s]", "-DOFG_X=3", "-DBM=128", "--use_fast_math");
  assert_int_equal(space_options_key(opts, from_opts, sizeof from_opts), 0);
  assert_string_equal(from_opts, "BM=128");
  json_decref(opts);
  struct knob_set none = {0};
  space_point_key(&none, key, sizeof key);
  assert_string_equal(key, "");
  assert_int_equal(space_options_key(NULL, key, sizeof key), -1);
  /* Kinds of move and the strategies that name them. */
  assert_int_equal(space_strategy_kinds("space_tiling"), SPACE_TILING);
  assert_int_equal(space_strategy_kinds("warp_per_row"), 0);
  assert_int_equal(space_knob_kinds("MODE", "tf32x3") & SPACE_PRECISION, SPACE_PRECISION);
  assert_int_equal(space_knob_kinds("BLOCK", NULL), SPACE_LAUNCH);
}

/* ---- small tasks, one per family module ---- */

#define TASK(init, fwd, inputs)                                                          \
  "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"               \
  "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n" init  \
  "    def forward(self, x, y=None, z=None):\n" fwd                                     \
  "def get_inputs():\n    return " inputs "\ndef get_init_inputs():\n    return []\n"
#define NOINIT "        pass\n"

static const struct small_task {
  const char *name, *module, *source;
} small_tasks[] = {
    {"pw", "pointwise", TASK(NOINIT, "        return x * torch.sigmoid(x) + 1.0\n",
                             "[torch.randn(4, 300)]")},
    {"red", "reduction", TASK(NOINIT, "        return torch.sum(x, dim=1)\n",
                              "[torch.randn(6, 1000)]")},
    {"redcol", "reduction", TASK(NOINIT, "        return torch.amax(x, dim=1)\n",
                                 "[torch.randn(3, 200, 12)]")},
    {"smax", "softmax", TASK(NOINIT, "        return torch.softmax(x, dim=-1)\n",
                             "[torch.randn(10, 700)]")},
    {"lnorm", "norm", TASK("        self.ln = nn.LayerNorm(384)\n",
                           "        return self.ln(x)\n", "[torch.randn(6, 384)]")},
    {"scan", "scan", TASK(NOINIT, "        return torch.cumsum(x, dim=1)\n",
                          "[torch.randn(4, 900)]")},
    {"pool", "pooling", TASK("        self.p = nn.MaxPool2d(3, stride=2, padding=1)\n",
                             "        return self.p(x)\n", "[torch.randn(2, 3, 17, 19)]")},
    {"loss", "loss", TASK(NOINIT, "        return F.smooth_l1_loss(x, y)\n",
                          "[torch.randn(5, 333), torch.randn(5, 333)]")},
    {"gemm", "gemm", TASK(NOINIT, "        return torch.matmul(x, y)\n",
                          "[torch.randn(70, 96), torch.randn(96, 80)]")},
    {"attn", "attention", TASK(NOINIT,
                               "        return F.scaled_dot_product_attention(x, y, z)\n",
                               "[torch.randn(1, 2, 40, 32), torch.randn(1, 2, 40, 32), "
                               "torch.randn(1, 2, 40, 32)]")},
    {"conv", "conv", TASK("        self.c = nn.Conv2d(3, 8, 3, padding=1)\n",
                          "        return self.c(x)\n", "[torch.randn(2, 3, 9, 11)]")},
};
#define N_SMALL (sizeof small_tasks / sizeof small_tasks[0])

static json_t *g_small[N_SMALL]; /* their profiles, made once */

static json_t *small_profile(size_t i) {
  if (!g_small[i]) {
    g_small[i] = evaluator_profile(&g_ev, small_tasks[i].name, small_tasks[i].source);
    if (!g_small[i])
      fail_msg("%s: no profile", small_tasks[i].name);
  }
  return g_small[i];
}

static int group_teardown(void **state) {
  for (size_t i = 0; i < N_SMALL; i++) {
    json_decref(g_small[i]);
    g_small[i] = NULL;
  }
  return builtin_group_teardown(state);
}

/* The space of small task i, checked to be of its module. */
static void small_space(size_t i, struct builtin_space *sp) {
  char why[512];
  if (space_open(sp, small_profile(i), why, sizeof why) != 0)
    fail_msg("%s: %s", small_tasks[i].name, why);
  if (strcmp(sp->module, small_tasks[i].module) != 0)
    fail_msg("%s: matched %s, want %s", small_tasks[i].name, sp->module, small_tasks[i].module);
}

/* How many knobs two points differ in. */
static int knobs_changed(const struct knob_set *a, const struct knob_set *b) {
  int n = strcmp(a->mode, b->mode) != 0;
  for (size_t i = 0; knob_name(i); i++)
    n += *knob_slot((struct knob_set *)a, knob_name(i)) !=
         *knob_slot((struct knob_set *)b, knob_name(i));
  return n;
}

/* ---- (2) the API on the small tasks ---- */

static void test_space_api(void **state) {
  (void)state;
  if (!need_evaluator()) {
    skip();
    return;
  }
  for (size_t t = 0; t < N_SMALL; t++) {
    struct builtin_space sp;
    small_space(t, &sp);
    struct knob_set *pts = NULL;
    size_t n = 0;
    assert_int_equal(space_enumerate(&sp, &pts, &n), 0);
    assert_int_equal(space_count(&sp), n);
    printf("  %-7s %-9s grid %8.0f points, %6zu valid\n", small_tasks[t].name, sp.module, sp.raw,
           n);
    assert_true(n >= 2);
    char why[256];
    /* The defaults are a valid point, and every enumerated point is one (distinct keys). */
    if (!space_valid(&sp, &sp.defaults, why, sizeof why))
      fail_msg("%s: the defaults are not valid: %s", small_tasks[t].name, why);
    json_t *keys = json_object();
    for (size_t i = 0; i < n; i++) {
      char key[SPACE_KEY_MAX];
      if (!space_valid(&sp, &pts[i], why, sizeof why))
        fail_msg("%s: enumerated point %zu invalid: %s", small_tasks[t].name, i, why);
      space_point_key(&pts[i], key, sizeof key);
      assert_null(json_object_get(keys, key));
      json_object_set_new(keys, key, json_true());
    }
    /* Samples: valid, reproducible from the seed, biased ones keep the defaults more. */
    struct space_rng r1, r2;
    space_rng_seed(&r1, 42);
    space_rng_seed(&r2, 42);
    int kept_uniform = 0, kept_biased = 0;
    for (int i = 0; i < 40; i++) {
      struct knob_set a, b;
      assert_int_equal(space_sample(&sp, &r1, NULL, 0, 0, &a), 0);
      assert_int_equal(space_sample(&sp, &r2, NULL, 0, 0, &b), 0);
      assert_memory_equal(&a, &b, sizeof a);
      char key[SPACE_KEY_MAX];
      space_point_key(&a, key, sizeof key);
      assert_non_null(json_object_get(keys, key));
      kept_uniform += knobs_changed(&a, &sp.defaults) <= 1;
      assert_int_equal(space_sample(&sp, &r1, &sp.defaults, SPACE_VECTOR, 0.5, &b), 0);
      assert_true(space_valid(&sp, &b, why, sizeof why));
      kept_biased += knobs_changed(&b, &sp.defaults) <= 1;
      (void)space_sample(&sp, &r2, &sp.defaults, SPACE_VECTOR, 0.5, &b);
    }
    assert_true(kept_biased >= kept_uniform);
    /* Neighbours of the defaults: valid, one knob changed (two with max_changed 2). */
    struct knob_set *nb = NULL;
    size_t nn = 0, nn2 = 0;
    assert_int_equal(space_neighbours(&sp, &sp.defaults, SPACE_ALL, 1, &nb, &nn), 0);
    for (size_t i = 0; i < nn; i++) {
      assert_true(space_valid(&sp, &nb[i], why, sizeof why));
      assert_int_equal(knobs_changed(&nb[i], &sp.defaults), 1);
    }
    free(nb);
    assert_int_equal(space_neighbours(&sp, &sp.defaults, SPACE_ALL, 2, &nb, &nn2), 0);
    for (size_t i = 0; i < nn2; i++) {
      int c = knobs_changed(&nb[i], &sp.defaults);
      assert_true(c == 1 || c == 2);
    }
    free(nb);
    assert_true(nn >= 1 && nn2 >= nn);
    json_decref(keys);
    free(pts);
    space_clear(&sp);
  }
}

/* The proposer's moves through the space: a "space_<kind>" strategy's small step changes
 * one or two knobs of its parent, its large step draws a new point, both valid and
 * reproducible; a concrete move the shapes refuse is repaired by one more knob. */
static void test_proposer_moves(void **state) {
  (void)state;
  if (!need_evaluator()) {
    skip();
    return;
  }
  struct proposer p;
  assert_int_equal(proposer_builtin_new(&p), 0);
  json_t *opts = json_pack("{s:i}", "seed", 7);
  static const char *const kinds[] = {"space_launch", "space_vector", "space_precision",
                                      "space_tiling", "space_reduce"};
  size_t made = 0, refused = 0;
  for (size_t t = 0; t < N_SMALL; t++) {
    struct builtin_space sp;
    small_space(t, &sp);
    json_t *parent = NULL, *fail = NULL;
    struct proposal_request req = {.task_id = "t", .task_name = small_tasks[t].name,
                                   .task_options = opts, .profile = small_profile(t), .step = 1};
    assert_int_equal(p.propose_large(p.self, &req, &parent, &fail), 0);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
      json_t *node = json_pack("{s:s, s:{s:s, s:s, s:s}}", "id", kinds[k], "knob_move", "knob",
                               "MODE", "op", "set", "value", kinds[k]);
      req.strategy = kinds[k];
      req.strategy_node = node;
      req.parent = parent;
      req.step = 2;
      json_t *a = NULL, *b = NULL;
      int rc = p.propose_small(p.self, &req, &a, &fail);
      if (rc == 0) {
        assert_int_equal(p.propose_small(p.self, &req, &b, &fail), 0);
        assert_true(json_equal(json_object_get(a, "options"), json_object_get(b, "options")));
        char ka[SPACE_KEY_MAX], kp[SPACE_KEY_MAX];
        space_options_key(json_object_get(a, "options"), ka, sizeof ka);
        space_options_key(json_object_get(parent, "options"), kp, sizeof kp);
        assert_string_not_equal(ka, kp);
        json_decref(a);
        json_decref(b);
        made++;
      } else {
        refused++;
        json_decref(fail);
      }
      rc = p.propose_large(p.self, &req, &a, &fail);
      if (rc == 0) {
        char ka[SPACE_KEY_MAX], kd[SPACE_KEY_MAX];
        space_options_key(json_object_get(a, "options"), ka, sizeof ka);
        space_point_key(&sp.defaults, kd, sizeof kd);
        assert_string_not_equal(ka, kd);
        json_decref(a);
        made++;
      } else {
        refused++;
        json_decref(fail);
      }
      json_decref(node);
    }
    json_decref(parent);
    space_clear(&sp);
  }
  printf("  %zu space moves proposed, %zu refused (no point of their kind)\n", made, refused);
  assert_true(made >= N_SMALL * 4);
  json_decref(opts);
  proposer_clear(&p);
}

/* ---- (3) the table of valid points of the shared tasks ---- */

/* One generated region of a shared task, kept for the NVRTC sample. */
struct table_region {
  char task[700];
  size_t index;
  json_t *profile; /* owned */
  const char *module;
};

static struct table_region *g_regions; /* every generated region of the table */
static size_t g_nregions;

static json_t *g_counts; /* "module|match" -> [raw, valid] */

/* The raw and valid points of a region's space (memoized by its match). */
static void region_counts(json_t *profile, const char **ret_module, double *ret_raw,
                          size_t *ret_valid) {
  struct builtin_space sp;
  char why[512];
  if (space_open(&sp, profile, why, sizeof why) != 0)
    fail_msg("a generated region has no space: %s", why);
  char *m = json_dumps(sp.match, JSON_COMPACT | JSON_SORT_KEYS);
  size_t len = strlen(m) + strlen(sp.module) + 2;
  char *key = malloc(len);
  snprintf(key, len, "%s|%s", sp.module, m);
  free(m);
  json_t *c = json_object_get(g_counts, key);
  if (!c) {
    c = json_pack("[f, I]", sp.raw, (json_int_t)space_count(&sp));
    json_object_set_new(g_counts, key, c);
  }
  free(key);
  *ret_module = sp.module;
  *ret_raw = json_real_value(json_array_get(c, 0));
  *ret_valid = (size_t)json_integer_value(json_array_get(c, 1));
  space_clear(&sp);
}

static int cmp_size(const void *a, const void *b) {
  size_t x = *(const size_t *)a, y = *(const size_t *)b;
  return x < y ? -1 : x > y;
}

/* Prints a task's line(s): each region when it has at most 6, else per module the
 * number of regions and the least, median and largest count. */
static void print_task(const char *task, json_t *rows, size_t nregions) {
  size_t n = json_array_size(rows);
  if (n <= 6) {
    size_t i;
    json_t *r;
    json_array_foreach(rows, i, r)
        printf("  %-58s r%-3lld %-9s %7lld of %9.0f\n", i ? "" : task,
               (long long)json_integer_value(json_array_get(r, 0)),
               json_string_value(json_array_get(r, 1)),
               (long long)json_integer_value(json_array_get(r, 3)),
               json_real_value(json_array_get(r, 2)));
    if (n == 0)
      printf("  %-58s (no generated region of %zu)\n", task, nregions);
    return;
  }
  static const char *const modules[] = {"pointwise", "reduction", "softmax", "norm",
                                        "scan",      "pooling",   "loss",    "gemm",
                                        "attention", "conv"};
  bool first = true;
  for (size_t m = 0; m < sizeof modules / sizeof modules[0]; m++) {
    size_t vals[1024], k = 0, i;
    json_t *r;
    json_array_foreach(rows, i, r) {
      if (strcmp(json_string_value(json_array_get(r, 1)), modules[m]) == 0 && k < 1024)
        vals[k++] = (size_t)json_integer_value(json_array_get(r, 3));
    }
    if (!k)
      continue;
    qsort(vals, k, sizeof vals[0], cmp_size);
    printf("  %-58s %3zu x %-9s %7zu .. %zu .. %zu\n", first ? task : "", k, modules[m], vals[0],
           vals[k / 2], vals[k - 1]);
    first = false;
  }
}

static void test_valid_points_table(void **state) {
  (void)state;
  if (!need_evaluator()) {
    skip();
    return;
  }
  double t0 = now_s();
  struct proposer p;
  char why[256];
  assert_int_equal(proposer_open("builtin", NULL, &p, why, sizeof why), 0);
  g_counts = json_object();
  size_t tasks = 0, with_regions = 0, total_regions = 0, small_spaces = 0;
  size_t hundreds = 0;
  printf("  valid points per generated region (task, region index, family module, valid of "
         "the grid's points); tasks with more than 6 regions: per module, the regions and "
         "the least .. median .. largest count\n");
  for (int level = 1; level <= 3; level++) {
    char lv[16];
    snprintf(lv, sizeof lv, "level%d", level);
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls %s/%s", kernelbench_dir(), lv);
    FILE *ls = popen(cmd, "r");
    assert_non_null(ls);
    char name[512];
    while (fgets(name, sizeof name, ls)) {
      name[strcspn(name, "\n")] = 0;
      if (!strstr(name, ".py"))
        continue;
      char file[700];
      snprintf(file, sizeof file, "%s/%s", lv, name);
      json_t *profile = public_profile(file);
      struct partition pt;
      assert_int_equal(partition_build(profile, &p, &pt), 0);
      json_t *rows = json_array();
      size_t best = 0;
      for (size_t r = 0; r < pt.n; r++) {
        if (!pt.regions[r].generated)
          continue;
        const char *module;
        double raw;
        size_t valid;
        region_counts(pt.regions[r].profile, &module, &raw, &valid);
        json_array_append_new(rows, json_pack("[I, s, f, I]", (json_int_t)r, module, raw,
                                              (json_int_t)valid));
        if (valid < 10)
          small_spaces++;
        best = valid > best ? valid : best;
        g_regions = realloc(g_regions, (g_nregions + 1) * sizeof *g_regions);
        struct table_region *tr = &g_regions[g_nregions++];
        snprintf(tr->task, sizeof tr->task, "%s", file);
        tr->index = r;
        tr->profile = json_incref(pt.regions[r].profile);
        tr->module = module;
      }
      print_task(file, rows, pt.n);
      fflush(stdout); /* before the evaluator's warnings on stderr */
      tasks++;
      with_regions += json_array_size(rows) > 0;
      total_regions += json_array_size(rows);
      hundreds += best >= 100;
      json_decref(rows);
      partition_clear(&pt);
    }
    pclose(ls);
  }
  printf("  %zu tasks, %zu with generated regions (%zu regions, %zu distinct matches); %zu "
         "tasks have a region of 100 or more valid points; %zu regions have fewer than 10 "
         "(%.1f s)\n",
         tasks, with_regions, total_regions, json_object_size(g_counts), hundreds, small_spaces,
         now_s() - t0);
  assert_int_equal(tasks, 95);
  assert_true(with_regions >= 80);
  assert_true(hundreds >= with_regions / 2);
  proposer_clear(&p);
}

/* ---- (4) NVRTC compiles of a sample, without spills ---- */

/* Up to per_module regions of each module from the table (distinct tasks first), as
 * indexes into g_regions. */
static size_t pick_regions(size_t per_module, size_t *out, size_t cap) {
  static const char *const modules[] = {"pointwise", "reduction", "softmax", "norm",
                                        "scan",      "pooling",   "loss",    "gemm",
                                        "attention", "conv"};
  size_t n = 0;
  for (size_t m = 0; m < sizeof modules / sizeof modules[0]; m++) {
    size_t taken = 0;
    const char *last_task = "";
    for (size_t i = 0; i < g_nregions && taken < per_module && n < cap; i++) {
      if (strcmp(g_regions[i].module, modules[m]) != 0 || strcmp(g_regions[i].task, last_task) == 0)
        continue;
      out[n++] = i;
      taken++;
      last_task = g_regions[i].task;
    }
  }
  return n;
}

/* Candidates to compile ({"source", "options", "tag"}), shared by two threads. */
struct compile_job {
  json_t *cands;
  size_t next, failed, spilled;
  pthread_mutex_t lock;
};

static void *compile_worker(void *arg) {
  struct compile_job *q = arg;
  for (;;) {
    pthread_mutex_lock(&q->lock);
    json_t *c = json_array_get(q->cands, q->next++);
    pthread_mutex_unlock(&q->lock);
    if (!c)
      return NULL;
    const char *opts[NVRTC_MAX_OPTIONS];
    size_t no = 0, j;
    json_t *o;
    json_array_foreach(json_object_get(c, "options"), j, o) opts[no++] = json_string_value(o);
    struct compile_request req = {json_string_value(json_object_get(c, "source")), opts, no,
                                  "sm_90a", GPU_PREC_FP32, NULL};
    struct compile_result r;
    if (nvrtc_compile(&req, &r) != 0)
      continue;
    const char *tag = json_string_value(json_object_get(c, "tag"));
    pthread_mutex_lock(&q->lock);
    if (!r.ok) {
      q->failed++;
      printf("  COMPILE FAILED %s: %.600s\n", tag, r.log ? r.log : "");
    } else {
      /* A few bytes (at most 16, as test_builtin_gemm allows the 3xTF32 kernel) are a
       * local array's, not registers spilled under pressure: printed, not failed. */
      q->spilled += r.spills > 16;
      printf("  %-8s %3d regs %4ld spill bytes  %s\n",
             r.spills > 16 ? "SPILLS" : r.spills ? "ok-small" : "ok", r.registers, r.spills, tag);
    }
    pthread_mutex_unlock(&q->lock);
    compile_result_clear(&r);
  }
}

/* A positive integer from the environment variable name, else dflt. */
static int env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  int n = v ? atoi(v) : 0;
  return n > 0 ? n : dflt;
}

static void test_nvrtc_sample(void **state) {
  (void)state;
  if (!g_nregions) {
    printf("needs the table of the shared tasks (KernelBench and the python venv)\n");
    skip();
    return;
  }
  double t0 = now_s();
  /* OPFORGE_SPACE_REGIONS regions per module (2), OPFORGE_SPACE_POINTS points each (3). */
  size_t picked[256];
  size_t n = pick_regions((size_t)env_int("OPFORGE_SPACE_REGIONS", 2), picked, 256);
  int per_region = env_int("OPFORGE_SPACE_POINTS", 3);
  json_t *cands = json_array();
  for (size_t i = 0; i < n; i++) {
    struct table_region *tr = &g_regions[picked[i]];
    struct builtin_space sp;
    char why[512];
    assert_int_equal(space_open(&sp, tr->profile, why, sizeof why), 0);
    struct space_rng rng;
    space_rng_seed(&rng, space_hash((uint64_t)env_int("OPFORGE_SPACE_SEED", 1), tr->task));
    for (int s = 0; s < per_region; s++) {
      struct knob_set k;
      assert_int_equal(space_sample(&sp, &rng, NULL, 0, 0, &k), 0);
      json_t *cand = NULL;
      if (sp.family->generate(sp.match, &k, &cand, why, sizeof why) != 0)
        fail_msg("%s r%zu: a valid point does not generate: %s", tr->task, tr->index, why);
      char key[SPACE_KEY_MAX], tag[1200];
      space_point_key(&k, key, sizeof key);
      snprintf(tag, sizeof tag, "%s r%zu %s %s", tr->task, tr->index, sp.module, key);
      json_object_set_new(cand, "tag", json_string(tag));
      json_array_append_new(cands, cand);
    }
    space_clear(&sp);
  }
  /* Compile each with NVRTC, two at a time, and read its spills. */
  struct compile_job job = {.cands = cands};
  pthread_mutex_init(&job.lock, NULL);
  pthread_t th[2];
  for (int t = 0; t < 2; t++)
    assert_int_equal(pthread_create(&th[t], NULL, compile_worker, &job), 0);
  for (int t = 0; t < 2; t++)
    pthread_join(th[t], NULL);
  pthread_mutex_destroy(&job.lock);
  size_t failed = job.failed, spilled = job.spilled;
  printf("  %zu sampled points of %zu regions compiled: %zu failed, %zu spilled (%.1f s)\n",
         json_array_size(cands), n, failed, spilled, now_s() - t0);
  assert_int_equal(failed, 0);
  assert_int_equal(spilled, 0);
  json_decref(cands);
}

/* ---- (5) the CPU emulator against PyTorch on a smaller sample ---- */

static char *small_source_fn(size_t i, const char **ret_name) {
  *ret_name = small_tasks[i].name;
  return strdup(small_tasks[i].source);
}

/* Points the CPU emulator runs: not the tensor-core (mma) kernels, which it does not
 * emulate, and not TF32-rounded convolutions, whose reference is the fp32 CPU one. */
static bool emulated(const struct knob_set *k) {
  return strcmp(k->mode, "tf32x3") != 0 && strcmp(k->mode, "tf32_rna") != 0;
}

static void test_emulated_sample(void **state) {
  (void)state;
  if (!g_have_ev || system("c++ --version > /dev/null 2>&1") != 0) {
    printf("needs KernelBench, the python venv and a C++ compiler\n");
    skip();
    return;
  }
  double t0 = now_s();
  char tmp[] = "/tmp/opforge-space-emu-XXXXXX";
  assert_non_null(mkdtemp(tmp));
  prepare_tasks(tmp, N_SMALL, small_source_fn);
  char prog[1100];
  snprintf(prog, sizeof prog, "%s/emu.cpp", tmp);
  FILE *f = fopen(prog, "w");
  assert_non_null(f);
  for (size_t i = 0; emu_cuda_prelude[i]; i++)
    fprintf(f, "%s\n", emu_cuda_prelude[i]);
  json_t *runs = json_array();
  for (size_t t = 0; t < N_SMALL; t++) {
    /* The shared emulator has no __shfl_up_sync or atomics: scans are emulated by
     * test_builtin_scan_pool_loss's own. */
    if (strcmp(small_tasks[t].module, "scan") == 0)
      continue;
    struct builtin_space sp;
    small_space(t, &sp);
    json_t *profile = small_profile(t);
    struct space_rng rng;
    space_rng_seed(&rng, space_hash(0, small_tasks[t].name));
    for (int s = 0, tries = 0; s < 2 && tries < 200; tries++) {
      struct knob_set k;
      assert_int_equal(space_sample(&sp, &rng, NULL, 0, 0, &k), 0);
      if (!emulated(&k))
        continue;
      char why[512], ns[64], dir[1100], result[1200], key[SPACE_KEY_MAX];
      json_t *cand = NULL;
      if (sp.family->generate(sp.match, &k, &cand, why, sizeof why) != 0)
        fail_msg("%s: %s", small_tasks[t].name, why);
      space_point_key(&k, key, sizeof key);
      snprintf(ns, sizeof ns, "c%zu", json_array_size(runs));
      snprintf(dir, sizeof dir, "%s/%s", tmp, small_tasks[t].name);
      snprintf(result, sizeof result, "%s/result_%d.bin", dir, s);
      write_candidate(f, ns, profile, cand, dir, result);
      json_t *out = json_array_get(json_object_get(profile, "outputs"), 0);
      json_array_append_new(runs, json_pack("{s:s, s:s, s:s, s:s, s:O}", "ns", ns, "dir", dir,
                                            "result", result, "what", key, "dtype",
                                            json_object_get(out, "dtype")));
      json_decref(cand);
      s++;
    }
    space_clear(&sp);
  }
  fprintf(f, "int main() {\n");
  size_t i;
  json_t *r;
  json_array_foreach(runs, i, r) fprintf(f, "  %s::run();\n", json_string_value(json_object_get(r, "ns")));
  fprintf(f, "  return 0;\n}\n");
  assert_int_equal(fclose(f), 0);
  char cmd[4096];
  const char *cxx = getenv("CXX") && getenv("CXX")[0] ? getenv("CXX") : "c++";
  snprintf(cmd, sizeof cmd, "%s -std=c++17 -O1 -w -pthread -o %s/emu %s && %s/emu", cxx, tmp,
           prog, tmp);
  assert_int_equal(system(cmd), 0);
  check_runs(runs, 7, 70);
  printf("  (%.1f s)\n", now_s() - t0);
  json_decref(runs);
  snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
  assert_int_equal(system(cmd), 0);
}

static int teardown_all(void **state) {
  for (size_t i = 0; i < g_nregions; i++)
    json_decref(g_regions[i].profile);
  free(g_regions);
  g_regions = NULL;
  g_nregions = 0;
  json_decref(g_counts);
  g_counts = NULL;
  return group_teardown(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_point_key),
      cmocka_unit_test(test_space_api),
      cmocka_unit_test(test_proposer_moves),
      cmocka_unit_test(test_valid_points_table),
      cmocka_unit_test(test_nvrtc_sample),
      cmocka_unit_test(test_emulated_sample),
  };
  return cmocka_run_group_tests(tests, builtin_group_setup, teardown_all);
}
