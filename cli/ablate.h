/* `opforge ablate`: runs KernelBench programs under several ablation arms of the search,
 * each arm in a fresh memory namespace of its own, and reports them side by side. */
#ifndef OPFORGE_CLI_ABLATE_H
#define OPFORGE_CLI_ABLATE_H

/* `opforge ablate FILES... --steps N [--arms A,B,...] [options]`: argv[0] is "ablate".
 * Recreates the namespace PREFIX-ARM of every arm from the seed, submits every program
 * under every arm with the same seed (one task of an arm at a time, in file order, the
 * arms side by side), follows the tasks to their end, and prints the table and the
 * per-arm summary (cli/ablate_report.h). Returns 0 when the server accepted every
 * submission and answered throughout, 1 when it refused one or could not be reached, 2
 * on bad usage or an unusable file. */
int cli_ablate_main(int argc, char **argv);

#endif
