/* Entry points of the client subcommands of the opforge binary. */
#ifndef OPFORGE_CLI_H
#define OPFORGE_CLI_H

/* `opforge submit FILE.py [options]`: argv[0] is "submit". Returns the exit status:
 * 0 submitted (or, with --wait, the task succeeded), 1 refused, unreachable, or the
 * task failed or was cancelled, 2 bad usage or an unusable file. (`opforge tune`,
 * cli/tune.h, tells these apart for CI jobs.) */
int cli_submit_main(int argc, char **argv);

/* `opforge status [ID] [options]`: argv[0] is "status". Returns the exit status: 0
 * printed, 1 refused or unreachable, 2 bad usage. */
int cli_status_main(int argc, char **argv);

#endif
