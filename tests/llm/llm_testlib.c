/* Helpers of the LLM tests (see llm_testlib.h). */
#include "tests/llm/llm_testlib.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/api/harness.h"

void llm_write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
}

char *llm_read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  size_t cap = 4096, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while (buf && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len < 2) {
      char *grown = realloc(buf, cap * 2);
      if (!grown) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = grown;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf)
    buf[len] = '\0';
  return buf;
}

void scripted_llm_start(const char *script, struct scripted_llm *ret) {
  memset(ret, 0, sizeof *ret);
  const char *bin = getenv("OPFORGE_SCRIPTED_LLM");
  assert_non_null(bin);
  snprintf(ret->dir, sizeof ret->dir, "/tmp/opforge-llm-XXXXXX");
  assert_non_null(mkdtemp(ret->dir));
  char script_path[PATH_MAX + 32], err_log[PATH_MAX + 32];
  snprintf(script_path, sizeof script_path, "%s/script.json", ret->dir);
  snprintf(ret->log, sizeof ret->log, "%s/requests.jsonl", ret->dir);
  snprintf(err_log, sizeof err_log, "%s/stderr.log", ret->dir);
  llm_write_file(script_path, script);
  llm_write_file(ret->log, "");
  const char *argv[] = {bin, script_path, ret->log, NULL};
  assert_int_equal(harness_spawn(argv, NULL, err_log, &ret->pid, &ret->out_fd), 0);
  if (harness_wait_listening(ret->out_fd, 10000, ret->url, sizeof ret->url) != 0) {
    harness_dump_log(err_log, 4096);
    fail_msg("the scripted endpoint did not start");
  }
}

void scripted_llm_stop(struct scripted_llm *s) {
  if (s->pid > 0) {
    kill(s->pid, SIGTERM);
    if (harness_wait_exit(s->pid, 10000) == -1) {
      kill(s->pid, SIGKILL);
      waitpid(s->pid, NULL, 0);
    }
    s->pid = -1;
  }
  if (s->out_fd > 0)
    close(s->out_fd);
  s->out_fd = -1;
  if (s->dir[0])
    harness_remove_tree(s->dir);
  s->dir[0] = '\0';
}

json_t *scripted_llm_requests(const struct scripted_llm *s) {
  json_t *out = json_array();
  char *text = llm_read_file(s->log);
  assert_non_null(text);
  /* Only whole lines count: the endpoint may be writing the last one while it is read. */
  for (char *line = text; *line;) {
    char *end = strchr(line, '\n');
    if (!end)
      break;
    *end = '\0';
    if (*line) {
      json_t *doc = json_loads(line, 0, NULL);
      assert_non_null(doc);
      json_array_append_new(out, doc);
    }
    line = end + 1;
  }
  free(text);
  return out;
}

void scripted_llm_settings(const struct scripted_llm *s, struct llm_settings *ret) {
  char err[256];
  llm_settings_defaults(ret);
  char url[128];
  snprintf(url, sizeof url, "%s/v1", s->url);
  assert_int_equal(llm_option_find("--llm-base-url", 14)->set(ret, url, err, sizeof err), 0);
  snprintf(ret->model, sizeof ret->model, "scripted-model");
  ret->backoff_ms = 5;
  ret->max_backoff_ms = 20;
  ret->timeout_s = 5;
  ret->connect_timeout_s = 2;
}

json_t *llm_fixture(const char *name) {
  const char *root = getenv("OPFORGE_SOURCE_ROOT");
  assert_non_null(root);
  char path[PATH_MAX];
  snprintf(path, sizeof path, "%s/tests/llm/fixtures/%s", root, name);
  json_error_t jerr;
  json_t *doc = json_load_file(path, 0, &jerr);
  if (!doc)
    fail_msg("%s: %s", path, jerr.text);
  return doc;
}

static const char *str(json_t *doc, const char *key) {
  return json_string_value(json_object_get(doc, key));
}

void llm_request_of(json_t *doc, struct proposal_request *ret) {
  *ret = (struct proposal_request){
    .task_id = str(doc, "task_id"),
    .task_name = str(doc, "task_name"),
    .task_options = json_object_get(doc, "task_options"),
    .profile = json_object_get(doc, "profile"),
    .step = (int)json_integer_value(json_object_get(doc, "step")),
    .direction = str(doc, "direction"),
    .direction_node = json_object_get(doc, "direction_node"),
    .strategy = str(doc, "strategy"),
    .strategy_node = json_object_get(doc, "strategy_node"),
    .parent = json_object_get(doc, "parent"),
    .context = json_object_get(doc, "context"),
    .skills = json_object_get(doc, "skills"),
    .strategies = json_object_get(doc, "strategies"),
    .reference = str(doc, "reference"),
    .context_bytes = (size_t)json_integer_value(json_object_get(doc, "context_bytes")),
    .two_call = json_is_true(json_object_get(doc, "two_call")),
  };
}
