/* `opforge profile`: profiles a KernelBench program in one evaluator process. */
#ifndef OPFORGE_CLI_PROFILE_H
#define OPFORGE_CLI_PROFILE_H

/* `opforge profile FILE.py [--device cpu|meta|N] [--python PATH] [--evaluator PATH]
 * [--lib PATH] [--seed N] [--precision P] [--timeout S] [--sandbox MODE ...]`: argv[0]
 * is "profile". Starts one evaluator through the supervisor, in the evaluator's sandbox
 * (gpu/sandbox.h) unless --sandbox none, runs load_task and profile, and prints the
 * profile as indented JSON on stdout. Returns the exit status: 0 printed; 1 the evaluator
 * could not start or a stage failed (`error: <stage>/<class>: <message>` and the
 * traceback on stderr); 2 bad usage or an unreadable file. */
int cli_profile_main(int argc, char **argv);

#include <jansson.h>

#include "gpu/sandbox.h"

/* What to profile and how; strings are borrowed. */
struct profile_opts {
  const char *file;
  const char *device;     /* NULL: GPU 0 when there is one, else cpu */
  const char *python;
  const char *evaluator;
  const char *lib;
  const char *precision;  /* "fp32" */
  long long seed;         /* 42 */
  long long timeout_s;    /* 0: the supervisor's deadlines */
  struct sandbox_settings sandbox; /* --sandbox and its kin (cli/sandbox_opts.h) */
};

/* Profiles o->file in one supervised evaluator. Returns 0 with *ret_profile (caller
 * owns), or the exit status after printing why (1 failed, 2 unreadable file). */
int cli_profile_run(const struct profile_opts *o, json_t **ret_profile);

#endif
