/* `opforge profile`: profiles a KernelBench program in one evaluator process. */
#ifndef OPFORGE_CLI_PROFILE_H
#define OPFORGE_CLI_PROFILE_H

/* `opforge profile FILE.py [--device cpu|meta|N] [--python PATH] [--evaluator PATH]
 * [--lib PATH] [--seed N] [--precision P] [--timeout S]`: argv[0] is "profile". Starts
 * one evaluator through the supervisor, runs load_task and profile, and prints the
 * profile as indented JSON on stdout. Returns the exit status: 0 printed; 1 the evaluator
 * could not start or a stage failed (`error: <stage>/<class>: <message>` and the
 * traceback on stderr); 2 bad usage or an unreadable file. */
int cli_profile_main(int argc, char **argv);

#endif
