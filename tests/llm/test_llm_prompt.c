/* Prompt rendering: golden files pin the large step (with skills, direction, strategies
 * and pool; and the first step, with none of them) and the small step, so a change to a
 * template or to the code that fills it shows as a diff. OPFORGE_UPDATE_GOLDEN=1 rewrites
 * the golden files instead of comparing. Also: the template engine's rules, the order of
 * the large step's sections, and the pitfall threshold. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "proposers/llm/prompt.h"
#include "tests/llm/llm_testlib.h"

/* Builds the prompt of fixture request name (small or large) and compares its user
 * message with golden/<golden>. Returns the user message (caller frees). */
static char *check_golden(const char *fixture, bool small, const char *golden) {
  json_t *doc = llm_fixture(fixture);
  struct proposal_request req;
  llm_request_of(doc, &req);
  struct llm_prompt p = {0};
  char err[256];
  if (llm_prompt_build(&req, small, &p, err, sizeof err) != 0)
    fail_msg("%s: %s", fixture, err);
  json_decref(doc);
  assert_non_null(strstr(p.system, "CUDA"));
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/tests/llm/golden/%s", getenv("OPFORGE_SOURCE_ROOT"), golden);
  const char *update = getenv("OPFORGE_UPDATE_GOLDEN");
  if (update && *update) {
    llm_write_file(path, p.user);
  } else {
    char *want = llm_read_file(path);
    if (!want)
      fail_msg("no golden file %s (run with OPFORGE_UPDATE_GOLDEN=1 to write it)", path);
    if (strcmp(want, p.user) != 0) {
      size_t i = 0;
      while (want[i] && want[i] == p.user[i])
        i++;
      size_t from = i > 80 ? i - 80 : 0;
      fail_msg("%s differs from the golden file at byte %zu:\n--- golden\n%.240s\n--- got\n%.240s",
               golden, i, want + from, p.user + from);
    }
    free(want);
  }
  char *user = p.user;
  p.user = NULL;
  llm_prompt_clear(&p);
  return user;
}

/* The offset of needle in s; fails when absent. */
static size_t at(const char *s, const char *needle) {
  const char *p = strstr(s, needle);
  if (!p)
    fail_msg("the prompt lacks '%s'", needle);
  return (size_t)(p - s);
}

static void test_large_full(void **state) {
  (void)state;
  char *u = check_golden("request_large_full.json", false, "large_full.txt");
  /* The order of the sections. */
  size_t problem = at(u, "## Problem statement"), rules = at(u, "## Rules");
  size_t pitfalls = at(u, "## Common pitfalls"), region = at(u, "## The region to write");
  size_t direction = at(u, "## Direction"), pool = at(u, "## Kernels so far");
  size_t answer = at(u, "## Answer format");
  assert_true(problem < rules && rules < pitfalls && pitfalls < region && region < direction &&
              direction < pool && pool < answer);
  /* Rules scored 3 and up, highest first; the one scored 2 is left out. */
  size_t five = at(u, "float4 load unless"), three = at(u, "output element unwritten");
  assert_true(five < three);
  assert_null(strstr(u, "printf."));
  /* The region: its exact tensors, sizes, floor from the floor basis, the program. */
  at(u, "- input:0: float32 [128, 256], an input, read only");
  at(u, "- param:bias: float32 [256], a parameter, read only");
  at(u, "- output:0: float32 [128, 256], an output: write every element");
  at(u, "add = operator.add(x, bias)  # [128, 256] float32");
  at(u, "Work: 65536 FLOPs and 263168 bytes");
  at(u, "Floor: 0.09 us");
  at(u, "self.bias = torch.nn.Parameter");
  at(u, "one part of the task's program");
  /* The direction, its strategy with evidence, the other strategy; the pool without the
   * reference program. */
  at(u, "Optimize in this direction: Memory access.");
  at(u, "Strategy to apply: Aligned float4 vector loads and stores.");
  at(u, "evidence: reward 0.410 (correct): 1.5x on a 4096x4096 add");
  at(u, "- Grid-stride loop over a full wave (not tried yet)");
  at(u, "### Kernel 1 (step 2, large step, strategy vector_float4): correct, 4.20 us, 5.00x eager");
  at(u, "### Kernel 2 (step 3, small step, strategy grid_stride): failed at compile");
  assert_null(strstr(u, "### Kernel 3"));
  free(u);
}

static void test_large_first(void **state) {
  (void)state;
  char *u = check_golden("request_large_first.json", false, "large_first.txt");
  assert_null(strstr(u, "## Common pitfalls"));
  assert_null(strstr(u, "## Direction"));
  assert_null(strstr(u, "## Kernels so far"));
  assert_null(strstr(u, "```python"));  /* no reference in the request */
  at(u, "The region is the whole task");
  at(u, "PyTorch eager: 21.00 us");
  at(u, "The GPU: NVIDIA H200, compute capability 9.0 (sm_90a), 132 SMs, 62.9 MB of L2");
  assert_null(strstr(u, "\n\n\n"));  /* sections left out leave no gap */
  free(u);
}

static void test_small(void **state) {
  (void)state;
  char *u = check_golden("request_small.json", true, "small.txt");
  at(u, "## The current kernel");
  at(u, "float v = vv + b[i % cols];");
  at(u, "Its compiler options: `[\"-DVEC=4\"]`");
  size_t older = at(u, "- step 2, large step: correct"), newer = at(u, "- step 5, small step");
  assert_true(older < newer);
  at(u, "The current kernel failed (see above): fix that first");
  /* Its whole failure and compile log, and its ancestor's source and metrics (within
   * context_bytes), not one-line verdicts. */
  at(u, "Its compile log:\n\n```\nkernel.cu(4): error: identifier \"vv\" is undefined\n"
        "      float v = vv + b[i % cols];\n");
  size_t ancestor = at(u, "- step 2, large step: correct");
  assert_true(at(u, "; 18 registers\n```cuda\n") > ancestor);
  assert_true(at(u, "Strategy to apply: Aligned float4") > ancestor);
  at(u, "<old_str_1>");
  assert_null(strstr(u, "## Kernels so far"));
  free(u);
}

static void test_template_engine(void **state) {
  (void)state;
  struct ltext t = {0};
  char err[128];
  struct tvar vars[] = {{"a", "A"}, {"empty", ""}, {"block", "line\n"}, {"braces", "{{a}}"}};
  assert_int_equal(llm_template_render("x {{a}} y\n{{empty}}\n{{block}}\nz {{braces}}\n", vars, 4,
                                       &t, err, sizeof err), 0);
  /* An empty placeholder alone on its line goes with its newline; values are not
   * expanded again. */
  assert_string_equal(ltext_str(&t), "x A y\nline\n\nz {{a}}\n");
  ltext_clear(&t);
  assert_int_equal(llm_template_render("{{missing}}", vars, 4, &t, err, sizeof err), -1);
  assert_non_null(strstr(err, "{{missing}}"));
  ltext_clear(&t);
  assert_int_equal(llm_template_render("{{a", vars, 4, &t, err, sizeof err), -1);
  ltext_clear(&t);
  assert_non_null(llm_prompt_template("large.txt"));
  assert_null(llm_prompt_template("nope.txt"));
}

/* A large prompt for a tf32 task states its tolerance; no rule reaches the threshold. */
/* The large step's prompt of request_large_full.json on the GPU described by gpu (taken
 * over), as one string (caller frees). */
static char *prompt_on(json_t *gpu) {
  json_t *doc = llm_fixture("request_large_full.json");
  json_object_set_new(json_object_get(doc, "profile"), "gpu", gpu);
  struct proposal_request req;
  llm_request_of(doc, &req);
  struct llm_prompt p = {0};
  char err[256];
  assert_int_equal(llm_prompt_build(&req, false, &p, err, sizeof err), 0);
  char *user = strdup(p.user);
  llm_prompt_clear(&p);
  json_decref(doc);
  return user;
}

/* Every hardware fact comes from the profile: an H100 and an A100 give prompts that
 * differ in exactly one line, the GPU's, whose text is each device's own. */
static void test_prompts_carry_the_profiles_hardware(void **state) {
  (void)state;
  char *h100 = prompt_on(json_pack(
      "{s:s,s:s,s:s,s:i,s:I,s:f,s:i,s:i}", "name", "NVIDIA H100 80GB HBM3", "capability",
      "9.0", "arch", "sm_90a", "sm_count", 132, "l2_bytes", (json_int_t)52428800,
      "hbm_peak_GBps", 3352.3, "max_shared_optin", 232448, "max_threads_per_block", 1024));
  char *a100 = prompt_on(json_pack(
      "{s:s,s:s,s:s,s:i,s:I,s:f,s:i,s:i}", "name", "NVIDIA A100-SXM4-80GB", "capability",
      "8.0", "arch", "sm_80", "sm_count", 108, "l2_bytes", (json_int_t)41943040,
      "hbm_peak_GBps", 2039.0, "max_shared_optin", 166912, "max_threads_per_block", 1024));
  const char *a = h100, *b = a100;
  int differing = 0;
  while (*a || *b) {
    size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
    if (la != lb || strncmp(a, b, la) != 0) {
      differing++;
      assert_true(strncmp(a, "The GPU: ", 9) == 0 && strncmp(b, "The GPU: ", 9) == 0);
      assert_int_equal(strncmp(a,
          "The GPU: NVIDIA H100 80GB HBM3, compute capability 9.0 (sm_90a), 132 SMs, 52.4 MB "
          "of L2, 227 KiB of shared memory per block (opt-in), at most 1024 threads per block, "
          "memory bandwidth 3.35 TB/s peak (3.00 TB/s measured for a copy), fp32 SIMT peak "
          "60.0 TFLOP/s.", la), 0);
      assert_int_equal(strncmp(b,
          "The GPU: NVIDIA A100-SXM4-80GB, compute capability 8.0 (sm_80), 108 SMs, 41.9 MB "
          "of L2, 163 KiB of shared memory per block (opt-in), at most 1024 threads per block, "
          "memory bandwidth 2.04 TB/s peak (3.00 TB/s measured for a copy), fp32 SIMT peak "
          "60.0 TFLOP/s.", lb), 0);
    }
    a += la + (a[la] == '\n');
    b += lb + (b[lb] == '\n');
  }
  assert_int_equal(differing, 1);
  /* No device figure comes from anywhere else (the seed memory names none). */
  assert_null(strstr(a100, "H200"));
  assert_null(strstr(a100, "4.8 TB/s"));
  free(h100);
  free(a100);
}

static void test_precision_and_threshold(void **state) {
  (void)state;
  json_t *doc = llm_fixture("request_large_full.json");
  json_object_set_new(json_object_get(doc, "profile"), "precision", json_string("tf32"));
  json_object_set_new(json_object_get(doc, "profile"), "tolerance",
                      json_pack("{s:f, s:f}", "atol", 0.01, "rtol", 0.02));
  json_t *skill;
  size_t i;
  json_array_foreach(json_object_get(doc, "skills"), i, skill)
      json_object_set_new(skill, "score", json_integer(2));
  struct proposal_request req;
  llm_request_of(doc, &req);
  struct llm_prompt p = {0};
  char err[256];
  assert_int_equal(llm_prompt_build(&req, false, &p, err, sizeof err), 0);
  at(p.user, "the task allows tf32 arithmetic. Every output must match PyTorch within atol 0.01 "
             "and rtol 0.02.");
  assert_null(strstr(p.user, "## Common pitfalls"));
  llm_prompt_clear(&p);
  json_decref(doc);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_large_full),
    cmocka_unit_test(test_large_first),
    cmocka_unit_test(test_small),
    cmocka_unit_test(test_template_engine),
    cmocka_unit_test(test_precision_and_threshold),
    cmocka_unit_test(test_prompts_carry_the_profiles_hardware),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
