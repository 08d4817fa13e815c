/* What the subcommands share before they reach a server: the option loop, the FILE.py
 * operand, reading a program, and filling a JSON body. */
#ifndef OPFORGE_CLI_ARGS_H
#define OPFORGE_CLI_ARGS_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/* The server's limit on a task's reference source (256 KiB). */
#define CLI_REFERENCE_MAX 262144u

/* One subcommand's options, as cli_parse_options walks them. Static tables: nothing here
 * is copied or freed. */
struct cli_options {
  const char *shortopts;         /* starts with ':' so that a missing value is told apart */
  const struct option *longopts; /* ended by a zero entry */
  int help;                      /* the code getopt_long returns for --help */
  void (*usage)(FILE *out);      /* prints the help text */
  /* Stores one option (code as getopt_long returned it; arg NULL when it takes none) in
   * opts. Returns 0, or -1 after printing why. */
  int (*apply)(void *opts, int code, const char *arg);
};

/* Runs getopt_long over argv (argv[0] is the subcommand), handing each option to
 * spec->apply with opts. --help prints the usage on stdout; an option without its value
 * prints `error: OPT needs a value`; an unknown one prints `error: unknown option 'OPT'`
 * and the usage on stderr. Returns -1 to go on, with optind at the first operand
 * (getopt_long moves the operands to the end), else the exit status to return at once.
 * spec, opts and argv stay the caller's. */
int cli_parse_options(int argc, char **argv, const struct cli_options *spec, void *opts);

/* cli_parse_options for a command that takes exactly one FILE.py operand. Returns -1 to go
 * on and sets *ret_file (a pointer into argv); else prints `error: missing FILE.py` or
 * `error: expected one FILE.py` and the usage where the operand count is wrong, and
 * returns the exit status. */
int cli_parse_file_args(int argc, char **argv, const struct cli_options *spec, void *opts,
                        const char **ret_file);

/* Reads the program at path whole, as 1..max bytes of UTF-8 text (a pipe or a growing file
 * is cut off at max + 1 bytes and refused). limit_name, when not NULL, names the limit in
 * the message for a file that is too large (`..., the limit for <limit_name>`). Returns 0
 * and *ret_text (a JSON string: a new reference the caller releases), or -1 after printing
 * `error: <path> ...` on stderr. */
int cli_read_program(const char *path, size_t max, const char *limit_name, json_t **ret_text);

/* Sets obj[key] = value, taking value over (json_object_set_new: released even when it
 * cannot be stored). Returns 0, or -1 when value is NULL (a json_* constructor that ran
 * out of memory) or obj cannot take it; the results of a run of calls can be or-ed. */
int cli_json_put(json_t *obj, const char *key, json_t *value);

#endif
