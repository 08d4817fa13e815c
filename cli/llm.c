/* `opforge llm check`: one tiny request to the configured LLM endpoint, to check the
 * URL, the key, the model and the prices before a task spends steps on them. */
#include "cli/llm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/llm/client.h"
#include "proposers/llm/settings.h"

static void usage(FILE *out) {
  fprintf(out, "usage: opforge llm check [OPTIONS]\n"
               "Sends one small chat completion to the LLM endpoint that `opforge serve` would\n"
               "use and prints the model, the latency and the token counts (exit 0), or the\n"
               "error (exit 1).\n\noptions (and their variables):\n");
  llm_settings_usage(out);
}

/* Applies --name VALUE and --name=VALUE options over the variables' settings in *s. */
static int apply_options(struct llm_settings *s, int argc, char **argv, char *err, size_t n) {
  for (int i = 0; i < argc; i++) {
    const char *eq = strchr(argv[i], '=');
    size_t len = eq ? (size_t)(eq - argv[i]) : strlen(argv[i]);
    const struct llm_option *o = llm_option_find(argv[i], len);
    if (!o) {
      snprintf(err, n, "%.*s: unknown option", (int)len, argv[i]);
      return -1;
    }
    const char *value = eq ? eq + 1 : (i + 1 < argc ? argv[++i] : NULL);
    if (!value) {
      snprintf(err, n, "%s: missing value", o->name);
      return -1;
    }
    if (o->set(s, value, err, n) != 0)
      return -1;
  }
  return 0;
}

/* Sends the check request and prints the result. */
static int check(const struct llm_settings *s) {
  struct llm_client *client = NULL;
  if (llm_client_new(s, NULL, &client) != 0) {
    fprintf(stderr, "opforge llm check: cannot start the HTTP client\n");
    return 1;
  }
  struct llm_request req = {s->model, "You answer with one word.",
                            "Reply with the single word: ok", 0.0, 16};
  struct llm_reply reply;
  struct llm_error err;
  int rc = llm_chat(client, &req, &reply, &err);
  llm_client_free(client);
  if (rc != 0) {
    fprintf(stderr, "opforge llm check: %s: %s\n", err.cls, err.message);
    return 1;
  }
  double cost = (double)reply.prompt_tokens * s->price_in / 1e6 +
                (double)reply.completion_tokens * s->price_out / 1e6;
  size_t shown = strcspn(reply.content, "\r\n");
  printf("endpoint %s\nmodel %s\nlatency %.0f ms (%u attempt%s)\n"
         "tokens %lld prompt + %lld completion%s\ncost %.6f USD\nanswer %.*s\n",
         s->base_url, reply.model, reply.latency_ms, reply.attempts,
         reply.attempts == 1 ? "" : "s", reply.prompt_tokens, reply.completion_tokens,
         reply.usage_estimated ? " (estimated: the endpoint sent no usage)" : "", cost,
         (int)(shown < 80 ? shown : 80), reply.content);
  llm_reply_clear(&reply);
  return 0;
}

int cli_llm_main(int argc, char **argv) {
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  if (argc < 2 || strcmp(argv[1], "check") != 0) {
    usage(stderr);
    return 2;
  }
  if (argc >= 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  struct llm_settings *s = malloc(sizeof *s);
  char err[600];
  int code = 2;
  if (!s) {
    fprintf(stderr, "opforge llm check: out of memory\n");
    return 1;
  }
  if (llm_settings_from_env(getenv, s, err, sizeof err) != 0 ||
      apply_options(s, argc - 2, argv + 2, err, sizeof err) != 0 ||
      llm_settings_finish(s, getenv, err, sizeof err) != 0) {
    fprintf(stderr, "opforge llm check: %s\n", err);
  } else if (!s->base_url[0]) {
    fprintf(stderr, "opforge llm check: no endpoint: set --llm-base-url and --llm-model (or "
                    "OPFORGE_LLM_BASE_URL and OPFORGE_LLM_MODEL)\n");
  } else {
    code = check(s);
  }
  memset(s->key, 0, sizeof s->key);
  free(s);
  return code;
}
