/* `opforge sandbox`: shows the evaluator's sandbox on this host, or runs a command in it. */
#ifndef OPFORGE_CLI_SANDBOX_CMD_H
#define OPFORGE_CLI_SANDBOX_CMD_H

/* `opforge sandbox check [options]` prints the sandbox an evaluator would get here as
 * JSON (exit 0), or why none can be made (exit 1). `opforge sandbox exec [options] --
 * COMMAND [ARGS...]` runs COMMAND in that sandbox (the evaluator's view, environment and
 * limits, with --sandbox-bind paths added read-only) and exits with its status (128 + N
 * when a signal N ended it). argv[0] is "sandbox". Usage errors exit 2. */
int cli_sandbox_main(int argc, char **argv);

#endif
