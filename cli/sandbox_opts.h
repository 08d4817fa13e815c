/* The sandbox's options on the command lines of `opforge profile` and `propose`, which run
 * the evaluator locally: the same names and variables as `opforge serve` (gpu/sandbox.h). */
#ifndef OPFORGE_CLI_SANDBOX_OPTS_H
#define OPFORGE_CLI_SANDBOX_OPTS_H

#include <getopt.h>
#include <stdio.h>

#include "gpu/sandbox.h"

/* getopt_long codes of the sandbox options: CLI_OPT_SANDBOX + their index below. */
#define CLI_OPT_SANDBOX 3000
#define CLI_SANDBOX_LONG_OPTS                                                   \
  {"sandbox", required_argument, NULL, CLI_OPT_SANDBOX + 0},                    \
  {"evaluator-user", required_argument, NULL, CLI_OPT_SANDBOX + 1},             \
  {"sandbox-scratch-mb", required_argument, NULL, CLI_OPT_SANDBOX + 2},         \
  {"evaluator-max-procs", required_argument, NULL, CLI_OPT_SANDBOX + 3},        \
  {"evaluator-max-files", required_argument, NULL, CLI_OPT_SANDBOX + 4},        \
  {"sandbox-bind", required_argument, NULL, CLI_OPT_SANDBOX + 5},               \
  {"sandbox-env", required_argument, NULL, CLI_OPT_SANDBOX + 6}
#define CLI_SANDBOX_OPT_COUNT 7

/* Fills s with the defaults and then the OPFORGE_SANDBOX* variables. Returns 0, or -1
 * after printing `error: <why> (from <VARIABLE>)`. */
int cli_sandbox_settings(struct sandbox_settings *s);

/* True when code is one of the sandbox options' codes. */
int cli_sandbox_is_option(int code);

/* Applies the sandbox option of code with arg to s (its first use of a repeatable option
 * replaces what the variable gave). Returns 0, or -1 after printing `error: <why>`. */
int cli_sandbox_apply(struct sandbox_settings *s, int code, const char *arg);

/* Prints the options' lines for a usage text. */
void cli_sandbox_usage(FILE *out);

/* Prepares the sandbox of a local evaluator (python NULL for a program), masking the
 * client's token file and LLM key file. Returns 0 and *ret_sb (caller frees), or -1
 * after printing `error: <why>`. */
int cli_sandbox_prepare(const struct sandbox_settings *s, const char *python,
                        const char *evaluator, const char *lib, struct sandbox **ret_sb);

#endif
