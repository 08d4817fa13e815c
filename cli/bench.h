/* `opforge bench`: runs a set of KernelBench programs through a server and reports. */
#ifndef OPFORGE_CLI_BENCH_H
#define OPFORGE_CLI_BENCH_H

/* `opforge bench FILES_OR_DIRS... --server URL --steps N --out FILE [options]`: argv[0] is
 * "bench". Submits each program, follows the tasks to their end (or to --wait-limit),
 * prints a table and a summary on stdout, and writes every figure to FILE as JSON.
 * Returns the exit status: 0 when the server accepted every submission bench sent and
 * answered throughout (failed tasks, and tasks left unfinished or unsubmitted by
 * --wait-limit, are results recorded in FILE, not errors); 1 when the server refused a
 * submission or could not be reached; 2 on bad usage or an unusable input or output
 * file. */
int cli_bench_main(int argc, char **argv);

#endif
