/* `opforge tune`'s command line: its options, its help text (with the exit statuses),
 * and the programs its PATH operands name. */
#ifndef OPFORGE_CLI_TUNE_ARGS_H
#define OPFORGE_CLI_TUNE_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "cli/submit_options.h"

#define TUNE_FILES_MAX 10000     /* programs one run takes */
#define TUNE_WAIT_LIMIT_MAX 2592000 /* 30 days */

/* What the command line asked for. Strings point into argv or the environment. */
struct tune_opts {
  const char *server, *token_file;
  const char *export_dir, *json_out, *junit_out;
  const char *run_id;          /* the CI run a key is scoped to; NULL: none */
  double fail_under;           /* NAN without --fail-under */
  long long wait_limit;        /* seconds, when has_wait_limit */
  bool has_wait_limit, events, no_idempotency, reuse;
  struct submit_options submission; /* owned: release with tune_opts_clear */
  char **inputs;               /* the PATH operands */
  size_t n_inputs;
};

/* The programs of the run: malloc'ed paths in run order. */
struct tune_files {
  char **paths;
  size_t n, cap;
};

/* Parses argv (argv[0] is "tune") into o, which the caller zero-initializes. Returns -1
 * to go on, else the exit status to return at once (0 after --help, 2 after printing a
 * usage error). */
int tune_parse_args(int argc, char **argv, struct tune_opts *o);

/* Turns the PATH operands into the programs: a file as given, a directory as its visible
 * regular *.py files in version order (2_x before 10_x). Two programs with one task name
 * (the file name without .py) are refused: their results and exports would collide.
 * Returns 0, or -1 after printing why. */
int tune_expand_inputs(const struct tune_opts *o, struct tune_files *ret_files);

/* Releases what o and files own (either may be NULL). */
void tune_opts_clear(struct tune_opts *o);
void tune_files_clear(struct tune_files *files);

#endif
