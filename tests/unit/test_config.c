/* Unit tests of server/config.c: defaults, options, variables, token files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server/config.h"

/* The fake environment seen through fake_getenv: NULL-terminated name/value pairs. */
static const char *const *fake_env;

static char *fake_getenv(const char *name) {
  for (const char *const *e = fake_env; e && e[0]; e += 2)
    if (strcmp(e[0], name) == 0)
      return (char *)e[1];
  return NULL;
}

static const char *const no_env[] = {NULL};

/* Loads with argv (NULL-terminated) and env; asserts success. */
static void load_ok(const char *const *argv, const char *const *env,
                    struct opforge_config *cfg) {
  char *args[48];
  int argc = 0;
  while (argv && argv[argc]) {
    args[argc] = (char *)argv[argc];
    argc++;
  }
  char err[512] = "";
  fake_env = env;
  int rc = config_load(argc, args, fake_getenv, cfg, err, sizeof err);
  if (rc != 0)
    fail_msg("config_load failed: %s", err);
}

/* Loads with argv and env; asserts failure, that the message contains each of the
 * NULL-terminated needles, and that cfg was left untouched. */
static void load_fails(const char *const *argv, const char *const *env, char *err,
                       size_t errlen) {
  char *args[48];
  int argc = 0;
  while (argv && argv[argc]) {
    args[argc] = (char *)argv[argc];
    argc++;
  }
  struct opforge_config cfg, untouched;
  memset(&cfg, 0xA5, sizeof cfg);
  memset(&untouched, 0xA5, sizeof untouched);
  err[0] = '\0';
  fake_env = env;
  assert_int_equal(config_load(argc, args, fake_getenv, &cfg, err, errlen), -1);
  assert_memory_equal(&cfg, &untouched, sizeof cfg);
  assert_true(strlen(err) > 0);
}

#define ARGV(...) ((const char *const[]){__VA_ARGS__, NULL})
#define ENV(...) ((const char *const[]){__VA_ARGS__, NULL})

static void assert_contains(const char *haystack, const char *needle) {
  if (!strstr(haystack, needle))
    fail_msg("expected '%s' in message '%s'", needle, haystack);
}

static void test_defaults(void **state) {
  (void)state;
  struct opforge_config cfg;
  load_ok(NULL, no_env, &cfg);
  assert_string_equal(cfg.listen_host, "127.0.0.1");
  assert_int_equal(cfg.listen_port, 8080);
  assert_string_equal(cfg.data_dir, "./var");
  assert_int_equal(cfg.gpu_mode, GPUS_ALL);
  assert_int_equal(cfg.n_gpu_list, 0);
  assert_int_equal(cfg.workers_per_gpu, 1);
  assert_int_equal(cfg.n_tokens, 0);
  assert_string_equal(cfg.token_file, "");
  assert_int_equal(cfg.max_body_bytes, 1048576);
  assert_int_equal(cfg.max_url_bytes, 8192);
  assert_int_equal(cfg.threads, 8);
  assert_int_equal(cfg.max_connections, 1024);
  assert_int_equal(cfg.max_connections_per_ip, 64); /* well below the 1024 in all */
  assert_int_equal(cfg.connection_timeout_s, 30);
  assert_int_equal(cfg.header_deadline_s, 10);
  assert_int_equal(cfg.n_cors_origins, 0);
  assert_int_equal(cfg.n_allow_hosts, 0);
  assert_int_equal(cfg.sse_keepalive_s, 15);
  assert_string_equal(cfg.python, "");
  assert_string_equal(cfg.evaluator, "");

  /* A NULL getenv_fn means no variables at all. */
  char err[256] = "";
  struct opforge_config cfg2;
  assert_int_equal(config_load(0, NULL, NULL, &cfg2, err, sizeof err), 0);
  assert_string_equal(cfg2.listen_host, "127.0.0.1");
  assert_int_equal(cfg2.listen_port, 8080);

  struct opforge_config cfg3;
  config_defaults(&cfg3);
  assert_int_equal(cfg3.max_body_bytes, 1048576);
  assert_int_equal(cfg3.gpu_mode, GPUS_ALL);
}

static void test_listen_forms(void **state) {
  (void)state;
  struct opforge_config cfg;
  load_ok(ARGV("--listen", "127.0.0.1:0"), no_env, &cfg);
  assert_string_equal(cfg.listen_host, "127.0.0.1");
  assert_int_equal(cfg.listen_port, 0);

  load_ok(ARGV("--listen", "[::1]:9"), no_env, &cfg);
  assert_string_equal(cfg.listen_host, "[::1]");
  assert_int_equal(cfg.listen_port, 9);

  load_ok(ARGV("--listen", "0.0.0.0:65535"), no_env, &cfg);
  assert_string_equal(cfg.listen_host, "0.0.0.0");
  assert_int_equal(cfg.listen_port, 65535);

  load_ok(ARGV("--listen", "localhost:8081"), no_env, &cfg);
  assert_string_equal(cfg.listen_host, "localhost");
  assert_int_equal(cfg.listen_port, 8081);
}

static void test_listen_bad(void **state) {
  (void)state;
  char err[512];
  static const char *const bad[] = {"nohost", ":8080", "host:", "host:65536", "host:-1",
                                    "host:+80", "host:80x", ""};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    load_fails(ARGV("--listen", bad[i]), no_env, err, sizeof err);
    assert_contains(err, "--listen");
  }
}

static void test_equals_form(void **state) {
  (void)state;
  struct opforge_config cfg;
  load_ok(ARGV("--listen=127.0.0.1:5", "--gpus=none", "--max-url=1024", "--data=/srv/x"),
          no_env, &cfg);
  assert_string_equal(cfg.listen_host, "127.0.0.1");
  assert_int_equal(cfg.listen_port, 5);
  assert_int_equal(cfg.gpu_mode, GPUS_NONE);
  assert_int_equal(cfg.max_url_bytes, 1024);
  assert_string_equal(cfg.data_dir, "/srv/x");

  char err[512];
  load_fails(ARGV("--max-body=12"), no_env, err, sizeof err);
  assert_contains(err, "--max-body");
  load_fails(ARGV("--listen="), no_env, err, sizeof err);
  assert_contains(err, "--listen");
}

static void test_gpus(void **state) {
  (void)state;
  struct opforge_config cfg;
  load_ok(ARGV("--gpus", "0,2,7"), no_env, &cfg);
  assert_int_equal(cfg.gpu_mode, GPUS_LIST);
  assert_int_equal(cfg.n_gpu_list, 3);
  assert_int_equal(cfg.gpu_list[0], 0);
  assert_int_equal(cfg.gpu_list[1], 2);
  assert_int_equal(cfg.gpu_list[2], 7);
  load_ok(ARGV("--gpus", "none"), no_env, &cfg);
  assert_int_equal(cfg.gpu_mode, GPUS_NONE);
  load_ok(ARGV("--gpus", "all"), no_env, &cfg);
  assert_int_equal(cfg.gpu_mode, GPUS_ALL);

  char err[512];
  static const char *const bad[] = {"0,,1", ",1", "", "x", "-1", "1;2", "1024", "some"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    load_fails(ARGV("--gpus", bad[i]), no_env, err, sizeof err);
    assert_contains(err, "--gpus");
  }
}

/* "0," has an empty element just like "0,,1", which is refused. */
static void test_gpus_trailing_comma(void **state) {
  (void)state;
  char err[512];
  load_fails(ARGV("--gpus", "0,"), no_env, err, sizeof err);
  assert_contains(err, "--gpus");
}

static void test_bad_values_name_option(void **state) {
  (void)state;
  char err[512];
  load_fails(ARGV("--max-body", "12"), no_env, err, sizeof err);
  assert_contains(err, "--max-body");
  assert_contains(err, "12");
  load_fails(ARGV("--max-body", "67108865"), no_env, err, sizeof err);
  assert_contains(err, "--max-body");
  load_fails(ARGV("--max-body", "1MiB"), no_env, err, sizeof err);
  assert_contains(err, "--max-body");
  load_fails(ARGV("--workers-per-gpu", "0"), no_env, err, sizeof err);
  assert_contains(err, "--workers-per-gpu");
  load_fails(ARGV("--workers-per-gpu", "17"), no_env, err, sizeof err);
  assert_contains(err, "--workers-per-gpu");
  load_fails(ARGV("--max-url", "255"), no_env, err, sizeof err);
  assert_contains(err, "--max-url");
  load_fails(ARGV("--threads", "-1"), no_env, err, sizeof err);
  assert_contains(err, "--threads");
  load_fails(ARGV("--threads", "99999999999999999999999"), no_env, err, sizeof err);
  assert_contains(err, "--threads");
  load_fails(ARGV("--nope"), no_env, err, sizeof err);
  assert_contains(err, "--nope");
  load_fails(ARGV("--nope=1"), no_env, err, sizeof err);
  assert_contains(err, "--nope");
  load_fails(ARGV("serve"), no_env, err, sizeof err);
  assert_contains(err, "serve");
  load_fails(ARGV("--data"), no_env, err, sizeof err);
  assert_contains(err, "--data");
  assert_contains(err, "missing value");
  load_fails(ARGV("--data", ""), no_env, err, sizeof err);
  assert_contains(err, "--data");

  /* A later bad option fails the whole load even after good ones. */
  load_fails(ARGV("--listen", "127.0.0.1:1", "--workers-per-gpu", "0"), no_env, err,
             sizeof err);
  assert_contains(err, "--workers-per-gpu");
}

static void test_bounds_accepted(void **state) {
  (void)state;
  struct opforge_config cfg;
  load_ok(ARGV("--max-body", "1024", "--max-url", "256", "--workers-per-gpu", "16",
               "--threads", "256", "--max-connections", "16",
               "--max-connections-per-ip", "1", "--connection-timeout", "3600",
               "--sse-keepalive", "1", "--python", "/usr/bin/python3", "--evaluator",
               "/opt/ev.py"),
          no_env, &cfg);
  assert_int_equal(cfg.max_body_bytes, 1024);
  assert_int_equal(cfg.max_url_bytes, 256);
  assert_int_equal(cfg.workers_per_gpu, 16);
  assert_int_equal(cfg.threads, 256);
  assert_int_equal(cfg.max_connections, 16);
  assert_int_equal(cfg.max_connections_per_ip, 1);
  assert_int_equal(cfg.connection_timeout_s, 3600);
  assert_int_equal(cfg.sse_keepalive_s, 1);
  assert_string_equal(cfg.python, "/usr/bin/python3");
  assert_string_equal(cfg.evaluator, "/opt/ev.py");
  load_ok(ARGV("--max-body", "67108864"), no_env, &cfg);
  assert_int_equal(cfg.max_body_bytes, 67108864);
}

static void test_env_and_override(void **state) {
  (void)state;
  struct opforge_config cfg;
  const char *const *env = ENV("OPFORGE_LISTEN", "0.0.0.0:9000", "OPFORGE_DATA", "/srv/data",
                               "OPFORGE_GPUS", "1,3", "OPFORGE_MAX_BODY", "2048",
                               "OPFORGE_MAX_URL", "4096", "OPFORGE_WORKERS_PER_GPU", "2",
                               "OPFORGE_THREADS", "4");
  load_ok(NULL, env, &cfg);
  assert_string_equal(cfg.listen_host, "0.0.0.0");
  assert_int_equal(cfg.listen_port, 9000);
  assert_string_equal(cfg.data_dir, "/srv/data");
  assert_int_equal(cfg.gpu_mode, GPUS_LIST);
  assert_int_equal(cfg.n_gpu_list, 2);
  assert_int_equal(cfg.gpu_list[0], 1);
  assert_int_equal(cfg.gpu_list[1], 3);
  assert_int_equal(cfg.max_body_bytes, 2048);
  assert_int_equal(cfg.max_url_bytes, 4096);
  assert_int_equal(cfg.workers_per_gpu, 2);
  assert_int_equal(cfg.threads, 4);

  /* Options win over variables; untouched variables still apply. */
  load_ok(ARGV("--listen", "127.0.0.1:1234", "--gpus", "none", "--max-body=4096"), env, &cfg);
  assert_string_equal(cfg.listen_host, "127.0.0.1");
  assert_int_equal(cfg.listen_port, 1234);
  assert_int_equal(cfg.gpu_mode, GPUS_NONE);
  assert_int_equal(cfg.max_body_bytes, 4096);
  assert_string_equal(cfg.data_dir, "/srv/data");
  assert_int_equal(cfg.max_url_bytes, 4096);
}

static void test_env_bad_names_option_and_variable(void **state) {
  (void)state;
  char err[512];
  load_fails(NULL, ENV("OPFORGE_MAX_BODY", "12"), err, sizeof err);
  assert_contains(err, "--max-body");
  assert_contains(err, "OPFORGE_MAX_BODY");
  load_fails(NULL, ENV("OPFORGE_LISTEN", "nohost"), err, sizeof err);
  assert_contains(err, "--listen");
  assert_contains(err, "OPFORGE_LISTEN");
  /* A bad variable fails even when an option would override it. */
  load_fails(ARGV("--gpus", "all"), ENV("OPFORGE_GPUS", "0,,1"), err, sizeof err);
  assert_contains(err, "OPFORGE_GPUS");
}

/* Writes text to a new temporary file; returns its path in path (caller unlinks). */
static void write_temp(char *path, size_t len, const char *text) {
  snprintf(path, len, "/tmp/opforge-test-config-XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  assert_non_null(f);
  fputs(text, f);
  assert_int_equal(fclose(f), 0);
}

#define TOKEN_A "tokenAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define TOKEN_B "tokenBBBBBBBBBBBBBBBB"

static void test_token_file(void **state) {
  (void)state;
  char path[64];
  write_temp(path, sizeof path,
             "# opforge tokens\n\n" TOKEN_A "\n#" "commentedOutToken123456\n\r\n" TOKEN_B
             "\r\n\n");
  struct opforge_config cfg;
  load_ok(ARGV("--token-file", path), no_env, &cfg);
  assert_string_equal(cfg.token_file, path);
  assert_int_equal(cfg.n_tokens, 2);
  assert_string_equal(cfg.tokens[0], TOKEN_A);
  assert_string_equal(cfg.tokens[1], TOKEN_B);

  /* Through the variable as well, with no final newline. */
  unlink(path);
  write_temp(path, sizeof path, TOKEN_B);
  load_ok(NULL, ENV("OPFORGE_TOKEN_FILE", path), &cfg);
  assert_int_equal(cfg.n_tokens, 1);
  assert_string_equal(cfg.tokens[0], TOKEN_B);
  unlink(path);
}

static void test_token_lengths(void **state) {
  (void)state;
  char path[64], text[512];
  char t127[128], t128[129];
  memset(t127, 'k', 127);
  t127[127] = '\0';
  memset(t128, 'q', 128);
  t128[128] = '\0';
  snprintf(text, sizeof text, "0123456789abcdef\n%s\n", t127);
  write_temp(path, sizeof path, text);
  struct opforge_config cfg;
  load_ok(ARGV("--token-file", path), no_env, &cfg);
  assert_int_equal(cfg.n_tokens, 2);
  assert_string_equal(cfg.tokens[0], "0123456789abcdef");
  assert_string_equal(cfg.tokens[1], t127);
  unlink(path);

  char err[512];
  write_temp(path, sizeof path, t128);
  load_fails(ARGV("--token-file", path), no_env, err, sizeof err);
  assert_contains(err, "--token-file");
  assert_null(strstr(err, "qqqqqqqqqqqqqqqq"));
  unlink(path);
}

static void test_token_file_bad(void **state) {
  (void)state;
  char path[64], err[512];
  /* 15 characters: one short of the minimum. */
  write_temp(path, sizeof path, TOKEN_A "\nshortSecret1234\n");
  load_fails(ARGV("--token-file", path), no_env, err, sizeof err);
  assert_contains(err, "--token-file");
  assert_null(strstr(err, "shortSecret1234"));
  assert_null(strstr(err, TOKEN_A));
  unlink(path);

  /* Only comments and blank lines. */
  write_temp(path, sizeof path, "# nothing here\n\n");
  load_fails(ARGV("--token-file", path), no_env, err, sizeof err);
  assert_contains(err, "--token-file");
  unlink(path);

  /* More tokens than CONFIG_MAX_TOKENS. */
  char text[2048] = "";
  size_t used = 0;
  for (int i = 0; i <= CONFIG_MAX_TOKENS; i++)
    used += (size_t)snprintf(text + used, sizeof text - used, "manyTokens%08d\n", i);
  write_temp(path, sizeof path, text);
  load_fails(ARGV("--token-file", path), no_env, err, sizeof err);
  assert_contains(err, "--token-file");
  assert_null(strstr(err, "manyTokens"));
  unlink(path);

  /* A missing file. */
  load_fails(ARGV("--token-file", "/nonexistent/opforge/tokens"), no_env, err, sizeof err);
  assert_contains(err, "--token-file");
  assert_null(strstr(err, TOKEN_A));
}


/* --cors-origin and --allow-host repeat; their variables hold lists; options replace
 * the variable's list; entries are lower-cased and checked. */
static void test_repeatable_lists(void **state) {
  (void)state;
  struct opforge_config cfg;
  load_ok(ARGV("--cors-origin", "https://App.example:8443", "--cors-origin=http://localhost",
               "--allow-host", "OpForge.internal", "--header-deadline", "3"),
          no_env, &cfg);
  assert_int_equal(cfg.n_cors_origins, 2);
  assert_string_equal(cfg.cors_origins[0], "https://app.example:8443");
  assert_string_equal(cfg.cors_origins[1], "http://localhost");
  assert_int_equal(cfg.n_allow_hosts, 1);
  assert_string_equal(cfg.allow_hosts[0], "opforge.internal");
  assert_int_equal(cfg.header_deadline_s, 3);

  load_ok(NULL, ENV("OPFORGE_CORS_ORIGIN", "http://a.example, http://b.example:81",
                    "OPFORGE_ALLOW_HOST", "x.example y.example"), &cfg);
  assert_int_equal(cfg.n_cors_origins, 2);
  assert_string_equal(cfg.cors_origins[1], "http://b.example:81");
  assert_int_equal(cfg.n_allow_hosts, 2);
  load_ok(ARGV("--cors-origin", "http://c.example"),
          ENV("OPFORGE_CORS_ORIGIN", "http://a.example http://b.example"), &cfg);
  assert_int_equal(cfg.n_cors_origins, 1);
  assert_string_equal(cfg.cors_origins[0], "http://c.example");

  char err[512];
  static const char *const bad_origins[] = {"example.com", "ftp://x", "http://", "http://x/",
                                            "http://x:0", "http://x:70000", "http://a b",
                                            "*", "null"};
  for (size_t i = 0; i < sizeof bad_origins / sizeof bad_origins[0]; i++) {
    load_fails(ARGV("--cors-origin", bad_origins[i]), no_env, err, sizeof err);
    assert_contains(err, "--cors-origin");
  }
  static const char *const bad_hosts[] = {"x.example:80", "http://x", "a/b", ""};
  for (size_t i = 0; i < sizeof bad_hosts / sizeof bad_hosts[0]; i++) {
    load_fails(ARGV("--allow-host", bad_hosts[i]), no_env, err, sizeof err);
    assert_contains(err, "--allow-host");
  }
  load_fails(ARGV("--header-deadline", "0"), no_env, err, sizeof err);
  assert_contains(err, "--header-deadline");
  const char *many[2 * CONFIG_MAX_NAMES + 3];
  size_t k = 0;
  for (int i = 0; i <= CONFIG_MAX_NAMES; i++) {
    many[k++] = "--allow-host";
    many[k++] = "h.example";
  }
  many[k] = NULL;
  load_fails(many, no_env, err, sizeof err);
  assert_contains(err, "at most 16");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_defaults),
    cmocka_unit_test(test_listen_forms),
    cmocka_unit_test(test_listen_bad),
    cmocka_unit_test(test_equals_form),
    cmocka_unit_test(test_gpus),
    cmocka_unit_test(test_gpus_trailing_comma),
    cmocka_unit_test(test_bad_values_name_option),
    cmocka_unit_test(test_bounds_accepted),
    cmocka_unit_test(test_env_and_override),
    cmocka_unit_test(test_env_bad_names_option_and_variable),
    cmocka_unit_test(test_token_file),
    cmocka_unit_test(test_token_lengths),
    cmocka_unit_test(test_token_file_bad),
    cmocka_unit_test(test_repeatable_lists),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
