/* The sandbox's options for the commands that run the evaluator locally (see
 * cli/sandbox_opts.h). */
#include "cli/sandbox_opts.h"

#include <stdlib.h>
#include <string.h>

/* The option names in the order of CLI_SANDBOX_LONG_OPTS. */
static const char *const NAMES[CLI_SANDBOX_OPT_COUNT] = {
    "--sandbox", "--evaluator-user", "--sandbox-scratch-mb", "--evaluator-max-procs",
    "--evaluator-max-files", "--sandbox-bind", "--sandbox-env"};

/* Which repeatable options were used on this command line (so the first use clears). */
static int used[CLI_SANDBOX_OPT_COUNT];

int cli_sandbox_settings(struct sandbox_settings *s) {
  sandbox_settings_defaults(s);
  memset(used, 0, sizeof used);
  char err[512];
  for (const struct sandbox_option *o = sandbox_options; o->name; o++) {
    const char *v = getenv(o->env);
    if (v && o->set(s, v, err, sizeof err) != 0) {
      fprintf(stderr, "error: %s (from %s)\n", err, o->env);
      return -1;
    }
  }
  return 0;
}

int cli_sandbox_is_option(int code) {
  return code >= CLI_OPT_SANDBOX && code < CLI_OPT_SANDBOX + CLI_SANDBOX_OPT_COUNT;
}

int cli_sandbox_apply(struct sandbox_settings *s, int code, const char *arg) {
  int i = code - CLI_OPT_SANDBOX;
  const struct sandbox_option *o = sandbox_option_find(NAMES[i], strlen(NAMES[i]));
  char err[512];
  if (!o)
    return -1;
  if (o->clear && !used[i]++)
    o->clear(s);
  if (o->set(s, arg, err, sizeof err) == 0)
    return 0;
  fprintf(stderr, "error: %s\n", err);
  return -1;
}

void cli_sandbox_usage(FILE *out) {
  fputs("sandbox (the evaluator imports the program there; see `opforge serve --help`):\n",
        out);
  for (const struct sandbox_option *o = sandbox_options; o->name; o++)
    fprintf(out, "  %-22s %s\n", o->name, o->env);
}

int cli_sandbox_prepare(const struct sandbox_settings *s, const char *python,
                        const char *evaluator, const char *lib, struct sandbox **ret_sb) {
  const char *hidden[] = {getenv("OPFORGE_TOKEN_FILE"), getenv("OPFORGE_LLM_KEY_FILE"), NULL};
  if (!hidden[0]) {
    hidden[0] = hidden[1];
    hidden[1] = NULL;
  }
  struct sandbox_paths paths = {.python = python, .evaluator = evaluator, .gpu_lib = lib,
                                .hidden = hidden};
  char err[1024];
  if (sandbox_prepare(s, &paths, ret_sb, err, sizeof err) != 0) {
    fprintf(stderr, "error: %s\n", err);
    return -1;
  }
  if (!sandbox_enforced(*ret_sb))
    fprintf(stderr, "warning: --sandbox none: the program runs unsandboxed, as you and "
                    "with your environment\n");
  return 0;
}
