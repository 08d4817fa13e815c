/* Allocation-failure injection for body intake and JSON parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/submission.h"
#include "server/body.h"

/* Injection state of the Jansson allocator: budget < 0 never fails; otherwise that many
 * allocations succeed and every later one fails. live counts blocks not yet freed. */
static long alloc_budget = -1;
static long alloc_live;
static bool alloc_refused;

static void *failing_malloc(size_t size) {
  if (alloc_budget == 0) {
    alloc_refused = true;
    return NULL;
  }
  if (alloc_budget > 0)
    alloc_budget--;
  void *p = malloc(size);
  if (p)
    alloc_live++;
  return p;
}

static void counting_free(void *p) {
  if (!p)
    return;
  alloc_live--;
  free(p);
}

static json_malloc_t saved_malloc;
static json_free_t saved_free;

static int install_allocator(void **state) {
  (void)state;
  json_get_alloc_funcs(&saved_malloc, &saved_free);
  json_set_alloc_funcs(failing_malloc, counting_free);
  alloc_budget = -1;
  alloc_live = 0;
  return 0;
}

static int restore_allocator(void **state) {
  (void)state;
  json_set_alloc_funcs(saved_malloc, saved_free);
  body_fail_after(-1);
  return 0;
}

#define REFERENCE                                                                        \
  "import torch\n"                                                                       \
  "import torch.nn as nn\n"                                                              \
  "\n"                                                                                   \
  "class Model(nn.Module):\n"                                                            \
  "    \"\"\"Simple model that performs RMS Normalization.\"\"\"\n"                      \
  "    def __init__(self, num_features: int, eps: float = 1e-5):\n"                      \
  "        super(Model, self).__init__()\n"                                              \
  "        self.num_features = num_features\n"                                           \
  "        self.eps = eps\n"                                                             \
  "\n"                                                                                   \
  "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"                            \
  "        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)\n"       \
  "        return x / rms\n"                                                             \
  "\n"                                                                                   \
  "batch_size = 16\nfeatures = 64\ndim1 = 256\ndim2 = 256\n"                             \
  "\n"                                                                                   \
  "def get_inputs():\n"                                                                  \
  "    x = torch.randn(batch_size, features, dim1, dim2)\n"                              \
  "    return [x]\n"                                                                     \
  "\n"                                                                                   \
  "def get_init_inputs():\n"                                                             \
  "    return [features]\n"

/* Builds the JSON text of a realistic submission with every key set, with the saved
 * allocator so that it does not count (caller frees with free). */
static char *submission_text(void) {
  json_set_alloc_funcs(saved_malloc, saved_free);
  json_t *body = json_pack(
      "{s:s, s:s, s:s, s:s, s:{s:i, s:i, s:f}, s:s, s:{s:f}, s:i, s:i, s:{s:s}}",
      "name", "36_RMSNorm", "reference", REFERENCE, "proposer", "llm", "policy", "htam+tree",
      "budget", "steps", 7, "seconds", 600, "llm_usd", 0.25, "precision", "tf32",
      "tolerance", "atol", 0.001, "trials", 3, "seed", 1234, "llm", "model",
      "deepseek-reasoner");
  assert_non_null(body);
  char *text = json_dumps(body, JSON_COMPACT);
  assert_non_null(text);
  json_decref(body);
  json_set_alloc_funcs(failing_malloc, counting_free);
  return text;
}

/* The options submission_parse must produce for submission_text(), as JSON text. */
static const char *const EXPECTED_OPTIONS =
    "{\"proposer\":\"llm\",\"policy\":\"htam+tree\","
    "\"budget\":{\"steps\":7,\"seconds\":600,\"llm_usd\":0.25,\"stop_at_floor\":0.97},"
    "\"precision\":\"tf32\",\"tolerance\":{\"atol\":0.001,\"rtol\":0.01},"
    "\"trials\":3,\"seed\":1234,\"llm\":{\"model\":\"deepseek-reasoner\"}}";

enum outcome { RUN_REFUSED, RUN_COMPLETE, RUN_WRONG };

/* One run of parse + validate with the allocator allowing budget allocations. Returns
 * RUN_COMPLETE when it validated with no allocation refused, RUN_REFUSED when it failed
 * cleanly or succeeded with the right answer despite a refusal, and RUN_WRONG (options
 * dumped into *wrong, caller frees with free) when it reported success with wrong
 * options. Leaks
 * and unexpected errors fail the test at once. */
static enum outcome parse_once(const char *text, size_t len, long budget,
                               const json_t *expected, char **wrong) {
  alloc_budget = budget;
  alloc_refused = false;
  json_error_t jerr;
  enum outcome out = RUN_REFUSED;
  json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
  if (!root) {
    alloc_budget = -1;
    /* The text is valid: only a refusal may fail it. Jansson reports a refusal either
     * as a syntax error or with no text at all, so the text is not checked. */
    assert_true(alloc_refused);
  } else {
    struct submission sub;
    memset(&sub, 0, sizeof sub);
    struct validation_error verr;
    memset(&verr, 0, sizeof verr);
    int rc = submission_parse(root, &sub, &verr);
    alloc_budget = -1;
    assert_true(json_is_object(root));
    if (rc != 0) {
      assert_true(alloc_refused);
      assert_int_equal(verr.code, API_ERR_INTERNAL);
      assert_null(sub.options);
    } else if (!json_equal(sub.options, expected)) {
      /* Success under a refused allocation must still be the whole, right answer. */
      out = RUN_WRONG;
      json_set_alloc_funcs(saved_malloc, saved_free);
      *wrong = json_dumps(sub.options, JSON_COMPACT | JSON_SORT_KEYS);
      json_set_alloc_funcs(failing_malloc, counting_free);
    } else {
      assert_string_equal(sub.name, "36_RMSNorm");
      assert_string_equal(sub.reference, REFERENCE);
      assert_int_equal(sub.reference_bytes, strlen(REFERENCE));
      out = alloc_refused ? RUN_REFUSED : RUN_COMPLETE;
    }
    submission_clear(&sub);
    json_decref(root);
  }
  if (alloc_live != 0)
    fail_msg("budget %ld: %ld Jansson blocks leaked", budget, alloc_live);
  return out;
}

static void test_json_parse_under_failures(void **state) {
  (void)state;
  char *text = submission_text();
  size_t len = strlen(text);
  json_error_t jerr;
  json_t *expected = json_loads(EXPECTED_OPTIONS, 0, &jerr);
  assert_non_null(expected);
  long live_before = alloc_live;  /* expected's blocks; each run must end at zero */
  alloc_live = 0;

  long n = 0, n_wrong = 0, first_wrong = -1;
  char *first_dump = NULL;
  enum outcome out;
  do {
    char *dump = NULL;
    out = parse_once(text, len, n, expected, &dump);
    if (out == RUN_WRONG && n_wrong++ == 0) {
      first_wrong = n;
      first_dump = dump;
    } else {
      free(dump);
    }
    if (++n > 100000)
      fail_msg("parsing never succeeded within 100000 allocations");
  } while (out != RUN_COMPLETE);
  n--;  /* the last run had no refusal: n failure points came before it */
  print_message("json_loadb + submission_parse: %ld allocation failure points, %ld wrong\n",
                n, n_wrong);
  if (n_wrong)
    print_message("first wrong at budget %ld: options %s\n", first_wrong,
                  first_dump ? first_dump : "?");
  free(first_dump);
  alloc_live = live_before;
  json_decref(expected);
  free(text);

  assert_int_equal(n_wrong, 0);
  /* Parsing a dozen keys and building the options takes many allocations: the loop
   * really exercised failure points. */
  assert_true(n >= 20);
}

/* A duplicate key is refused whatever the allocator does. */
static void test_duplicates_under_failures(void **state) {
  (void)state;
  static const char text[] =
      "{\"reference\":\"x\",\"budget\":{\"steps\":3,\"steps\":4},\"trials\":3}";
  for (long n = 0; n < 200; n++) {
    alloc_live = 0;
    alloc_budget = n;
    json_error_t jerr;
    json_t *root = json_loadb(text, sizeof text - 1, JSON_REJECT_DUPLICATES, &jerr);
    alloc_budget = -1;
    if (root) {
      char *dump = json_dumps(root, JSON_COMPACT);
      fail_msg("budget %ld: duplicate key accepted: %s", n, dump ? dump : "?");
    }
    assert_int_equal(alloc_live, 0);
  }
}

/* Feeds text to a fresh request in chunks; returns the final state. The request's body
 * is checked and freed here. */
static int feed_body(const char *text, size_t len, size_t chunk, int fail_after) {
  struct request req;
  memset(&req, 0, sizeof req);
  body_fail_after(fail_after);
  for (size_t off = 0; off < len; off += chunk)
    body_append(&req, text + off, len - off < chunk ? len - off : chunk, 1u << 20);
  body_fail_after(-1);
  int st = req.body_state;
  if (st == BODY_READING) {
    assert_int_equal(req.body_len, len);
    assert_memory_equal(req.body, text, len);
    assert_int_equal(req.body[len], '\0');
  } else {
    assert_int_equal(st, BODY_NOMEM);
    assert_true(req.body_len < len);
    if (req.body_len)
      assert_memory_equal(req.body, text, req.body_len);
  }
  free(req.body);
  return st;
}

static void test_body_append_under_failures(void **state) {
  (void)state;
  /* Build a 20000-byte body: realistic JSON padded inside the reference string. */
  char *text = submission_text();
  size_t base = strlen(text);
  const size_t len = 20000;
  assert_true(base < len);
  char *big = malloc(len + 1);
  assert_non_null(big);
  memcpy(big, text, base);
  memset(big + base, ' ', len - base);
  big[len] = '\0';

  /* 4096 -> 8192 -> 16384 -> 32768: four allocations, so fail points 0..3. */
  int n = 0;
  while (feed_body(big, len, 100, n) == BODY_NOMEM) {
    n++;
    assert_true(n <= 64);
  }
  assert_int_equal(n, 4);
  /* Once the body is whole, it parses. */
  alloc_budget = -1;
  alloc_live = 0;
  json_error_t jerr;
  json_t *root = json_loadb(big, len, JSON_REJECT_DUPLICATES, &jerr);
  assert_non_null(root);
  json_decref(root);
  assert_int_equal(alloc_live, 0);

  free(text);
  free(big);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_json_parse_under_failures),
    cmocka_unit_test(test_duplicates_under_failures),
    cmocka_unit_test(test_body_append_under_failures),
  };
  return cmocka_run_group_tests(tests, install_allocator, restore_allocator);
}
