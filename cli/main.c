/* The opforge executable: the server and the command-line client share one binary. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/ablate.h"
#include "cli/bench.h"
#include "cli/best.h"
#include "cli/cli.h"
#include "cli/llm.h"
#include "cli/memory.h"
#include "cli/profile.h"
#include "cli/propose.h"
#include "cli/sandbox_cmd.h"
#include "cli/skills.h"
#include "cli/store_cmd.h"
#include "cli/tune.h"
#include "cli/kernel.h"
#include "base/log.h"
#include "server/serve.h"

/* One subcommand: its name, its entry point (argv[0] is the subcommand) and its help. */
struct command {
  const char *name;
  int (*main)(int argc, char **argv);
  const char *help;
};

static const struct command commands[] = {
  {"serve", serve_main, "run the HTTP service (opforge serve --help)"},
  {"submit", cli_submit_main, "submit a KernelBench program (opforge submit --help)"},
  {"status", cli_status_main, "list tasks or show one (opforge status --help)"},
  {"tune", cli_tune_main, "tune programs for CI: follow, export, JUnit, thresholds (opforge tune --help)"},
  {"propose", cli_propose_main, "print the builtin proposer's candidate (opforge propose --help)"},
  {"profile", cli_profile_main, "profile a KernelBench program (opforge profile --help)"},
  {"bench", cli_bench_main, "benchmark KernelBench programs (opforge bench --help)"},
  {"ablate", cli_ablate_main, "run the search's ablation arms side by side (opforge ablate --help)"},
  {"best", cli_best_main, "fetch a task's best kernel as JSON or a KernelBench file (opforge best --help)"},
  {"memory", cli_memory_main, "export, import, reset or show the HTAM memory"},
  {"skills", cli_skills_main, "list, export or import the skill memory (opforge skills --help)"},
  {"kernel", cli_kernel_main, "compile a CUDA file with NVRTC (opforge kernel compile --help)"},
  {"llm", cli_llm_main, "check the LLM endpoint with one small request (opforge llm check --help)"},
  {"store", cli_store_main, "copy a SQLite store into PostgreSQL (opforge store copy --help)"},
  {"sandbox", cli_sandbox_main, "show the evaluator's sandbox or run a command in it (opforge sandbox --help)"},
  {NULL, NULL, NULL},
};

static void usage(FILE *out) {
  fprintf(out, "usage: opforge COMMAND [ARGS]\n\ncommands:\n");
  for (const struct command *c = commands; c->name; c++)
    fprintf(out, "  %-10s %s\n", c->name, c->help);
}

int main(int argc, char **argv) {
  const char *level = getenv("OPFORGE_LOG");
  if (level && strcmp(level, "debug") == 0)
    log_set_level(LOG_DEBUG);
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const struct command *c = commands; c->name; c++)
    if (strcmp(argv[1], c->name) == 0)
      return c->main(argc - 1, argv + 1);
  fprintf(stderr, "opforge: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
