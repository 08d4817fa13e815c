/* `opforge tune`: KernelBench programs through a server, for people and for CI jobs. */
#ifndef OPFORGE_CLI_TUNE_H
#define OPFORGE_CLI_TUNE_H

/* `opforge tune PATH... [options]`: argv[0] is "tune". Submits every program, follows
 * the tasks together, prints a summary table and writes what --json, --junit and
 * --export ask for. Returns the exit status (cli/tune_args.c's help lists them): 0 every
 * task succeeded (and met --fail-under), 1 a task failed or is under it, 2 bad usage or a
 * submission refused as invalid, 3 the server could not be reached, 4 the token was
 * refused, 5 --wait-limit passed with tasks unfinished. */
int cli_tune_main(int argc, char **argv);

#endif
