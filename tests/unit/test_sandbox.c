/* Unit tests of the evaluator's sandbox (gpu/sandbox/): the environment allowlist and its
 * secret rule, the options, and the bwrap command a prepared sandbox builds (binds,
 * masks, limits). The sandbox tried from the inside is tests/sandbox/test_sandbox.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpu/sandbox.h"
#include "gpu/sandbox/internal.h"

/* ---- environment ---- */

static void test_secret_names(void **state) {
  (void)state;
  const char *secret[] = {"OPFORGE_LLM_API_KEY", "OPFORGE_TOKEN_FILE", "OPFORGE_LOG",
                          "MY_API_KEY", "github_token", "AWS_SECRET_ACCESS_KEY",
                          "PGPASSWORD", "GOOGLE_APPLICATION_CREDENTIALS", "HTTP_AUTH",
                          "TORCH_HUB_TOKEN"};
  const char *plain[] = {"PATH", "CUDA_VISIBLE_DEVICES", "LANG", "PYTHONPATH", "OPFORGE",
                         "TORCHINDUCTOR_CACHE_DIR"};
  for (size_t i = 0; i < sizeof secret / sizeof secret[0]; i++)
    assert_true(sandbox_env_is_secret(secret[i], strlen(secret[i])));
  for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
    assert_false(sandbox_env_is_secret(plain[i], strlen(plain[i])));
}

/* The joined NAME=VALUE lines of a NULL-terminated list, for one comparison. */
static char *joined(char **list) {
  size_t len = 1;
  for (char **p = list; *p; p++)
    len += strlen(*p) + 1;
  char *out = calloc(1, len);
  for (char **p = list; *p; p++) {
    strcat(out, *p);
    strcat(out, "\n");
  }
  return out;
}

static void test_environment_is_an_allowlist(void **state) {
  (void)state;
  struct sandbox_settings s;
  sandbox_settings_defaults(&s);
  snprintf(s.env[s.n_env++], sizeof s.env[0], "SCRIPTED_EVAL_*");
  char *env[] = {"PATH=/usr/bin:/bin", "HOME=/root", "OPFORGE_LLM_API_KEY=sk-1",
                 "TORCH_HUB_TOKEN=t", "TORCHINDUCTOR_CACHE_DIR=/x", "LC_ALL=C.UTF-8",
                 "FOO=bar", "CUDA_VISIBLE_DEVICES=2,3", "SCRIPTED_EVAL_DELAY_MS=5",
                 "SCRIPTED_EVAL_TOKEN=9", "TMPDIR=/var/tmp", "USER=root", "NOEQUALS", NULL};
  char **out = sandbox_environment(&s, env, "nobody", NULL);
  assert_non_null(out);
  char *text = joined(out);
  assert_string_equal(text, "PATH=/usr/bin:/bin\n"
                            "TORCHINDUCTOR_CACHE_DIR=/x\n"
                            "LC_ALL=C.UTF-8\n"
                            "SCRIPTED_EVAL_DELAY_MS=5\n"
                            "HOME=/tmp/home\n"
                            "TMPDIR=/tmp\n"
                            "PYTHONDONTWRITEBYTECODE=1\n"
                            "PYTHONNOUSERSITE=1\n"
                            "USER=nobody\n"
                            "LOGNAME=nobody\n"
                            "CUDA_VISIBLE_DEVICES=2,3\n");
  free(text);
  strv_free_array(out);
  /* Its own GPU only: CUDA names it by UUID, whatever the server's list said. */
  out = sandbox_environment(&s, env, "nobody", "GPU-0123");
  text = joined(out);
  assert_non_null(strstr(text, "\nCUDA_VISIBLE_DEVICES=GPU-0123\n"));
  assert_null(strstr(text, "2,3"));
  free(text);
  strv_free_array(out);
}

/* ---- options ---- */

/* Sets option name to value on s; returns its result and leaves the message in err. */
static int set(struct sandbox_settings *s, const char *name, const char *value, char *err) {
  const struct sandbox_option *o = sandbox_option_find(name, strlen(name));
  assert_non_null(o);
  err[0] = '\0';
  return o->set(s, value, err, 512);
}

static void test_options(void **state) {
  (void)state;
  struct sandbox_settings s;
  char err[512];
  sandbox_settings_defaults(&s);
  assert_int_equal(s.mode, SANDBOX_AUTO);
  assert_int_equal(s.scratch_mb, 4096);
  assert_int_equal(s.max_procs, 4096);
  assert_int_equal(s.max_files, 4096);
  assert_int_equal(set(&s, "--sandbox", "none", err), 0);
  assert_int_equal(s.mode, SANDBOX_NONE);
  assert_int_equal(set(&s, "--sandbox", "docker", err), -1);
  assert_string_equal(err, "--sandbox: expected auto, bwrap or none, got 'docker'");
  assert_int_equal(set(&s, "--evaluator-max-procs", "10", err), -1);
  assert_string_equal(err, "--evaluator-max-procs: expected an integer in [64, 1048576], "
                           "got '10'");
  assert_int_equal(set(&s, "--sandbox-scratch-mb", "512", err), 0);
  assert_int_equal(s.scratch_mb, 512);
  assert_int_equal(set(&s, "--sandbox-bind", "relative/path", err), -1);
  assert_int_equal(set(&s, "--sandbox-bind", "/", err), -1);
  assert_int_equal(set(&s, "--sandbox-bind", "/opt/a:/opt/b", err), 0);
  assert_int_equal(s.n_binds, 2);
  assert_string_equal(s.binds[1], "/opt/b");
  assert_int_equal(set(&s, "--sandbox-env", "OPFORGE_GPU_LIB", err), -1);
  assert_non_null(strstr(err, "names a secret"));
  assert_int_equal(set(&s, "--sandbox-env", "HF_*,2BAD", err), -1);
  assert_string_equal(err, "--sandbox-env: expected a variable name or PREFIX*, got '2BAD'");
  assert_int_equal(set(&s, "--evaluator-user", "a b", err), -1);
  assert_int_equal(set(&s, "--evaluator-user", "1000:1000", err), 0);
  assert_string_equal(s.user, "1000:1000");
}

/* ---- the prepared sandbox ---- */

static void test_mode_none_enforces_nothing(void **state) {
  (void)state;
  struct sandbox_settings s;
  sandbox_settings_defaults(&s);
  s.mode = SANDBOX_NONE;
  struct sandbox_paths p = {.evaluator = "/bin/true"};
  struct sandbox *sb = NULL;
  char err[512];
  assert_int_equal(sandbox_prepare(&s, &p, &sb, err, sizeof err), 0);
  assert_false(sandbox_enforced(sb));
  assert_string_equal(sandbox_lock_dir(sb), "");
  json_t *d = sandbox_describe(sb);
  char *text = json_dumps(d, JSON_SORT_KEYS | JSON_COMPACT);
  assert_string_equal(text, "{\"mode\":\"none\",\"network\":true,\"user\":null}");
  free(text);
  json_decref(d);
  sandbox_free(sb);
}

/* The index of the first argument equal to want at or after from, or -1. */
static int find_arg(char **argv, int from, const char *want) {
  for (int i = from; argv[i]; i++)
    if (strcmp(argv[i], want) == 0)
      return i;
  return -1;
}

/* True when argv holds the consecutive triple a b c. */
static bool has_triple(char **argv, const char *a, const char *b, const char *c) {
  for (int i = 0; argv[i] && argv[i + 1] && argv[i + 2]; i++)
    if (!strcmp(argv[i], a) && !strcmp(argv[i + 1], b) && !strcmp(argv[i + 2], c))
      return true;
  return false;
}

static void test_command_binds_masks_and_limits(void **state) {
  (void)state;
  if (access("/usr/bin/bwrap", X_OK) != 0) {
    print_message("skipped: bubblewrap is not installed (scripts/test installs it)\n");
    skip();
  }
  char dir[] = "/tmp/opforge-sandbox-unit-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char secret[PATH_MAX], data[PATH_MAX], program[PATH_MAX];
  snprintf(secret, sizeof secret, "%s/tokens", dir);
  snprintf(data, sizeof data, "%s/data", dir);
  snprintf(program, sizeof program, "%s/evaluator", dir);
  FILE *f = fopen(secret, "w");
  fputs("tok\n", f);
  fclose(f);
  assert_int_equal(mkdir(data, 0700), 0);
  f = fopen(program, "w");
  fputs("#!/bin/sh\n", f);
  fclose(f);
  chmod(program, 0755);

  struct sandbox_settings s;
  sandbox_settings_defaults(&s);
  s.scratch_mb = 256;
  s.max_procs = 300;
  s.max_files = 1000;
  snprintf(s.binds[s.n_binds++], sizeof s.binds[0], "%s", dir);
  const char *hidden[] = {secret, data, NULL};
  struct sandbox_paths p = {.evaluator = program, .hidden = hidden};
  struct sandbox *sb = NULL;
  char err[1024];
  assert_int_equal(sandbox_prepare(&s, &p, &sb, err, sizeof err), 0);
  assert_true(sandbox_enforced(sb));
  struct sandbox_view view;
  assert_int_equal(sandbox_view(sb, "cpu", &view, err, sizeof err), 0);
  assert_string_equal(view.device, "cpu");
  assert_int_equal(view.n_nodes, 0);
  assert_string_equal(view.lock_file, "");
  const char *inner[] = {program, "--device", "cpu", NULL};
  struct sandbox_launch *l = NULL;
  char *env[] = {"PATH=/bin", "OPFORGE_LLM_API_KEY=sk", NULL};
  assert_int_equal(sandbox_launch_new(sb, &view, inner, env, &l, err, sizeof err), 0);

  /* The folder is bound read-only, then its secret file and data folder are masked. */
  int bind = find_arg(l->argv, 0, dir);
  assert_true(bind > 0);
  assert_string_equal(l->argv[bind - 1], "--ro-bind");
  assert_true(has_triple(l->argv, "--ro-bind", "/dev/null", secret));
  int mask = find_arg(l->argv, 0, data);
  assert_true(mask > bind);
  assert_string_equal(l->argv[mask - 1], "--tmpfs");
  assert_true(has_triple(l->argv, "--size", "268435456", "--tmpfs"));
  assert_int_equal(find_arg(l->argv, 0, "--share-net"), -1);
  assert_true(find_arg(l->argv, 0, "--unshare-net") > 0);
  assert_true(find_arg(l->argv, 0, "--unshare-pid") > 0);
  assert_true(find_arg(l->argv, 0, "--die-with-parent") > 0);
  assert_true(find_arg(l->argv, 0, "--new-session") > 0);
  /* The evaluator's own command line comes last, unchanged. */
  int dash = find_arg(l->argv, 0, "--");
  int last = dash;
  while (last >= 0 && find_arg(l->argv, last + 1, "--") >= 0)
    last = find_arg(l->argv, last + 1, "--");
  assert_string_equal(l->argv[last + 1], program);
  assert_string_equal(l->argv[last + 2], "--device");
  assert_null(l->argv[last + 4]);
  if (geteuid() == 0) {  /* root: setpriv switches to nobody inside */
    assert_string_equal(l->argv[dash + 1], "/usr/bin/setpriv");
    assert_string_equal(l->argv[dash + 2], "--reuid=65534");
  }
  assert_int_equal(l->n_limits, 4);
  assert_int_equal(l->limits[0].resource, RLIMIT_NPROC);
  assert_int_equal(l->limits[0].value, 300);
  assert_int_equal(l->limits[1].value, 1000);
  assert_int_equal(l->limits[2].resource, RLIMIT_FSIZE);
  assert_int_equal(l->limits[2].value, 256u << 20);
  char *text = joined(l->envp);
  assert_null(strstr(text, "OPFORGE"));
  free(text);
  sandbox_launch_free(l);
  sandbox_free(sb);
  unlink(secret);
  unlink(program);
  rmdir(data);
  rmdir(dir);
}

static void test_path_rules(void **state) {
  (void)state;
  assert_true(sandbox_path_under("/usr/lib/x", "/usr"));
  assert_true(sandbox_path_under("/usr", "/usr"));
  assert_false(sandbox_path_under("/usrx", "/usr"));
  assert_true(sandbox_path_under("/anything", "/"));
  assert_int_equal(sandbox_signal_of_status(139), 11);
  assert_int_equal(sandbox_signal_of_status(137), 9);
  assert_int_equal(sandbox_signal_of_status(2), 0);
  assert_int_equal(sandbox_signal_of_status(128), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_secret_names),
      cmocka_unit_test(test_environment_is_an_allowlist),
      cmocka_unit_test(test_options),
      cmocka_unit_test(test_mode_none_enforces_nothing),
      cmocka_unit_test(test_command_binds_masks_and_limits),
      cmocka_unit_test(test_path_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
