/* `opforge sandbox check|exec` (see cli/sandbox_cmd.h): the operator's way to see what a
 * submitted program would see on this host, and to run anything (a test suite, a probe)
 * under the same rules. */
#include "cli/sandbox_cmd.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/client.h"
#include "cli/sandbox_opts.h"
#include "gpu/sandbox.h"
#include "gpu/supervisor.h"

extern char **environ;

struct sandbox_cmd_opts {
  struct sandbox_settings sandbox;
  const char *python;
  const char *device;
};

enum { OPT_HELP = 1000, OPT_PYTHON, OPT_DEVICE };

static const struct option long_opts[] = {
  {"help", no_argument, NULL, OPT_HELP},
  {"python", required_argument, NULL, OPT_PYTHON},
  {"device", required_argument, NULL, OPT_DEVICE},
  CLI_SANDBOX_LONG_OPTS,
  {NULL, 0, NULL, 0},
};

static void usage(FILE *out) {
  fputs("usage: opforge sandbox check [options]\n"
        "       opforge sandbox exec [options] -- COMMAND [ARGS...]\n"
        "check prints the sandbox an evaluator gets on this host (or why none can be\n"
        "made); exec runs COMMAND in it, with the evaluator's view, environment and\n"
        "limits, and exits with its status.\n"
        "  --python PATH   the interpreter whose install is shown (default as for\n"
        "                  `opforge profile`)\n"
        "  --device D      cpu (default), meta or a GPU index: whose device nodes are shown\n",
        out);
  cli_sandbox_usage(out);
}

static int apply_opt(void *opts, int code, const char *arg) {
  struct sandbox_cmd_opts *o = opts;
  if (cli_sandbox_is_option(code))
    return cli_sandbox_apply(&o->sandbox, code, arg);
  switch (code) {
  case OPT_PYTHON: o->python = arg; return 0;
  case OPT_DEVICE: o->device = arg; return 0;
  default: return -1;
  }
}

static const struct cli_options sandbox_cmd_options = {
  .shortopts = "+:", .longopts = long_opts, .help = OPT_HELP, .usage = usage,
  .apply = apply_opt,
};

/* Runs argv in sb's view of device, on our stdin, stdout and stderr; its exit status. */
static int run_in(const struct sandbox *sb, const char *device, char **argv) {
  struct sandbox_view view;
  struct sandbox_launch *launch = NULL;
  char err[1024];
  char cwd[PATH_MAX];
  int viewed = sandbox_view(sb, device, &view, err, sizeof err);
  if (viewed == 0 && getcwd(cwd, sizeof cwd) && cwd[0] == '/')
    snprintf(view.workdir, sizeof view.workdir, "%s", cwd);  /* bwrap refuses it if unseen */
  if (viewed != 0 ||
      sandbox_launch_new(sb, &view, (const char *const *)argv, environ, &launch, err,
                         sizeof err) != 0) {
    fprintf(stderr, "error: %s\n", err);
    return CLI_EXIT_FAIL;
  }
  int fds[3] = {0, 1, 2};
  pid_t pid;
  int rc = sandbox_spawn(launch, fds, &pid, err, sizeof err);
  sandbox_launch_free(launch);
  if (rc != 0) {
    fprintf(stderr, "error: %s\n", err);
    return CLI_EXIT_FAIL;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int cli_sandbox_main(int argc, char **argv) {
  struct sandbox_cmd_opts o = {.device = "cpu"};
  if (argc < 2 || (strcmp(argv[1], "check") != 0 && strcmp(argv[1], "exec") != 0)) {
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
      usage(stdout);
      return CLI_EXIT_OK;
    }
    fprintf(stderr, "error: expected check or exec\n");
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  bool exec_mode = strcmp(argv[1], "exec") == 0;
  if (cli_sandbox_settings(&o.sandbox) != 0)
    return CLI_EXIT_USAGE;
  int rc = cli_parse_options(argc - 1, argv + 1, &sandbox_cmd_options, &o);
  if (rc >= 0)
    return rc;
  char **command = argv + 1 + optind;
  int n_command = argc - 1 - optind;
  if (exec_mode != (n_command > 0)) {
    fprintf(stderr, exec_mode ? "error: exec needs a COMMAND after --\n"
                              : "error: check takes no operands\n");
    return CLI_EXIT_USAGE;
  }
  if (o.sandbox.mode == SANDBOX_NONE) {
    fprintf(stderr, "error: --sandbox none: there is no sandbox to show or run in\n");
    return CLI_EXIT_USAGE;
  }
  char *python = o.python ? strdup(o.python) : supervisor_default_python();
  char *lib = supervisor_default_gpu_lib();
  struct sandbox *sb = NULL;
  rc = cli_sandbox_prepare(&o.sandbox, python, NULL, lib, &sb);
  free(python);
  free(lib);
  if (rc != 0)
    return CLI_EXIT_FAIL;
  if (exec_mode) {
    rc = run_in(sb, o.device, command);
  } else {
    json_t *d = sandbox_describe(sb);
    char *text = d ? json_dumps(d, JSON_INDENT(2)) : NULL;
    rc = text && printf("%s\n", text) > 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    free(text);
    json_decref(d);
  }
  sandbox_free(sb);
  return rc;
}
