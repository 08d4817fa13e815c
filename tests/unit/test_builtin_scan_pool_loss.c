/* Unit tests of the builtin scan, pooling and loss families: matching of every public
 * task (through one evaluator process on the meta device) and of small programs for the
 * forms the public set lacks, refusals of knob moves with their reasons, generated plans
 * checked by hand, NVRTC compiles of every template under every seed-memory move, and
 * generated kernels run in a CPU emulation of CUDA against PyTorch. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/loss.h"
#include "proposers/builtin/pooling.h"
#include "proposers/builtin/propose.h"
#include "proposers/builtin/scan.h"
#include "gpu/nvrtc_compile.h"

#include "builtin_testlib.h"

static const struct builtin_family *const mine[] = {&builtin_family_scan,
                                                    &builtin_family_pooling,
                                                    &builtin_family_loss};
#define N_MINE (sizeof mine / sizeof mine[0])

/* ---- environment: source tree, KernelBench, the venv's python ---- */

static const char *source_root(void) {
  const char *r = getenv("OPFORGE_SOURCE_ROOT");
  return r && r[0] ? r : NULL;
}

/* ---- one evaluator process speaking JSON lines (docs/architecture.md, "Evaluator protocol") ---- */

/* The evaluator the tests share (started on first use, stopped by the group teardown). */
static struct evaluator shared_ev;
static bool shared_ev_started, shared_ev_tried;

static struct evaluator *shared_evaluator(void) {
  if (!shared_ev_tried && kernelbench_dir())
    shared_ev_started = evaluator_start(&shared_ev);
  shared_ev_tried = true;
  return shared_ev_started ? &shared_ev : NULL;
}

static int stop_shared_evaluator(void **state) {
  (void)state;
  if (shared_ev_started)
    evaluator_stop(&shared_ev);
  shared_ev_started = false;
  return 0;
}

/* The profile of kernelbench/<file> (caller owns), or NULL when the file is absent. */
static json_t *task_profile(struct evaluator *ev, const char *file) {
  char path[2048];
  snprintf(path, sizeof path, "%s/%s", kernelbench_dir(), file);
  char *src = read_file(path);
  if (!src)
    return NULL;
  json_t *p = evaluator_profile(ev, file, src);
  free(src);
  assert_non_null(p);
  return p;
}

/* Runs every family of mine on profile; returns the index of the one that matched (with
 * *ret_match, caller owns), or -1. Families other than `expect` must answer 0 or -1. */
static int run_families(json_t *profile, json_t **ret_match, char *why, size_t whylen) {
  int hit = -1;
  for (size_t f = 0; f < N_MINE; f++) {
    json_t *m = NULL;
    char one[512] = "";
    int rc = mine[f]->match(profile, &m, one, sizeof one);
    assert_true(rc >= -1 && rc <= 1);
    if (rc == 1) {
      assert_int_equal(hit, -1); /* at most one of my families claims a task */
      hit = (int)f;
      *ret_match = m;
    } else if (rc < 0) {
      assert_true(one[0] != '\0'); /* a refusal always says why */
      snprintf(why, whylen, "%s: %s", mine[f]->name, one);
    }
  }
  return hit;
}

/* Asserts that each key of the JSON object `fields` has that value in match. */
static void assert_fields(json_t *match, const char *fields) {
  json_error_t err;
  json_t *want = json_loads(fields, 0, &err);
  assert_non_null(want);
  const char *key;
  json_t *v;
  json_object_foreach(want, key, v) {
    json_t *got = json_object_get(match, key);
    if (!json_equal(got, v)) {
      char *g = got ? json_dumps(got, JSON_ENCODE_ANY) : NULL;
      printf("field %s: got %s, want %s\n", key, g ? g : "(absent)", fields);
      free(g);
    }
    assert_true(json_equal(got, v));
  }
  json_decref(want);
}

/* Defaults must pass check and generate a candidate naming its kernels. */
static void assert_defaults_generate(const struct builtin_family *fam, json_t *match) {
  struct knob_set k;
  char why[512] = "";
  fam->defaults(match, &k);
  if (fam->check(match, &k, why, sizeof why) != 0)
    printf("defaults refused: %s\n", why);
  assert_int_equal(fam->check(match, &k, why, sizeof why), 0);
  json_t *cand = NULL;
  assert_int_equal(fam->generate(match, &k, &cand, why, sizeof why), 0);
  const char *src = json_string_value(json_object_get(cand, "source"));
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(json_object_get(cand, "plan"), "launches"), i, l) {
    char decl[160];
    snprintf(decl, sizeof decl, "__global__ void OFG_BOUNDS %s(",
             json_string_value(json_object_get(l, "kernel")));
    assert_non_null(strstr(src, decl));
  }
  json_decref(cand);
}

/* ---- every public task of the three families, and none of the others ---- */

struct expect {
  const char *file;
  const char *family, *op;
  const char *fields; /* JSON object of further keys the match must carry */
};

static const struct expect public_tasks[] = {
    {"level1/41_Max_Pooling_1D.py", "pooling", "max_pool1d",
     "{\"canonical\": [12288, 1, 1, 65536], \"out\": [1, 1, 65523], \"kernel\": [1, 1, 8],"
     " \"stride\": [1, 1, 1], \"padding\": [0, 0, 4], \"dilation\": [1, 1, 3],"
     " \"ceil_mode\": false}"},
    {"level1/42_Max_Pooling_2D.py", "pooling", "max_pool2d",
     "{\"canonical\": [2048, 1, 512, 512], \"out\": [1, 511, 511], \"kernel\": [1, 4, 4],"
     " \"stride\": [1, 1, 1], \"padding\": [0, 1, 1], \"dilation\": [1, 1, 1]}"},
    {"level1/44_Average_Pooling_1D.py", "pooling", "avg_pool1d",
     "{\"canonical\": [8192, 1, 1, 65536], \"out\": [1, 1, 65537], \"kernel\": [1, 1, 8],"
     " \"stride\": [1, 1, 1], \"padding\": [0, 0, 4], \"count_include_pad\": true,"
     " \"divisor_override\": 0}"},
    {"level1/45_Average_Pooling_2D.py", "pooling", "avg_pool2d",
     "{\"canonical\": [1024, 1, 2048, 2048], \"out\": [1, 186, 186], \"kernel\": [1, 11, 11],"
     " \"stride\": [1, 11, 11], \"padding\": [0, 0, 0], \"count_include_pad\": true}"},
    {"level1/82_conv_depthwise_2D_square_input_square_kernel.py", "pooling",
     "depthwise_conv2d",
     "{\"canonical\": [1024, 1, 512, 512], \"out\": [1, 510, 510], \"kernel\": [1, 3, 3],"
     " \"stride\": [1, 1, 1], \"padding\": [0, 0, 0], \"dilation\": [1, 1, 1],"
     " \"conv\": {\"channels\": 64, \"weight\": \"param:conv2d.weight\", \"bias\": null}}"},
    {"level1/85_conv_depthwise_2D_asymmetric_input_asymmetric_kernel.py", "pooling",
     "depthwise_conv2d",
     "{\"canonical\": [4096, 1, 128, 256], \"out\": [1, 126, 250], \"kernel\": [1, 3, 7],"
     " \"stride\": [1, 1, 1], \"padding\": [0, 0, 0],"
     " \"conv\": {\"channels\": 128, \"weight\": \"param:conv2d.weight\", \"bias\": null}}"},
    {"level1/89_cumsum.py", "scan", "cumsum",
     "{\"canonical\": [32768, 32768, 1], \"dim\": 1, \"reverse\": false, \"exclusive\": \"none\","
     " \"mask\": \"none\", \"rows_out\": 32768, \"r_out\": 32768}"},
    {"level1/91_cumsum_reverse.py", "scan", "cumsum",
     "{\"canonical\": [32768, 32768, 1], \"dim\": 1, \"reverse\": true, \"exclusive\": \"none\","
     " \"mask\": \"none\"}"},
    {"level1/93_masked_cumsum.py", "scan", "cumsum",
     "{\"canonical\": [32768, 32768, 1], \"dim\": 1, \"reverse\": false, \"mask\": \"bool\","
     " \"tensors\": {\"x\": \"input:0\", \"mask\": \"input:1\", \"out\": \"output:0\"}}"},
    {"level1/94_MSELoss.py", "loss", "mse",
     "{\"canonical\": [1073741824], \"reduction\": \"mean\", \"divisor\": 1073741824.0,"
     " \"expr\": \"ofg_sq((x0 - x1))\"}"},
    {"level1/95_CrossEntropyLoss.py", "loss", "cross_entropy",
     "{\"canonical\": [32768, 4096], \"reduction\": \"mean\", \"ignore_index\": -100,"
     " \"tensors\": [\"input:0\", \"input:1\"]}"},
    {"level1/96_HuberLoss.py", "loss", "smooth_l1",
     "{\"canonical\": [1073741824], \"reduction\": \"mean\","
     " \"expr\": \"ofg_smooth_l1((x0) - (x1), 1.0f)\"}"},
    {"level1/99_TripletMarginLoss.py", "loss", "triplet_margin",
     "{\"canonical\": [32768, 8192], \"reduction\": \"mean\", \"margin\": 1.0, \"p\": 2,"
     " \"eps\": 1e-06, \"swap\": false, \"divisor\": 32768.0}"},
};

static const struct expect *find_public(const char *file) {
  for (size_t i = 0; i < sizeof public_tasks / sizeof public_tasks[0]; i++)
    if (strcmp(public_tasks[i].file, file) == 0)
      return &public_tasks[i];
  return NULL;
}

static void check_public(const struct expect *e, json_t *profile) {
  json_t *m = NULL;
  char why[600] = "";
  int hit = run_families(profile, &m, why, sizeof why);
  printf("%-45s %s\n", e->file,
         hit >= 0 ? json_string_value(json_object_get(m, "summary")) : why);
  assert_true(hit >= 0);
  assert_string_equal(mine[hit]->name, e->family);
  assert_string_equal(json_string_value(json_object_get(m, "family")), e->family);
  assert_string_equal(json_string_value(json_object_get(m, "op")), e->op);
  assert_fields(m, e->fields);
  assert_defaults_generate(mine[hit], m);
  json_decref(m);
  /* The registry reaches the same family (no family before it claims the task). */
  const struct builtin_family *fam = NULL;
  json_t *rm = NULL;
  assert_int_equal(builtin_match(profile, &fam, &rm, why, sizeof why), 0);
  assert_string_equal(fam->name, e->family);
  json_decref(rm);
}

/* The *.py files of kernelbench/<level>, sorted (caller frees the array and strings). */
static char **list_tasks(const char *level, size_t *ret_n) {
  char dir[1200];
  snprintf(dir, sizeof dir, "%s/%s", kernelbench_dir(), level);
  struct dirent **ents = NULL;
  int n = scandir(dir, &ents, NULL, alphasort);
  char **out = calloc(n > 0 ? (size_t)n : 1, sizeof *out);
  size_t k = 0;
  for (int i = 0; i < n; i++) {
    size_t len = strlen(ents[i]->d_name);
    if (len > 3 && strcmp(ents[i]->d_name + len - 3, ".py") == 0) {
      size_t cap = strlen(level) + len + 2;
      out[k] = malloc(cap);
      assert_non_null(out[k]);
      snprintf(out[k++], cap, "%s/%s", level, ents[i]->d_name);
    }
    free(ents[i]);
  }
  free(ents);
  *ret_n = k;
  return out;
}

/* Every task of levels 1 and 2: the public tasks of my families match exactly as listed;
 * no other task (convolutions, GEMMs, norms, level-2 fusions) is claimed by them. */
static void test_match_public_tasks(void **state) {
  (void)state;
  struct evaluator *ev = shared_evaluator();
  if (!ev) {
    skip();
    return;
  }
  static const char *const levels[] = {"level1", "level2"};
  size_t found = 0;
  for (size_t lv = 0; lv < 2; lv++) {
    size_t n;
    char **files = list_tasks(levels[lv], &n);
    for (size_t i = 0; i < n; i++) {
      json_t *profile = task_profile(ev, files[i]);
      const struct expect *e = find_public(files[i]);
      if (e) {
        check_public(e, profile);
        found++;
      } else {
        json_t *m = NULL;
        char why[600] = "";
        int hit = run_families(profile, &m, why, sizeof why);
        printf("%-45s %s\n", files[i], hit >= 0 ? "CLAIMED" : why[0] ? why : "not ours");
        assert_int_equal(hit, -1);
      }
      json_decref(profile);
      free(files[i]);
    }
    free(files);
  }
  assert_int_equal(found, sizeof public_tasks / sizeof public_tasks[0]);
}

/* ---- the forms the public tasks lack, as small programs of our own ---- */

#define PY_HEAD "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
#define PY_NOINIT "def get_init_inputs():\n    return []\n"

struct synthetic {
  const char *name, *source;
  const char *family; /* the family that answers (NULL: none of mine claims it) */
  int rc;             /* that family's answer */
  const char *op, *fields, *why;
};

static const struct synthetic synthetics[] = {
    {"cumprod_dim0",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x):\n"
             "        return torch.cumprod(x, dim=0)\n"
             "def get_inputs():\n    return [torch.rand(30, 8, 5)]\n" PY_NOINIT,
     "scan", 1, "cumprod", "{\"canonical\": [1, 30, 40], \"dim\": 0}", NULL},
    {"exclusive_cat",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x):\n"
             "        e = torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), x), "
             "dim=1)[:-1]\n        return torch.cumsum(e, dim=1)\n"
             "def get_inputs():\n    return [torch.rand(64, 1000)]\n" PY_NOINIT,
     "scan", 1, "cumsum",
     "{\"canonical\": [64, 1000, 1], \"exclusive\": \"pad\", \"pad_value\": 0.0,"
     " \"rows_out\": 63, \"r_out\": 1001}", NULL},
    /* KernelBench's exclusive spelling: the pad concatenated after the scan of a prefix. */
    {"exclusive_narrow",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x):\n"
             "        c = torch.cumsum(x.narrow(dim=1, start=0, length=x.size(1) - 1), dim=1)\n"
             "        return torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), c), dim=1)\n"
             "def get_inputs():\n    return [torch.rand(16, 300)]\n" PY_NOINIT,
     "scan", 1, "cumsum",
     "{\"canonical\": [16, 300, 1], \"exclusive\": \"pad\", \"pad_value\": 0.0,"
     " \"rows_out\": 16, \"r_out\": 300}", NULL},
    {"exclusive_slice_cumprod",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x):\n"
             "        return torch.cat((torch.ones_like(x[:, :1]), torch.cumprod(x[:, :-1], 1)), 1)\n"
             "def get_inputs():\n    return [0.5 + torch.rand(8, 40)]\n" PY_NOINIT,
     "scan", 1, "cumprod",
     "{\"canonical\": [8, 40, 1], \"exclusive\": \"pad\", \"pad_value\": 1.0,"
     " \"rows_out\": 8, \"r_out\": 40}", NULL},
    {"exclusive_wrong_pad",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x):\n"
             "        return torch.cat((torch.ones_like(x[:, :1]), torch.cumsum(x[:, :-1], 1)), 1)\n"
             "def get_inputs():\n    return [torch.rand(8, 40)]\n" PY_NOINIT,
     "scan", -1, NULL, NULL,
     "exclusive scan: expected cat((zeros_like(..), cumsum), dim=1) after the scan"},
    {"exclusive_sub",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x):\n"
             "        return torch.cumsum(x, -1) - x\n"
             "def get_inputs():\n    return [torch.rand(16, 512)]\n" PY_NOINIT,
     "scan", 1, "cumsum", "{\"canonical\": [16, 512, 1], \"exclusive\": \"sub_self\"}", NULL},
    {"reverse_masked",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x, m):\n"
             "        return torch.cumsum((x * m).flip(1), 1).flip(1)\n"
             "def get_inputs():\n    x = torch.rand(32, 256)\n"
             "    return [x, torch.rand(32, 256) > 0.5]\n" PY_NOINIT,
     "scan", 1, "cumsum", "{\"canonical\": [32, 256, 1], \"reverse\": true, \"mask\": \"bool\"}",
     NULL},
    {"flip_after_only",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x):\n"
             "        return torch.cumsum(x, 1).flip(1)\n"
             "def get_inputs():\n    return [torch.rand(4, 64)]\n" PY_NOINIT,
     "scan", -1, NULL, NULL,
     "reverse scan: flip(dim=1) must come both before and after the scan"},
    {"scan_then_scale",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x):\n"
             "        return torch.cumsum(x, 1) * 2\n"
             "def get_inputs():\n    return [torch.rand(4, 64)]\n" PY_NOINIT,
     "scan", -1, NULL, NULL,
     "scan followed by operator.mul: only flip (reverse) or subtracting the scanned input "
     "(exclusive) are supported"},
    {"max_pool3d",
     PY_HEAD "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.p = nn.MaxPool3d(3, stride=2, padding=1, dilation=2)\n"
             "    def forward(self, x):\n        return self.p(x)\n"
             "def get_inputs():\n    return [torch.rand(2, 4, 16, 16, 16)]\n" PY_NOINIT,
     "pooling", 1, "max_pool3d",
     "{\"canonical\": [8, 16, 16, 16], \"out\": [7, 7, 7], \"kernel\": [3, 3, 3],"
     " \"stride\": [2, 2, 2], \"padding\": [1, 1, 1], \"dilation\": [2, 2, 2]}", NULL},
    {"avg_pool2d_functional",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x):\n"
             "        return F.avg_pool2d(x, 3, stride=2, padding=1, ceil_mode=True, "
             "count_include_pad=False)\n"
             "def get_inputs():\n    return [torch.rand(2, 3, 17, 20)]\n" PY_NOINIT,
     "pooling", 1, "avg_pool2d",
     "{\"canonical\": [6, 1, 17, 20], \"out\": [1, 9, 11], \"kernel\": [1, 3, 3],"
     " \"ceil_mode\": true, \"count_include_pad\": false}", NULL},
    {"avg_pool3d",
     PY_HEAD "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.p = nn.AvgPool3d(kernel_size=3, stride=2, padding=1)\n"
             "    def forward(self, x):\n        return self.p(x)\n"
             "def get_inputs():\n    return [torch.rand(2, 2, 8, 9, 12)]\n" PY_NOINIT,
     "pooling", 1, "avg_pool3d", "{\"canonical\": [4, 8, 9, 12], \"out\": [4, 5, 6]}", NULL},
    {"max_pool_indices",
     PY_HEAD "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.p = nn.MaxPool2d(2, return_indices=True)\n"
             "    def forward(self, x):\n        return self.p(x)\n"
             "def get_inputs():\n    return [torch.rand(2, 3, 8, 8)]\n" PY_NOINIT,
     "pooling", -1, NULL, NULL,
     "max_pool2d with return_indices=True (two outputs) is not supported"},
    /* Depthwise convolution (groups = in = out channels), as a module with a bias and
     * as conv2d on parameters; a grouped convolution with two outputs per group and an
     * ordinary one stay library steps (no family claims them). */
    {"dw_conv_module",
     PY_HEAD "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.c = nn.Conv2d(4, 4, 3, padding=1, groups=4)\n"
             "    def forward(self, x):\n        return self.c(x)\n"
             "def get_inputs():\n    return [torch.rand(2, 4, 8, 9)]\n" PY_NOINIT,
     "pooling", 1, "depthwise_conv2d",
     "{\"canonical\": [8, 1, 8, 9], \"out\": [1, 8, 9], \"kernel\": [1, 3, 3],"
     " \"padding\": [0, 1, 1], \"conv\": {\"channels\": 4, \"weight\": \"param:c.weight\","
     " \"bias\": \"param:c.bias\"}}", NULL},
    {"dw_conv_functional",
     PY_HEAD "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.w = nn.Parameter(torch.randn(6, 1, 3, 3))\n"
             "    def forward(self, x):\n"
             "        return F.conv2d(x, self.w, None, 2, 1, 1, 6)\n"
             "def get_inputs():\n    return [torch.rand(2, 6, 9, 10)]\n" PY_NOINIT,
     "pooling", 1, "depthwise_conv2d",
     "{\"canonical\": [12, 1, 9, 10], \"out\": [1, 5, 5], \"kernel\": [1, 3, 3],"
     " \"stride\": [1, 2, 2], \"padding\": [0, 1, 1], \"conv\": {\"channels\": 6,"
     " \"weight\": \"param:w\", \"bias\": null}}", NULL},
    {"conv_grouped",
     PY_HEAD "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.c = nn.Conv2d(4, 8, 3, groups=4)\n"
             "    def forward(self, x):\n        return self.c(x)\n"
             "def get_inputs():\n    return [torch.rand(2, 4, 8, 8)]\n" PY_NOINIT,
     NULL, 0, NULL, NULL, NULL},
    {"conv_functional_dense",
     PY_HEAD "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.w = nn.Parameter(torch.randn(8, 4, 3, 3))\n"
             "    def forward(self, x):\n        return F.conv2d(x, self.w)\n"
             "def get_inputs():\n    return [torch.rand(2, 4, 8, 8)]\n" PY_NOINIT,
     NULL, 0, NULL, NULL, NULL},
    /* Pooling with the pointwise ops around it fused: a prologue reading a broadcast
     * scale and an epilogue. */
    {"pool_chain",
     PY_HEAD "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
             "        self.s = nn.Parameter(torch.rand(3, 1, 1))\n"
             "        self.p = nn.MaxPool2d(3, stride=2, padding=1)\n"
             "    def forward(self, x):\n"
             "        return torch.clamp(self.p(F.relu(x) * self.s), 0.1, 0.6)\n"
             "def get_inputs():\n    return [torch.randn(2, 3, 12, 16)]\n" PY_NOINIT,
     "pooling", 1, "max_pool2d",
     "{\"canonical\": [6, 1, 12, 16], \"out\": [1, 6, 8], \"tensors\": {\"x\": \"input:0\","
     " \"out\": \"output:0\"}}", NULL},
    {"pool_then_softmax",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x):\n"
             "        return torch.softmax(F.max_pool2d(x, 2), dim=1)\n"
             "def get_inputs():\n    return [torch.randn(2, 3, 8, 8)]\n" PY_NOINIT,
     "pooling", -1, NULL, NULL, "softmax next to the pooling op is not elementwise"},
    {"kl_div_batchmean",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, p, t):\n"
             "        return F.kl_div(torch.log(p), t, reduction='batchmean')\n"
             "def get_inputs():\n    return [torch.rand(64, 128).softmax(-1), "
             "torch.rand(64, 128).softmax(-1)]\n" PY_NOINIT,
     "loss", 1, "kl_div",
     "{\"canonical\": [8192], \"reduction\": \"batchmean\", \"divisor\": 64.0,"
     " \"expr\": \"ofg_kl_logp((x1), x0)\", \"transcendental\": true}",
     NULL},
    {"kl_div_log_target",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, p, t):\n"
             "        return F.kl_div(p, t, reduction='sum', log_target=True)\n"
             "def get_inputs():\n    return [torch.rand(8, 50), torch.rand(8, 50)]\n" PY_NOINIT,
     "loss", 1, "kl_div",
     "{\"reduction\": \"sum\", \"expr\": \"(OFG_EXPF(x1) * ((x1) - (x0)))\"}", NULL},
    {"hinge_broadcast",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, p, t):\n"
             "        return torch.mean(torch.clamp(1 - p * t, min=0))\n"
             "def get_inputs():\n    return [torch.rand(128, 256), "
             "torch.randint(0, 2, (256,)).float() * 2 - 1]\n" PY_NOINIT,
     "loss", 1, "hinge",
     "{\"canonical\": [32768], \"leaves\": [{\"tensor\": \"input:0\", \"index\": \"\"},"
     " {\"tensor\": \"input:1\", \"index\": \"(0 + ((idx_t)(e / 1) % 256) * 1)\"}]}", NULL},
    {"huber_delta",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, a, b):\n"
             "        return F.huber_loss(a, b, delta=0.5, reduction='sum')\n"
             "def get_inputs():\n    return [torch.rand(16, 64), torch.rand(16, 64)]\n" PY_NOINIT,
     "loss", 1, "huber",
     "{\"reduction\": \"sum\", \"expr\": \"ofg_huber((x0) - (x1), 0.5f)\"}", NULL},
    {"cosine",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, a, b):\n"
             "        return torch.mean(1 - F.cosine_similarity(a, b, dim=1))\n"
             "def get_inputs():\n    return [torch.rand(64, 300), torch.rand(64, 300)]\n"
             PY_NOINIT,
     "loss", 1, "cosine", "{\"canonical\": [64, 300], \"eps\": 1e-08, \"divisor\": 64.0}", NULL},
    {"cross_entropy_ignore",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x, t):\n"
             "        return F.cross_entropy(x, t, ignore_index=3)\n"
             "def get_inputs():\n    return [torch.rand(40, 10), torch.randint(0, 10, (40,))]\n"
             PY_NOINIT,
     "loss", 1, "cross_entropy", "{\"canonical\": [40, 10], \"ignore_index\": 3}", NULL},
    {"cross_entropy_smoothing",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x, t):\n"
             "        return F.cross_entropy(x, t, label_smoothing=0.1)\n"
             "def get_inputs():\n    return [torch.rand(40, 10), torch.randint(0, 10, (40,))]\n"
             PY_NOINIT,
     "loss", -1, NULL, NULL,
     "cross_entropy: only float32 [N, C] logits with int64 [N] targets, no weight, no label "
     "smoothing, reduction mean or sum"},
    {"mse_no_reduction",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, a, b):\n"
             "        return F.mse_loss(a, b, reduction='none')\n"
             "def get_inputs():\n    return [torch.rand(16, 64), torch.rand(16, 64)]\n" PY_NOINIT,
     "loss", -1, NULL, NULL, "mse_loss: reduction='none' gives a tensor, not a scalar loss"},
    {"plain_mean",
     PY_HEAD "class Model(nn.Module):\n    def forward(self, x):\n        return torch.mean(x)\n"
             "def get_inputs():\n    return [torch.rand(16, 64)]\n" PY_NOINIT,
     NULL, 0, NULL, NULL, NULL},
};

/* Each program is claimed by the listed family only (or by none), with the listed op and
 * fields, or refused with the listed reason. */
static void test_match_synthetic(void **state) {
  (void)state;
  struct evaluator *ev = shared_evaluator();
  if (!ev) {
    skip();
    return;
  }
  for (size_t i = 0; i < sizeof synthetics / sizeof synthetics[0]; i++) {
    const struct synthetic *t = &synthetics[i];
    json_t *profile = evaluator_profile(ev, t->name, t->source);
    assert_non_null(profile);
    for (size_t f = 0; f < N_MINE; f++) {
      json_t *m = NULL;
      char why[512] = "";
      int rc = mine[f]->match(profile, &m, why, sizeof why);
      bool listed = t->family && strcmp(t->family, mine[f]->name) == 0;
      printf("%-24s %-8s %2d %s\n", t->name, mine[f]->name, rc,
             rc == 1 ? json_string_value(json_object_get(m, "summary")) : why);
      assert_int_equal(rc, listed ? t->rc : 0);
      if (rc == 1) {
        assert_string_equal(json_string_value(json_object_get(m, "op")), t->op);
        assert_fields(m, t->fields);
        assert_defaults_generate(mine[f], m);
        json_decref(m);
      } else if (rc < 0) {
        assert_string_equal(why, t->why);
      }
    }
    json_decref(profile);
  }
}

/* ---- hand-written matches (no python needed) ---- */

static const char scan_rows_m[] =
    "{\"family\": \"scan\", \"op\": \"cumsum\", \"summary\": \"t\", \"canonical\": [64, 4096, 1],"
    " \"dim\": 1, \"reverse\": false, \"exclusive\": \"none\", \"pad_value\": 0.0,"
    " \"rows_out\": 64, \"r_out\": 4096, \"mask\": \"none\","
    " \"tensors\": {\"x\": \"input:0\", \"out\": \"output:0\"}, \"numel\": 262144}";
static const char scan_masked_m[] =
    "{\"family\": \"scan\", \"op\": \"cumsum\", \"summary\": \"t\", \"canonical\": [8, 1000, 1],"
    " \"dim\": 1, \"reverse\": true, \"exclusive\": \"none\", \"pad_value\": 0.0,"
    " \"rows_out\": 8, \"r_out\": 1000, \"mask\": \"bool\","
    " \"tensors\": {\"x\": \"input:0\", \"mask\": \"input:1\", \"out\": \"output:0\"},"
    " \"numel\": 8000}";
static const char scan_cols_m[] =
    "{\"family\": \"scan\", \"op\": \"cumprod\", \"summary\": \"t\", \"canonical\": [4, 70, 6],"
    " \"dim\": 1, \"reverse\": false, \"exclusive\": \"none\", \"pad_value\": 0.0,"
    " \"rows_out\": 4, \"r_out\": 70, \"mask\": \"none\","
    " \"tensors\": {\"x\": \"input:0\", \"out\": \"output:0\"}, \"numel\": 1680}";
static const char scan_pad_m[] =
    "{\"family\": \"scan\", \"op\": \"cumsum\", \"summary\": \"t\", \"canonical\": [16, 2048, 1],"
    " \"dim\": 1, \"reverse\": false, \"exclusive\": \"pad\", \"pad_value\": 0.0,"
    " \"rows_out\": 15, \"r_out\": 2049, \"mask\": \"none\","
    " \"tensors\": {\"x\": \"input:0\", \"out\": \"output:0\"}, \"numel\": 32768}";
static const char scan_long_m[] =
    "{\"family\": \"scan\", \"op\": \"cumsum\", \"summary\": \"t\", \"canonical\": [2, 100000, 1],"
    " \"dim\": 1, \"reverse\": false, \"exclusive\": \"none\", \"pad_value\": 0.0,"
    " \"rows_out\": 2, \"r_out\": 100000, \"mask\": \"none\","
    " \"tensors\": {\"x\": \"input:0\", \"out\": \"output:0\"}, \"numel\": 200000}";

#define POOL_M(op, dims, canon, out, k, s, p, d, ceil, cip, numel)                                     \
  "{\"family\": \"pooling\", \"op\": \"" op "\", \"summary\": \"t\", \"canonical\": " canon    \
  ", \"out\": " out ", \"dims\": " dims ", \"kernel\": " k ", \"stride\": " s ", \"padding\": " p     \
  ", \"dilation\": " d ", \"ceil_mode\": " ceil ", \"count_include_pad\": " cip                \
  ", \"divisor_override\": 0, \"tensors\": {\"x\": \"input:0\", \"out\": \"output:0\"},"     \
  " \"numel\": " numel "}"
static const char pool_1d_m[] = POOL_M("max_pool1d", "1", "[12, 1, 1, 4096]", "[1, 1, 4083]",
                                       "[1, 1, 8]", "[1, 1, 1]", "[0, 0, 4]", "[1, 1, 3]",
                                       "false", "false", "49152");
static const char pool_2d_m[] = POOL_M("max_pool2d", "2", "[2048, 1, 512, 512]", "[1, 511, 511]",
                                       "[1, 4, 4]", "[1, 1, 1]", "[0, 1, 1]", "[1, 1, 1]",
                                       "false", "false", "536870912");
static const char pool_avg_m[] = POOL_M("avg_pool2d", "2", "[16, 1, 512, 512]", "[1, 46, 46]",
                                        "[1, 11, 11]", "[1, 11, 11]", "[0, 0, 0]", "[1, 1, 1]",
                                        "false", "true", "4194304");
static const char pool_3d_m[] = POOL_M("max_pool3d", "3", "[8, 32, 32, 32]", "[14, 14, 14]",
                                       "[3, 3, 3]", "[2, 2, 2]", "[1, 1, 1]", "[3, 3, 3]",
                                       "false", "false", "262144");
static const char pool_ceil_m[] = POOL_M("avg_pool2d", "2", "[6, 1, 17, 21]", "[1, 9, 11]",
                                         "[1, 3, 3]", "[1, 2, 2]", "[0, 1, 1]", "[1, 1, 1]",
                                         "true", "false", "2142");

static const char loss_mse_m[] =
    "{\"family\": \"loss\", \"op\": \"mse\", \"summary\": \"t\", \"kind\": \"elementwise\","
    " \"reduction\": \"mean\", \"divisor\": 1048576.0, \"transcendental\": false,"
    " \"numel\": 1048576, \"canonical\": [1048576], \"expr\": \"ofg_sq((x0 - x1))\","
    " \"leaves\": [{\"tensor\": \"input:0\", \"index\": \"\"},"
    " {\"tensor\": \"input:1\", \"index\": \"\"}]}";
static const char loss_mse_big_m[] =
    "{\"family\": \"loss\", \"op\": \"mse\", \"summary\": \"t\", \"kind\": \"elementwise\","
    " \"reduction\": \"mean\", \"divisor\": 1073741824.0, \"transcendental\": false,"
    " \"numel\": 1073741824, \"canonical\": [1073741824], \"expr\": \"ofg_sq((x0 - x1))\","
    " \"leaves\": [{\"tensor\": \"input:0\", \"index\": \"\"},"
    " {\"tensor\": \"input:1\", \"index\": \"\"}]}";
static const char loss_hinge_m[] =
    "{\"family\": \"loss\", \"op\": \"hinge\", \"summary\": \"t\", \"kind\": \"elementwise\","
    " \"reduction\": \"mean\", \"divisor\": 32768.0, \"transcendental\": false,"
    " \"numel\": 32768, \"canonical\": [32768],"
    " \"expr\": \"ofg_clamp_min((1.0f - (x0 * x1)), 0.0f)\","
    " \"leaves\": [{\"tensor\": \"input:0\", \"index\": \"\"},"
    " {\"tensor\": \"input:1\", \"index\": \"(0 + ((idx_t)(e / 1) % 256) * 1)\"}]}";
static const char loss_kl_m[] =
    "{\"family\": \"loss\", \"op\": \"kl_div\", \"summary\": \"t\", \"kind\": \"elementwise\","
    " \"reduction\": \"batchmean\", \"divisor\": 64.0, \"transcendental\": true,"
    " \"numel\": 8192, \"canonical\": [8192],"
    " \"expr\": \"(ofg_xlogy((x1), (x1)) - (x1) * (OFG_LOGF(x0)))\","
    " \"leaves\": [{\"tensor\": \"input:0\", \"index\": \"\"},"
    " {\"tensor\": \"input:1\", \"index\": \"\"}]}";
#define ROWS_M(op, n, d, tensors, extra)                                                       \
  "{\"family\": \"loss\", \"op\": \"" op "\", \"summary\": \"t\", \"kind\": \"rows\","          \
  " \"reduction\": \"mean\", \"transcendental\": false, \"numel\": 1048576,"                   \
  " \"canonical\": [" n ", " d "], \"tensors\": " tensors ", \"p\": 2, \"swap\": false,"        \
  " \"ignore_index\": -100, " extra "}"
static const char loss_ce_m[] = ROWS_M("cross_entropy", "256", "4096",
                                       "[\"input:0\", \"input:1\"]",
                                       "\"divisor\": 0.0, \"margin\": 0.0, \"eps\": 0.0");
static const char loss_ce_small_m[] = ROWS_M("cross_entropy", "1024", "100",
                                             "[\"input:0\", \"input:1\"]",
                                             "\"divisor\": 0.0, \"margin\": 0.0, \"eps\": 0.0");
static const char loss_triplet_m[] = ROWS_M("triplet_margin", "128", "8192",
                                            "[\"input:0\", \"input:1\", \"input:2\"]",
                                            "\"divisor\": 128.0, \"margin\": 1.0, \"eps\": 1e-6");
static const char loss_cosine_m[] = ROWS_M("cosine", "64", "300", "[\"input:0\", \"input:1\"]",
                                           "\"divisor\": 64.0, \"margin\": 0.0, \"eps\": 1e-8");

static json_t *parse(const char *text) {
  json_error_t err;
  json_t *j = json_loads(text, 0, &err);
  if (!j)
    printf("bad test JSON: %s\n", err.text);
  assert_non_null(j);
  return j;
}

/* Defaults of fam for match, then the move {knob, op, value} (a MODE string when mode is
 * set). Returns knob_apply_move's result, then check's; why holds the reason. */
static int moved(const struct builtin_family *fam, json_t *match, const char *knob,
                 const char *op, long long v, const char *mode, struct knob_set *ret,
                 char *why, size_t whylen) {
  fam->defaults(match, ret);
  json_t *m = mode ? json_pack("{s:s, s:s, s:s}", "knob", knob, "op", op, "value", mode)
                   : json_pack("{s:s, s:s, s:I}", "knob", knob, "op", op, "value", (json_int_t)v);
  int rc = knob_apply_move(ret, m, why, whylen);
  json_decref(m);
  return rc == 0 ? fam->check(match, ret, why, whylen) : rc;
}

struct refusal {
  const struct builtin_family *fam;
  const char *match;
  const char *knob, *op;
  long long value;
  const char *mode;
  int times; /* the move applied this many times */
  const char *why;
};

static void test_refusals(void **state) {
  (void)state;
  const struct refusal cases[] = {
      {&builtin_family_scan, scan_pad_m, "VEC", "set", 4, NULL, 1,
       "the exclusive form writes element k at k+1 (output rows of 2049), so stores cannot be "
       "vectors: VEC must be 1"},
      {&builtin_family_scan, scan_cols_m, "SPLIT", "set", 8, NULL, 1,
       "SPLIT splits rows along the contiguous axis; this scan is strided (inner = 6)"},
      {&builtin_family_scan, scan_cols_m, "MODE", "set", 0, "two_level", 1,
       "MODE two_level splits rows along the contiguous axis; this scan runs over a strided "
       "axis (inner = 6) and uses the column kernel"},
      {&builtin_family_scan, scan_rows_m, "MODE", "set", 0, "pad_smem", 1,
       "the scan keeps its tiles in registers; shared memory holds only per-warp totals, read "
       "without bank conflicts"},
      {&builtin_family_scan, scan_rows_m, "MODE", "set", 0, "inner_coalesced", 1,
       "the scanned axis is the contiguous one (inner = 1): rows are already read along "
       "threadIdx.x"},
      {&builtin_family_scan, scan_rows_m, "MODE", "set", 0, "idx32", 1,
       "indices are already 32-bit for 262144 elements (the default)"},
      {&builtin_family_scan, scan_rows_m, "MODE", "set", 0, "predicated_tail", 1,
       "every scan tile is already predicated element by element"},
      {&builtin_family_scan, scan_rows_m, "ITEMS", "mul", 2, NULL, 3,
       "ITEMS*VEC=128 values per thread exceed the 64-register budget"},
      {&builtin_family_scan, scan_rows_m, "VEC", "set", 8, NULL, 1,
       "VEC=8: scans use 1, 2 or 4"},
      {&builtin_family_pooling, pool_3d_m, "MODE", "set", 0, "recip_mul", 1,
       "max pooling divides nothing: recip_mul applies to average pooling"},
      {&builtin_family_pooling, pool_avg_m, "MODE", "set", 0, "smem_tile", 1,
       "windows do not overlap (stride >= window extent): a halo tile saves no reads"},
      {&builtin_family_pooling, pool_1d_m, "MODE", "set", 0, "inner_coalesced", 1,
       "the pooling window includes the contiguous axis (W); threadIdx.x already walks the "
       "output width"},
      {&builtin_family_pooling, pool_ceil_m, "MODE", "set", 0, "predicated_tail", 1,
       "every pooling tile is already bounds-checked per element"},
      {&builtin_family_pooling, pool_avg_m, "MODE", "set", 0, "pad_smem", 1,
       "the staged tile needs 124256 bytes of shared memory, over 48 KiB"},
      {&builtin_family_loss, loss_mse_m, "SPLIT", "set", 16, NULL, 1,
       "SPLIT=16: the loss already reduces in two deterministic stages (block partials, then "
       "one final block); splitting further or combining with atomics would make the scalar "
       "order-dependent"},
      {&builtin_family_loss, loss_mse_m, "MODE", "set", 0, "warp_per_row", 1,
       "an elementwise loss has no rows"},
      {&builtin_family_loss, loss_mse_m, "ROWS", "mul", 2, NULL, 1,
       "ROWS=2: an elementwise loss has no rows"},
      {&builtin_family_loss, loss_mse_m, "MODE", "set", 0, "fast_math", 1,
       "this loss evaluates no exp or log"},
      {&builtin_family_loss, loss_ce_m, "MODE", "set", 0, "cached_row", 1,
       "rows of 4096 logits are already kept in registers by default"},
      {&builtin_family_loss, loss_triplet_m, "MODE", "set", 0, "block_per_row", 1,
       "already one block per row (rows of 8192)"},
      {&builtin_family_loss, loss_ce_small_m, "MODE", "set", 0, "warp_per_row", 1,
       "already one warp per row (rows of 100)"},
      {&builtin_family_loss, loss_triplet_m, "MODE", "set", 0, "online", 1,
       "only cross-entropy has a softmax row to cache or stream"},
      {&builtin_family_loss, loss_hinge_m, "MODE", "set", 0, "fused_reduce", 1,
       "the terms and their reduction already run in one pass (then one final launch)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct refusal *c = &cases[i];
    json_t *m = parse(c->match);
    struct knob_set k;
    char why[512] = "";
    c->fam->defaults(m, &k);
    int rc = 0;
    for (int t = 0; t < c->times && rc == 0; t++) {
      json_t *mv = c->mode ? json_pack("{s:s, s:s, s:s}", "knob", c->knob, "op", c->op, "value",
                                       c->mode)
                           : json_pack("{s:s, s:s, s:I}", "knob", c->knob, "op", c->op, "value",
                                       (json_int_t)c->value);
      rc = knob_apply_move(&k, mv, why, sizeof why);
      json_decref(mv);
    }
    assert_int_equal(rc, 0);
    rc = c->fam->check(m, &k, why, sizeof why);
    printf("%-8s %s=%s -> %s\n", c->fam->name, c->knob, c->mode ? c->mode : "n", why);
    assert_int_equal(rc, -1);
    assert_string_equal(why, c->why);
    json_t *cand = NULL;
    assert_int_equal(c->fam->generate(m, &k, &cand, why, sizeof why), -1);
    assert_null(cand);
    json_decref(m);
  }
  /* A move the shape admits passes the same check. */
  json_t *m = parse(loss_ce_m);
  struct knob_set k;
  char why[256] = "";
  assert_int_equal(moved(&builtin_family_loss, m, "MODE", "set", 0, "online", &k, why,
                         sizeof why), 0);
  json_decref(m);
}

/* ---- generated plans, computed by hand ---- */

/* Generates fam's candidate for match after the (optional) move and checks its plan and
 * options against the JSON texts. */
static void check_plan(const struct builtin_family *fam, const char *match, const char *knob,
                       const char *op, long long v, const char *mode, const char *plan,
                       const char *options) {
  json_t *m = parse(match);
  struct knob_set k;
  char why[512] = "";
  if (knob)
    assert_int_equal(moved(fam, m, knob, op, v, mode, &k, why, sizeof why), 0);
  else
    fam->defaults(m, &k);
  json_t *cand = NULL;
  assert_int_equal(fam->generate(m, &k, &cand, why, sizeof why), 0);
  json_t *want = parse(plan), *got = json_object_get(cand, "plan");
  if (!json_equal(got, want)) {
    char *g = json_dumps(got, JSON_COMPACT);
    printf("plan: %s\nwant: %s\n", g, plan);
    free(g);
  }
  assert_true(json_equal(got, want));
  if (options) {
    json_t *wo = parse(options);
    assert_true(json_equal(json_object_get(cand, "options"), wo));
    json_decref(wo);
  }
  json_decref(want);
  json_decref(cand);
  json_decref(m);
}

#define ARGS(items) "\"args\": [" items "]"
#define SEP ", "
#define T(name) "{\"tensor\": \"" name "\"}"
#define B(name) "{\"buffer\": \"" name "\"}"
#define LAUNCH(kernel, gx, gy, block, args)                                                     \
  "{\"kernel\": \"" kernel "\", \"grid\": [" gx ", " gy ", 1], \"block\": [" block ", 1, 1],"    \
  " \"shared_bytes\": 0, " args "}"

static void test_plans(void **state) {
  (void)state;
  /* 64 rows of 4096: VEC 4 x ITEMS 4 x 32 lanes = 512 per warp, 8 warps per row, one row
   * per block. */
  check_plan(&builtin_family_scan, scan_rows_m, NULL, NULL, 0, NULL,
             "{\"buffers\": [], \"launches\": [" LAUNCH("scan_rows", "64", "1", "256",
                                                        ARGS(T("input:0") SEP T("output:0"))) "]}",
             "[\"-DBLOCK=256\", \"-DVEC=4\", \"-DITEMS=4\", \"-DUNROLL=1\", \"-DSPLIT=1\"]");
  /* Look-back: tiles of 8 x 512 = 4096, one per row: 64 tiles, 65 status words. */
  check_plan(&builtin_family_scan, scan_rows_m, "MODE", "set", 0, "decoupled_lookback",
             "{\"buffers\": [{\"name\": \"status\", \"bytes\": 520}], \"launches\": ["
             LAUNCH("scan_lookback_reset", "1", "1", "256", ARGS(B("status"))) ", "
             LAUNCH("scan_lookback", "64", "1", "256",
                    ARGS(T("input:0") SEP T("output:0") SEP B("status"))) "]}",
             "[\"-DBLOCK=256\", \"-DVEC=4\", \"-DITEMS=4\", \"-DUNROLL=1\", \"-DSPLIT=1\", "
             "\"-DMODE_DECOUPLED_LOOKBACK=1\"]");
  /* 2 rows of 100000 cannot fill the GPU: split = min(ceil(528 / 2), 100000 / 4096) = 24
   * chunks of 4168, 48 blocks per launch, 48 float partials. */
  check_plan(&builtin_family_scan, scan_long_m, NULL, NULL, 0, NULL,
             "{\"buffers\": [{\"name\": \"partials\", \"bytes\": 192}], \"launches\": ["
             LAUNCH("scan_chunk_reduce", "48", "1", "256", ARGS(T("input:0") SEP B("partials")))
             ", " LAUNCH("scan_chunk_scan", "48", "1", "256",
                         ARGS(T("input:0") SEP B("partials") SEP T("output:0"))) "]}",
             "[\"-DBLOCK=256\", \"-DVEC=4\", \"-DITEMS=4\", \"-DUNROLL=1\", \"-DSPLIT=24\"]");
  /* Columns: inner 6 with VEC 2 -> 4 threads across, 1 column tile per outer index. */
  check_plan(&builtin_family_scan, scan_cols_m, NULL, NULL, 0, NULL,
             "{\"buffers\": [], \"launches\": [" LAUNCH("scan_cols", "4", "1", "256",
                                                        ARGS(T("input:0") SEP T("output:0"))) "]}",
             NULL);
  /* Masked reverse rows of 1000: 2 warps of 512 per row, 4 rows per block; the mask is the
   * second argument. */
  check_plan(&builtin_family_scan, scan_masked_m, NULL, NULL, 0, NULL,
             "{\"buffers\": [], \"launches\": [" LAUNCH("scan_rows", "2", "1", "256",
                                                        ARGS(T("input:0") SEP T("input:1") SEP T("output:0"))) "]}",
             NULL);
  /* 511 x 511 outputs in tiles of 32 rows (8 x ITEMS 4) by 128 columns (32 x WI 4):
   * 4 x 16 tiles for each of 2048 planes. */
  check_plan(&builtin_family_pooling, pool_2d_m, NULL, NULL, 0, NULL,
             "{\"buffers\": [], \"launches\": [" LAUNCH("pool_tile", "131072", "1", "256",
                                                        ARGS(T("input:0") SEP T("output:0"))) "]}",
             "[\"-DBLOCK=256\", \"-DVEC=4\", \"-DITEMS=4\"]");
  check_plan(&builtin_family_pooling, pool_2d_m, "MODE", "set", 0, "thread_per_output",
             "{\"buffers\": [], \"launches\": [" LAUNCH("pool_direct", "2", "65535", "256",
                                                        ARGS(T("input:0") SEP T("output:0"))) "]}",
             NULL);
  /* 46 x 46 outputs of 11 x 11 windows at stride 11: no window shares input with another,
   * so the default is one thread per output: ceil(46 / 256) = 1 block across a row, one
   * grid row per output row, 16 planes x 46 = 736 (under the 65535 cap). ITEMS stays 1
   * because the windows do not overlap vertically. */
  check_plan(&builtin_family_pooling, pool_avg_m, NULL, NULL, 0, NULL,
             "{\"buffers\": [], \"launches\": [" LAUNCH("pool_direct", "1", "736", "256",
                                                        ARGS(T("input:0") SEP T("output:0"))) "]}",
             "[\"-DBLOCK=256\", \"-DVEC=4\", \"-DITEMS=1\", \"-DMODE_THREAD_PER_OUTPUT=1\"]");
  /* MODE ldg (which changes only the loads) stages tiles again: tiles of 8 x 32 outputs,
   * ceil(46 / 8) x ceil(46 / 32) = 6 x 2 per plane, 16 planes = 192 blocks. */
  check_plan(&builtin_family_pooling, pool_avg_m, "MODE", "set", 0, "ldg",
             "{\"buffers\": [], \"launches\": [" LAUNCH("pool_tile", "192", "1", "256",
                                                        ARGS(T("input:0") SEP T("output:0"))) "]}",
             "[\"-DBLOCK=256\", \"-DVEC=4\", \"-DITEMS=1\", \"-DMODE_LDG=1\"]");
  /* 2^20 terms in tiles of 256 x 4 x 4: 256 partials of (sum, count). */
  check_plan(&builtin_family_loss, loss_mse_m, NULL, NULL, 0, NULL,
             "{\"buffers\": [{\"name\": \"partials\", \"bytes\": 2048}], \"launches\": ["
             LAUNCH("loss_elem", "256", "1", "256",
                    ARGS(T("input:0") SEP T("input:1") SEP B("partials"))) ", "
             LAUNCH("loss_final", "1", "1", "256", ARGS(B("partials") SEP T("output:0"))) "]}",
             "[\"-DBLOCK=256\", \"-DVEC=4\", \"-DITEMS=4\", \"-DUNROLL=1\"]");
  /* 2^30 terms: 2^18 tiles strided over 4 waves of 132 x 8 blocks (4224 partials); one
   * wave in persistent mode. */
  check_plan(&builtin_family_loss, loss_mse_big_m, NULL, NULL, 0, NULL,
             "{\"buffers\": [{\"name\": \"partials\", \"bytes\": 33792}], \"launches\": ["
             LAUNCH("loss_elem", "4224", "1", "256",
                    ARGS(T("input:0") SEP T("input:1") SEP B("partials"))) ", "
             LAUNCH("loss_final", "1", "1", "256", ARGS(B("partials") SEP T("output:0"))) "]}",
             NULL);
  check_plan(&builtin_family_loss, loss_mse_big_m, "MODE", "set", 0, "persistent",
             "{\"buffers\": [{\"name\": \"partials\", \"bytes\": 8448}], \"launches\": ["
             LAUNCH("loss_elem", "1056", "1", "256",
                    ARGS(T("input:0") SEP T("input:1") SEP B("partials"))) ", "
             LAUNCH("loss_final", "1", "1", "256", ARGS(B("partials") SEP T("output:0"))) "]}",
             "[\"-DBLOCK=256\", \"-DVEC=4\", \"-DITEMS=4\", \"-DUNROLL=1\", "
             "\"-DMODE_PERSISTENT=1\"]");
  check_plan(&builtin_family_loss, loss_ce_m, NULL, NULL, 0, NULL,
             "{\"buffers\": [{\"name\": \"partials\", \"bytes\": 2048}], \"launches\": ["
             LAUNCH("loss_rows", "256", "1", "256",
                    ARGS(T("input:0") SEP T("input:1") SEP B("partials"))) ", "
             LAUNCH("loss_final", "1", "1", "256", ARGS(B("partials") SEP T("output:0"))) "]}",
             "[\"-DBLOCK=256\", \"-DVEC=4\", \"-DITEMS=4\", \"-DROWS=1\", \"-DUNROLL=1\"]");
  /* Two rows per block: 64 blocks for 128 rows. */
  check_plan(&builtin_family_loss, loss_triplet_m, "ROWS", "mul", 2, NULL,
             "{\"buffers\": [{\"name\": \"partials\", \"bytes\": 512}], \"launches\": ["
             LAUNCH("loss_rows", "64", "1", "256",
                    ARGS(T("input:0") SEP T("input:1") SEP T("input:2") SEP B("partials"))) ", "
             LAUNCH("loss_final", "1", "1", "256", ARGS(B("partials") SEP T("output:0"))) "]}",
             NULL);
  /* Short rows: a warp per row, 8 rows per block. */
  check_plan(&builtin_family_loss, loss_ce_small_m, NULL, NULL, 0, NULL,
             "{\"buffers\": [{\"name\": \"partials\", \"bytes\": 1024}], \"launches\": ["
             LAUNCH("loss_rows", "128", "1", "256",
                    ARGS(T("input:0") SEP T("input:1") SEP B("partials"))) ", "
             LAUNCH("loss_final", "1", "1", "256", ARGS(B("partials") SEP T("output:0"))) "]}",
             NULL);
}

/* ---- NVRTC: every template under every seed-memory move, a few shapes each ---- */

/* The local strategies of the seed memory (caller owns), or NULL with a printed reason. */
static json_t *seed_locals(void) {
  char path[1200];
  if (!source_root()) {
    printf("OPFORGE_SOURCE_ROOT is not set\n");
    return NULL;
  }
  snprintf(path, sizeof path, "%s/schema/seed_memory.json", source_root());
  json_t *seed = json_load_file(path, 0, NULL);
  if (!seed)
    printf("no seed memory at %s\n", path);
  json_t *locals = json_incref(json_object_get(seed, "locals"));
  json_decref(seed);
  return locals;
}

static bool applies_to(json_t *local, const char *family) {
  size_t i;
  json_t *f;
  json_array_foreach(json_object_get(local, "families"), i, f) {
    if (strcmp(json_string_value(f), family) == 0)
      return true;
  }
  return false;
}

/* Compiles a candidate for sm_90a; asserts success with no spills, and a nonzero log-free
 * result. Candidates already compiled (same source and options) are skipped. */
static void compile_candidate(json_t *cand, json_t *seen, int *ret_compiled) {
  const char *src = json_string_value(json_object_get(cand, "source"));
  json_t *options = json_object_get(cand, "options");
  char *okey = json_dumps(options, JSON_COMPACT);
  size_t klen = strlen(src) + strlen(okey) + 2;
  char *key = malloc(klen);
  assert_non_null(key);
  snprintf(key, klen, "%s\n%s", okey, src);
  free(okey);
  if (json_object_get(seen, key)) {
    free(key);
    return;
  }
  json_object_set_new(seen, key, json_true());
  free(key);
  const char *opts[32];
  size_t n = json_array_size(options);
  assert_true(n <= 32);
  for (size_t i = 0; i < n; i++)
    opts[i] = json_string_value(json_array_get(options, i));
  struct compile_request req = {src, opts, n, "sm_90a", GPU_PREC_FP32, NULL};
  struct compile_result r;
  assert_int_equal(nvrtc_compile(&req, &r), 0);
  if (!r.ok)
    printf("compile failed (%s):\n%s\n", r.failure.message, r.log);
  assert_true(r.ok);
  assert_null(strstr(r.log, "error"));
  compile_result_clear(&r);
  (*ret_compiled)++;
}

struct shape_case {
  const struct builtin_family *fam;
  const char *match;
};

static void test_compile_every_move(void **state) {
  (void)state;
  json_t *locals = seed_locals();
  if (!locals) {
    skip();
    return;
  }
  const struct shape_case shapes[] = {
      {&builtin_family_scan, scan_rows_m},       {&builtin_family_scan, scan_masked_m},
      {&builtin_family_scan, scan_cols_m},       {&builtin_family_scan, scan_pad_m},
      {&builtin_family_scan, scan_long_m},       {&builtin_family_pooling, pool_1d_m},
      {&builtin_family_pooling, pool_2d_m},      {&builtin_family_pooling, pool_avg_m},
      {&builtin_family_pooling, pool_3d_m},      {&builtin_family_pooling, pool_ceil_m},
      {&builtin_family_loss, loss_mse_m},        {&builtin_family_loss, loss_hinge_m},
      {&builtin_family_loss, loss_kl_m},         {&builtin_family_loss, loss_ce_m},
      {&builtin_family_loss, loss_ce_small_m},   {&builtin_family_loss, loss_triplet_m},
      {&builtin_family_loss, loss_cosine_m},
  };
  json_t *seen = json_object();
  int compiled = 0, refused = 0, moves = 0;
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    const struct builtin_family *fam = shapes[s].fam;
    json_t *m = parse(shapes[s].match);
    struct knob_set k;
    char why[512];
    json_t *cand = NULL;
    fam->defaults(m, &k);
    assert_int_equal(fam->generate(m, &k, &cand, why, sizeof why), 0);
    compile_candidate(cand, seen, &compiled);
    json_decref(cand);
    size_t i;
    json_t *local;
    json_array_foreach(locals, i, local) {
      if (!applies_to(local, fam->name))
        continue;
      moves++;
      fam->defaults(m, &k);
      why[0] = '\0';
      if (knob_apply_move(&k, json_object_get(local, "knob_move"), why, sizeof why) != 0 ||
          fam->check(m, &k, why, sizeof why) != 0) {
        assert_true(why[0] != '\0');
        refused++;
        continue;
      }
      cand = NULL;
      assert_int_equal(fam->generate(m, &k, &cand, why, sizeof why), 0);
      compile_candidate(cand, seen, &compiled);
      json_decref(cand);
    }
    json_decref(m);
  }
  printf("%d moves over %zu shapes: %d distinct candidates compiled, %d refused\n", moves,
         sizeof shapes / sizeof shapes[0], compiled, refused);
  assert_true(compiled > 100);
  json_decref(seen);
  json_decref(locals);
}

/* ---- generated kernels run in a CPU emulation of CUDA, against PyTorch ---- */

/* The emulator: every CUDA thread a ucontext fiber, blocks one after another; barriers and
 * warp shuffles are rendezvous points. Enough of CUDA for the three templates. */
static const char *const emu_header[] = {
    "// CPU emulation of the CUDA subset the builtin templates use: blocks run one after another,\n",
    "// each thread a ucontext fiber; __syncthreads and warp shuffles are rendezvous points.\n",
    "#include <ucontext.h>\n",
    "#include <cmath>\n",
    "#include <cstdio>\n",
    "#include <cstdlib>\n",
    "#include <cstring>\n",
    "#include <functional>\n",
    "#include <vector>\n",
    "// glibc declares __expf and __logf itself; the device intrinsics map onto them.\n",
    "using std::isinf;\n",
    "using std::isnan;\n",
    "// The templates' portable paths in place of inline PTX (max.NaN.f32 in pooling).\n",
    "#define OFG_EMU 1\n",
    "struct dim3 { unsigned x = 1, y = 1, z = 1; };\n",
    "static dim3 threadIdx, blockIdx, blockDim, gridDim;\n",
    "#define __global__\n",
    "#define __device__\n",
    "#define __forceinline__ inline\n",
    "#define __restrict__ __restrict\n",
    "#define __launch_bounds__(...)\n",
    "#define __shared__ static\n",
    "struct float4 { float x, y, z, w; };\n",
    "struct float2 { float x, y; };\n",
    "struct uchar4 { unsigned char x, y, z, w; };\n",
    "struct uchar2 { unsigned char x, y; };\n",
    "static inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }\n",
    "static inline float2 make_float2(float a, float b) { return {a, b}; }\n",
    "template <class T> static inline T __ldg(const T* p) { return *p; }\n",
    "static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }\n",
    "static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }\n",
    "static inline float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }\n",
    "static inline void __threadfence() {}\n",
    "static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; *p += v; return o; }\n",
    "static inline unsigned long long atomicExch(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; *p = v; return o; }\n",
    "struct emu_fiber { ucontext_t ctx; std::vector<char> stack; unsigned tid; int state; };  // 0 run 1 barrier 2 shuffle 3 done\n",
    "static std::vector<emu_fiber> emu_f;\n",
    "static ucontext_t emu_sched;\n",
    "static int emu_cur;\n",
    "static double emu_slot[2][32][32];\n",
    "static int emu_gen[32];\n",
    "static std::function<void()>* emu_body;\n",
    "static void emu_yield() { swapcontext(&emu_f[emu_cur].ctx, &emu_sched); threadIdx.x = emu_f[emu_cur].tid; }\n",
    "static inline void __syncthreads() { emu_f[emu_cur].state = 1; emu_yield(); }\n",
    "template <class T> static inline T emu_shfl(T v, int src, bool keep) {\n",
    "  int t = emu_cur, w = t / 32, lane = t % 32, g = emu_gen[w] & 1;\n",
    "  memcpy(&emu_slot[g][w][lane], &v, sizeof(T));\n",
    "  emu_f[t].state = 2;\n",
    "  emu_yield();\n",
    "  if (src < 0 || src > 31) { if (keep) return v; src &= 31; }\n",
    "  T r;\n",
    "  memcpy(&r, &emu_slot[g][w][src], sizeof(T));\n",
    "  return r;\n",
    "}\n",
    "template <class T> static inline T __shfl_sync(unsigned, T v, int s) { return emu_shfl(v, s & 31, false); }\n",
    "template <class T> static inline T __shfl_up_sync(unsigned, T v, int d) { return emu_shfl(v, (int)(threadIdx.x % 32) - d, true); }\n",
    "template <class T> static inline T __shfl_xor_sync(unsigned, T v, int m) { return emu_shfl(v, (int)(threadIdx.x % 32) ^ m, false); }\n",
    "static void emu_entry() { (*emu_body)(); emu_f[emu_cur].state = 3; swapcontext(&emu_f[emu_cur].ctx, &emu_sched); }\n",
    "// Runs body as grid gx x gy of blocks of bx threads.\n",
    "static void emu_launch(unsigned gx, unsigned gy, unsigned bx, std::function<void()> body) {\n",
    "  gridDim.x = gx; gridDim.y = gy; blockDim.x = bx; emu_body = &body;\n",
    "  emu_f.resize(bx);\n",
    "  for (auto& f : emu_f) if (f.stack.empty()) f.stack.resize(256 * 1024);\n",
    "  for (unsigned by = 0; by < gy; by++)\n",
    "    for (unsigned b = 0; b < gx; b++) {\n",
    "      blockIdx.x = b; blockIdx.y = by;\n",
    "      for (unsigned t = 0; t < bx; t++) {\n",
    "        emu_fiber& f = emu_f[t];\n",
    "        f.tid = t; f.state = 0;\n",
    "        getcontext(&f.ctx);\n",
    "        f.ctx.uc_stack.ss_sp = f.stack.data(); f.ctx.uc_stack.ss_size = f.stack.size(); f.ctx.uc_link = nullptr;\n",
    "        makecontext(&f.ctx, emu_entry, 0);\n",
    "      }\n",
    "      for (int w = 0; w < 32; w++) emu_gen[w] = 0;\n",
    "      for (;;) {\n",
    "        bool ran = false;\n",
    "        for (unsigned t = 0; t < bx; t++)\n",
    "          if (emu_f[t].state == 0) { ran = true; emu_cur = t; threadIdx.x = t; swapcontext(&emu_sched, &emu_f[t].ctx); }\n",
    "        if (ran) continue;\n",
    "        bool released = false;\n",
    "        for (unsigned w = 0; w * 32 < bx; w++) {\n",
    "          int live = 0, sh = 0;\n",
    "          for (unsigned t = w * 32; t < w * 32 + 32 && t < bx; t++) { live += emu_f[t].state != 3; sh += emu_f[t].state == 2; }\n",
    "          if (live && sh == live) {\n",
    "            for (unsigned t = w * 32; t < w * 32 + 32 && t < bx; t++) if (emu_f[t].state == 2) emu_f[t].state = 0;\n",
    "            emu_gen[w]++; released = true;\n",
    "          }\n",
    "        }\n",
    "        if (released) continue;\n",
    "        int live = 0, bar = 0;\n",
    "        for (unsigned t = 0; t < bx; t++) { live += emu_f[t].state != 3; bar += emu_f[t].state == 1; }\n",
    "        if (live == 0) break;\n",
    "        if (bar != live) { fprintf(stderr, \"emu: deadlock in block %u\\n\", b); exit(3); }\n",
    "        for (unsigned t = 0; t < bx; t++) emu_f[t].state = 0;\n",
    "      }\n",
    "    }\n",
    "}\n",
    "struct Ptr { void* p; template <class T> operator T*() const { return (T*)p; } };\n",
    NULL,
};

/* Builds each candidate with the emulator header (g++), runs its plan on the task's own
 * inputs and compares with the task's Model in float32 (allclose 1e-4) and float64 (the
 * accuracy budget of docs/architecture.md, "Evaluation rules"). */
static const char *const emu_runner[] = {
    "\"\"\"Runs builtin candidates in the CPU emulator against each task's own Model (float32 and\n",
    "float64 references). argv: EMU_HEADER CASES_JSON WORKDIR. Prints one line per case; exits\n",
    "with the number of failing cases.\"\"\"\n",
    "import json, os, subprocess, sys, types\n",
    "import numpy as np\n",
    "import torch\n",
    "\n",
    "def model_and_inputs(source, seed):\n",
    "    mod = types.ModuleType(\"emu_task\")\n",
    "    exec(compile(source, \"<task>\", \"exec\"), mod.__dict__)\n",
    "    torch.manual_seed(seed)\n",
    "    model = mod.Model(*mod.get_init_inputs())\n",
    "    torch.manual_seed(seed + 1)\n",
    "    return mod, model, mod.get_inputs()\n",
    "\n",
    "def main_cpp(cand, tensors, outs, work):\n",
    "    lines = []\n",
    "    for o in cand[\"options\"]:\n",
    "        n, _, v = o[2:].partition(\"=\")\n",
    "        lines.append(\"#define %s %s\" % (n, v or \"1\"))\n",
    "    lines.append(cand[\"source\"])\n",
    "    lines.append(\"#include <fstream>\")\n",
    "    lines.append(\"int main() {\")\n",
    "    names = {}\n",
    "    for i, (name, arr) in enumerate(tensors.items()):\n",
    "        path = os.path.join(work, \"t%d.bin\" % i)\n",
    "        arr.tofile(path)\n",
    "        names[name] = \"T%d\" % i\n",
    "        lines.append('  std::vector<char> T%d(%d); { std::ifstream f(\"%s\", std::ios::binary); f.read(T%d.data(), T%d.size()); }' % (i, max(arr.nbytes, 1), path, i, i))\n",
    "    for i, o in enumerate(outs):\n",
    "        names[\"output:%d\" % i] = \"O%d\" % i\n",
    "        lines.append(\"  std::vector<char> O%d(%d, (char)0xff);\" % (i, max(o.numel() * o.element_size(), 1)))\n",
    "    for i, b in enumerate(cand[\"plan\"][\"buffers\"]):\n",
    "        names[\"buffer:\" + b[\"name\"]] = \"B%d\" % i\n",
    "        lines.append(\"  std::vector<char> B%d(%d, 0);\" % (i, b[\"bytes\"]))\n",
    "    for l in cand[\"plan\"][\"launches\"]:\n",
    "        args = []\n",
    "        for a in l[\"args\"]:\n",
    "            if \"tensor\" in a:\n",
    "                args.append(\"Ptr{%s.data()}\" % names[a[\"tensor\"]])\n",
    "            elif \"buffer\" in a:\n",
    "                args.append(\"Ptr{%s.data()}\" % names[\"buffer:\" + a[\"buffer\"]])\n",
    "            else:\n",
    "                (kind, v), = a.items()\n",
    "                args.append({\"i32\": \"(int)%d\", \"i64\": \"(long long)%dLL\"}.get(kind, \"%r\") % v)\n",
    "        lines.append(\"  emu_launch(%d, %d, %d, [&] { %s(%s); });\" % (l[\"grid\"][0], l[\"grid\"][1], l[\"block\"][0], l[\"kernel\"], \", \".join(args)))\n",
    "    for i, o in enumerate(outs):\n",
    "        lines.append('  { std::ofstream f(\"%s/out%d.bin\", std::ios::binary); f.write(O%d.data(), O%d.size()); }' % (work, i, i, i))\n",
    "    lines.append(\"  return 0;\\n}\")\n",
    "    return \"\\n\".join(lines)\n",
    "\n",
    "def run_case(header, case, work):\n",
    "    mod, model, inputs = model_and_inputs(case[\"source\"], 42)\n",
    "    with torch.no_grad():\n",
    "        ref = model(*inputs)\n",
    "        m64 = model_and_inputs(case[\"source\"], 42)[1].double()\n",
    "        ref64 = m64(*[x.double() if x.is_floating_point() else x for x in inputs])\n",
    "    outs = [ref] if torch.is_tensor(ref) else list(ref)\n",
    "    refs64 = [ref64] if torch.is_tensor(ref64) else list(ref64)\n",
    "    tensors = {\"input:%d\" % i: x.contiguous().numpy() for i, x in enumerate(inputs)}\n",
    "    tensors.update({\"param:\" + k: v.detach().contiguous().numpy() for k, v in model.state_dict().items()})\n",
    "    src = os.path.join(work, \"main.cpp\")\n",
    "    with open(src, \"w\") as f:\n",
    "        f.write(main_cpp(case[\"candidate\"], tensors, outs, work))\n",
    "    exe = os.path.join(work, \"emu\")\n",
    "    r = subprocess.run([\"g++\", \"-std=c++17\", \"-O1\", \"-w\", \"-include\", header, src, \"-o\", exe],\n",
    "                       capture_output=True, text=True)\n",
    "    if r.returncode != 0:\n",
    "        return \"compile failed: \" + r.stderr[:1500]\n",
    "    r = subprocess.run([exe], capture_output=True, text=True, timeout=300)\n",
    "    if r.returncode != 0:\n",
    "        return \"run failed: \" + r.stderr[:500]\n",
    "    for i, o in enumerate(outs):\n",
    "        got = np.fromfile(os.path.join(work, \"out%d.bin\" % i), dtype=np.float32).reshape(o.shape)\n",
    "        r32, r64 = o.numpy(), refs64[i].numpy()\n",
    "        if not np.allclose(got, r32, atol=1e-4, rtol=1e-4, equal_nan=True):\n",
    "            return \"output %d differs: max |emu - eager| %g\" % (i, float(np.nanmax(np.abs(got - r32))))\n",
    "        fin = np.isfinite(r64)\n",
    "        err = float(np.max(np.abs(got - r64)[fin])) if fin.any() else 0.0\n",
    "        eager = float(np.max(np.abs(r32 - r64)[fin])) if fin.any() else 0.0\n",
    "        budget = 8 * eager + 1e-6 * (float(np.max(np.abs(r64[fin]))) if fin.any() else 0.0)\n",
    "        if err > budget:\n",
    "            return \"output %d: error %g against float64 exceeds %g\" % (i, err, budget)\n",
    "    return None\n",
    "\n",
    "def main():\n",
    "    header, cases, work = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3]\n",
    "    failed = 0\n",
    "    for case in cases:\n",
    "        why = run_case(header, case, work)\n",
    "        print(\"%-28s %s\" % (case[\"name\"], \"OK\" if why is None else \"FAILED: \" + why), flush=True)\n",
    "        failed += why is not None\n",
    "    sys.exit(failed)\n",
    "\n",
    "main()\n",
    NULL,
};

struct emu_case {
  const char *program;          /* a synthetics[] name */
  const char *knob, *op, *mode; /* an optional move (MODE when mode is set) */
  long long value;
};

static const struct synthetic *find_synthetic(const char *name) {
  for (size_t i = 0; i < sizeof synthetics / sizeof synthetics[0]; i++)
    if (strcmp(synthetics[i].name, name) == 0)
      return &synthetics[i];
  return NULL;
}

/* The candidate of a case (caller owns): its family's match on the program's profile,
 * defaults, then the move. */
static json_t *emu_candidate(struct evaluator *ev, const struct emu_case *c,
                             const struct synthetic *t) {
  json_t *profile = evaluator_profile(ev, t->name, t->source);
  assert_non_null(profile);
  const struct builtin_family *fam = NULL;
  for (size_t f = 0; f < N_MINE; f++)
    if (strcmp(mine[f]->name, t->family) == 0)
      fam = mine[f];
  json_t *m = NULL, *cand = NULL;
  char why[512] = "";
  assert_int_equal(fam->match(profile, &m, why, sizeof why), 1);
  struct knob_set k;
  if (c->knob)
    assert_int_equal(moved(fam, m, c->knob, c->op, c->value, c->mode, &k, why, sizeof why), 0);
  else
    fam->defaults(m, &k);
  assert_int_equal(fam->generate(m, &k, &cand, why, sizeof why), 0);
  json_decref(m);
  json_decref(profile);
  return cand;
}

/* Writes the NULL-ended lines to path. */
static void write_lines(const char *path, const char *const *lines) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  for (size_t i = 0; lines[i]; i++)
    assert_true(fputs(lines[i], f) >= 0);
  assert_int_equal(fclose(f), 0);
}

static void test_emulated_kernels(void **state) {
  (void)state;
  struct evaluator *ev = shared_evaluator();
  if (!ev || system("g++ --version > /dev/null 2>&1") != 0) {
    printf("%s\n", ev ? "no g++ to build the CPU emulation" : "no evaluator");
    skip();
    return;
  }
  static const struct emu_case cases[] = {
      {"exclusive_cat", NULL, NULL, NULL, 0},
      {"exclusive_narrow", NULL, NULL, NULL, 0},
      {"exclusive_narrow", "MODE", "set", "two_level", 0},
      {"exclusive_slice_cumprod", NULL, NULL, NULL, 0},
      {"exclusive_sub", NULL, NULL, NULL, 0},
      {"reverse_masked", NULL, NULL, NULL, 0},
      {"reverse_masked", "MODE", "set", "decoupled_lookback", 0},
      {"reverse_masked", "MODE", "set", "two_level", 0},
      {"cumprod_dim0", NULL, NULL, NULL, 0},
      {"max_pool3d", NULL, NULL, NULL, 0},
      {"max_pool3d", "MODE", "set", "thread_per_output", 0},
      {"avg_pool2d_functional", NULL, NULL, NULL, 0},
      {"avg_pool2d_functional", "MODE", "set", "pad_smem", 0},
      {"avg_pool3d", NULL, NULL, NULL, 0},
      {"pool_chain", NULL, NULL, NULL, 0},
      {"pool_chain", "MODE", "set", "thread_per_output", 0},
      {"pool_chain", "VEC", "set", NULL, 1},
      {"kl_div_batchmean", NULL, NULL, NULL, 0},
      {"kl_div_log_target", NULL, NULL, NULL, 0},
      {"hinge_broadcast", NULL, NULL, NULL, 0},
      {"hinge_broadcast", "MODE", "set", "grid_stride", 0},
      {"huber_delta", NULL, NULL, NULL, 0},
      {"cosine", NULL, NULL, NULL, 0},
      {"cross_entropy_ignore", NULL, NULL, NULL, 0},
      {"cross_entropy_ignore", "MODE", "set", "online", 0},
  };
  json_t *list = json_array();
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const struct synthetic *t = find_synthetic(cases[i].program);
    assert_non_null(t);
    char name[96];
    snprintf(name, sizeof name, "%s%s%s", t->name, cases[i].mode ? "/" : "",
             cases[i].mode ? cases[i].mode : "");
    json_array_append_new(list, json_pack("{s:s, s:s, s:o}", "name", name, "source", t->source,
                                          "candidate", emu_candidate(ev, &cases[i], t)));
  }
  char dir[] = "/tmp/opforge_emu_XXXXXX", path[256], cmd[1024];
  assert_non_null(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/emu.h", dir);
  write_lines(path, emu_header);
  snprintf(path, sizeof path, "%s/run.py", dir);
  write_lines(path, emu_runner);
  snprintf(path, sizeof path, "%s/cases.json", dir);
  assert_int_equal(json_dump_file(list, path, 0), 0);
  json_decref(list);
  snprintf(cmd, sizeof cmd, "'%s' %s/run.py %s/emu.h %s/cases.json %s", python_path(), dir, dir,
           dir, dir);
  int rc = system(cmd);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(rc, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_plans),
      cmocka_unit_test(test_compile_every_move),
      cmocka_unit_test(test_match_public_tasks),
      cmocka_unit_test(test_match_synthetic),
      cmocka_unit_test(test_emulated_kernels),
  };
  return cmocka_run_group_tests(tests, NULL, stop_shared_evaluator);
}
