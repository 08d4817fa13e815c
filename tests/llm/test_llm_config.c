/* Configuration of the LLM proposer: each --llm-* option and its variable, the key from a
 * file or OPFORGE_LLM_API_KEY (never in a message), `opforge serve`'s config with them,
 * and the task's llm options and budget.llm_tokens in a submission. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "handlers/submission.h"
#include "proposers/llm/settings.h"
#include "server/config.h"
#include "tests/llm/llm_testlib.h"

#define KEY "sk-config-test-key-ABCDEFGH12345678"

static char g_dir[64];

static int setup(void **state) {
  (void)state;
  snprintf(g_dir, sizeof g_dir, "/tmp/opforge-llmcfg-XXXXXX");
  return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
  return system(cmd) == 0 ? 0 : -1;
}

/* Sets option name to value on s; returns the setter's result with err. */
static int set(struct llm_settings *s, const char *name, const char *value, char *err, size_t n) {
  const struct llm_option *o = llm_option_find(name, strlen(name));
  assert_non_null(o);
  return o->set(s, value, err, n);
}

static void bad(const char *name, const char *value, const char *needle) {
  struct llm_settings s;
  llm_settings_defaults(&s);
  char err[600] = "";
  if (set(&s, name, value, err, sizeof err) == 0)
    fail_msg("%s %s was accepted", name, value);
  assert_non_null(strstr(err, name));
  if (needle && !strstr(err, needle))
    fail_msg("'%s' lacks '%s'", err, needle);
}

static void test_options(void **state) {
  (void)state;
  struct llm_settings s;
  llm_settings_defaults(&s);
  char err[600];
  assert_int_equal(set(&s, "--llm-base-url", "https://api.deepseek.com/v1//", err, sizeof err), 0);
  assert_string_equal(s.base_url, "https://api.deepseek.com/v1");
  assert_int_equal(set(&s, "--llm-model", "Qwen/Qwen2.5-Coder-32B-Instruct", err, sizeof err), 0);
  assert_int_equal(set(&s, "--llm-price-in", "0.27", err, sizeof err), 0);
  assert_true(s.price_in == 0.27);
  assert_int_equal(set(&s, "--llm-models", "a,b:7b,c/d", err, sizeof err), 0);
  assert_true(llm_settings_model_allowed(&s, "b:7b"));
  assert_true(llm_settings_model_allowed(&s, "Qwen/Qwen2.5-Coder-32B-Instruct"));
  assert_false(llm_settings_model_allowed(&s, "b"));
  assert_int_equal(set(&s, "--llm-models", "*", err, sizeof err), 0);
  assert_true(llm_settings_model_allowed(&s, "anything"));
  assert_int_equal(set(&s, "--llm-concurrency", "8", err, sizeof err), 0);
  assert_int_equal(s.concurrency, 8);
  assert_int_equal(s.max_response_bytes, 1u << 20);  /* the default cap: 1 MiB */
  bad("--llm-base-url", "api.deepseek.com", "http(s)://");
  bad("--llm-base-url", "https://user:pw@host/v1", "credentials");
  bad("--llm-base-url", "https://", NULL);
  bad("--llm-base-url", "http://host/v1?x=1", NULL);
  bad("--llm-model", "two words", NULL);
  bad("--llm-model", "", NULL);
  bad("--llm-models", "a,,b", NULL);
  bad("--llm-models", "a,", NULL);
  bad("--llm-price-in", "-1", NULL);
  bad("--llm-price-out", "cheap", NULL);
  bad("--llm-temperature", "2.5", "[0, 2]");
  bad("--llm-max-tokens", "8", NULL);
  bad("--llm-timeout", "0", NULL);
  bad("--llm-max-response", "100", NULL);
  bad("--llm-retries", "11", NULL);
  bad("--llm-concurrency", "0", NULL);
}

static char *fake_env_key = NULL;
static char *fake_getenv(const char *name) {
  if (strcmp(name, "OPFORGE_LLM_API_KEY") == 0)
    return fake_env_key;
  if (strcmp(name, "OPFORGE_LLM_MODEL") == 0)
    return "env-model";
  return NULL;
}

static void test_key_sources(void **state) {
  (void)state;
  char path[128], err[600];
  snprintf(path, sizeof path, "%s/key", g_dir);
  llm_write_file(path, "# the key\n\n  " KEY "  \nsecond line ignored\n");
  struct llm_settings s;
  llm_settings_defaults(&s);
  assert_int_equal(set(&s, "--llm-key-file", path, err, sizeof err), 0);
  assert_string_equal(s.key, KEY);
  fake_env_key = "sk-from-the-environment-0000";
  assert_int_equal(llm_settings_finish(&s, fake_getenv, err, sizeof err), 0);
  assert_string_equal(s.key, KEY);  /* the file wins */
  llm_settings_defaults(&s);
  assert_int_equal(llm_settings_finish(&s, fake_getenv, err, sizeof err), 0);
  assert_string_equal(s.key, "sk-from-the-environment-0000");
  /* A key with a space is refused without being quoted. */
  llm_write_file(path, "sk-has a-space-" KEY "\n");
  llm_settings_defaults(&s);
  assert_int_equal(set(&s, "--llm-key-file", path, err, sizeof err), -1);
  assert_null(strstr(err, KEY));
  assert_null(strstr(err, "sk-has"));
  assert_non_null(strstr(err, path));
  llm_write_file(path, "\n# nothing\n");
  assert_int_equal(set(&s, "--llm-key-file", path, err, sizeof err), -1);
  assert_int_equal(set(&s, "--llm-key-file", "/nonexistent/key", err, sizeof err), -1);
  assert_non_null(strstr(err, "cannot open"));
  fake_env_key = "sk bad";
  llm_settings_defaults(&s);
  assert_int_equal(llm_settings_finish(&s, fake_getenv, err, sizeof err), -1);
  assert_null(strstr(err, "sk bad"));
  fake_env_key = NULL;
  /* A base URL needs a model. */
  llm_settings_defaults(&s);
  assert_int_equal(set(&s, "--llm-base-url", "http://localhost:8000/v1", err, sizeof err), 0);
  assert_int_equal(llm_settings_finish(&s, NULL, err, sizeof err), -1);
  assert_non_null(strstr(err, "--llm-model"));
  /* From the environment: the model comes from OPFORGE_LLM_MODEL. */
  assert_int_equal(llm_settings_from_env(fake_getenv, &s, err, sizeof err), 0);
  assert_string_equal(s.model, "env-model");
  assert_string_equal(s.base_url, "");
}

static char *serve_getenv(const char *name) {
  if (strcmp(name, "OPFORGE_LLM_API_KEY") == 0)
    return KEY;
  if (strcmp(name, "OPFORGE_LLM_PRICE_OUT") == 0)
    return "1.1";
  if (strcmp(name, "OPFORGE_LLM_TIMEOUT") == 0)
    return "oops";
  return NULL;
}

static char *serve_getenv_ok(const char *name) {
  return strcmp(name, "OPFORGE_LLM_TIMEOUT") == 0 ? NULL : serve_getenv(name);
}

static void test_serve_config(void **state) {
  (void)state;
  struct opforge_config *cfg = calloc(1, sizeof *cfg);
  char err[600];
  char *argv[] = {"--llm-base-url", "http://127.0.0.1:8000/v1/", "--llm-model=llama3.1:8b",
                  "--llm-price-in", "0", "--gpus", "none"};
  assert_int_equal(config_load(7, argv, serve_getenv_ok, cfg, err, sizeof err), 0);
  assert_string_equal(cfg->llm.base_url, "http://127.0.0.1:8000/v1");
  assert_string_equal(cfg->llm.model, "llama3.1:8b");
  assert_string_equal(cfg->llm.key, KEY);
  assert_true(cfg->llm.price_out == 1.1);
  assert_int_equal(cfg->llm.retries, 5);  /* the papers' public code retries 5 times */
  assert_true(cfg->llm.temperature == 1.0 && cfg->llm.max_tokens == 16384);
  /* A bad variable names itself; a bad option names the option; neither shows the key. */
  assert_int_equal(config_load(7, argv, serve_getenv, cfg, err, sizeof err), -1);
  assert_non_null(strstr(err, "OPFORGE_LLM_TIMEOUT"));
  char *bad_argv[] = {"--llm-retries", "99"};
  assert_int_equal(config_load(2, bad_argv, serve_getenv_ok, cfg, err, sizeof err), -1);
  assert_non_null(strstr(err, "--llm-retries"));
  assert_null(strstr(err, KEY));
  char *no_model[] = {"--llm-base-url", "http://h/v1"};
  assert_int_equal(config_load(2, no_model, NULL, cfg, err, sizeof err), -1);
  assert_non_null(strstr(err, "--llm-model"));
  char *unknown[] = {"--llm-api-key", KEY};
  assert_int_equal(config_load(2, unknown, NULL, cfg, err, sizeof err), -1);
  assert_non_null(strstr(err, "unknown option"));
  assert_null(strstr(err, KEY));
  free(cfg);
}

/* A submission body (JSON text with a reference added) through submission_parse. */
static int submit(const char *extra, struct submission *ret, struct validation_error *err) {
  char text[2048];
  snprintf(text, sizeof text, "{\"reference\": \"class Model(nn.Module):\\ndef get_inputs():\\n"
                              "def get_init_inputs():\\n\"%s}", extra);
  json_t *body = json_loads(text, 0, NULL);
  assert_non_null(body);
  int rc = submission_parse(body, ret, err);
  json_decref(body);
  return rc;
}

static void refused(const char *extra, const char *code, const char *field) {
  struct submission sub = {0};
  struct validation_error err = {0};
  if (submit(extra, &sub, &err) == 0) {
    submission_clear(&sub);
    fail_msg("accepted: %s", extra);
  }
  assert_string_equal(api_error_info(err.code)->code, code);
  assert_string_equal(err.field, field);
}

static void test_submission_llm(void **state) {
  (void)state;
  struct submission sub = {0};
  struct validation_error err = {0};
  assert_int_equal(submit(", \"proposer\": \"llm\", \"llm\": {\"model\": \"deepseek-chat\", "
                          "\"temperature\": 0.7, \"max_tokens\": 4096}, \"budget\": "
                          "{\"llm_usd\": 2, \"llm_tokens\": 500000}", &sub, &err), 0);
  json_t *llm = json_object_get(sub.options, "llm");
  assert_string_equal(json_string_value(json_object_get(llm, "model")), "deepseek-chat");
  assert_true(json_number_value(json_object_get(llm, "temperature")) == 0.7);
  assert_int_equal(json_integer_value(json_object_get(llm, "max_tokens")), 4096);
  json_t *budget = json_object_get(sub.options, "budget");
  assert_int_equal(json_integer_value(json_object_get(budget, "llm_tokens")), 500000);
  assert_int_equal(json_integer_value(json_object_get(budget, "steps")), 20);
  submission_clear(&sub);
  /* Defaults: no token limit unless asked; null temperature is the server's. */
  assert_int_equal(submit(", \"llm\": {\"temperature\": null, \"max_tokens\": null}", &sub, &err),
                   0);
  assert_null(json_object_get(json_object_get(sub.options, "budget"), "llm_tokens"));
  submission_clear(&sub);
  refused(", \"llm\": {\"temperature\": 2.5}", "invalid_field", "llm.temperature");
  refused(", \"llm\": {\"temperature\": \"hot\"}", "invalid_field", "llm.temperature");
  refused(", \"llm\": {\"max_tokens\": 8}", "invalid_field", "llm.max_tokens");
  refused(", \"llm\": {\"max_tokens\": 100.5}", "invalid_field", "llm.max_tokens");
  refused(", \"llm\": {\"base_url\": \"http://evil/v1\"}", "unknown_field", "llm.base_url");
  refused(", \"llm\": {\"api_key\": \"sk\"}", "unknown_field", "llm.api_key");
  refused(", \"budget\": {\"llm_tokens\": 0}", "invalid_field", "budget.llm_tokens");
  refused(", \"budget\": {\"llm_tokens\": 1.5}", "invalid_field", "budget.llm_tokens");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_options),
    cmocka_unit_test(test_key_sources),
    cmocka_unit_test(test_serve_config),
    cmocka_unit_test(test_submission_llm),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
