/* The submission options `opforge submit` and `opforge tune` share: every field of a
 * submission (openapi/openapi.yaml, Submission) from the command line, the body built
 * from them, and the way a refused submission is printed. Values are parsed for their
 * type only; ranges and names are the server's to check, so its message is the one the
 * user sees. */
#ifndef OPFORGE_CLI_SUBMIT_OPTIONS_H
#define OPFORGE_CLI_SUBMIT_OPTIONS_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

/* getopt_long codes of the shared options; a command's own codes stay below 0x200. */
enum submit_option_code {
  SUBOPT_POLICY = 0x200,
  SUBOPT_PROPOSER,
  SUBOPT_STEPS,
  SUBOPT_SECONDS,
  SUBOPT_PRECISION,
  SUBOPT_TRIALS,
  SUBOPT_SEED,
  SUBOPT_MEMORY,
  SUBOPT_SEARCH,
  SUBOPT_SEARCH_FILE,
  SUBOPT_LLM_USD,
  SUBOPT_LLM_TOKENS,
  SUBOPT_LLM_MODEL,
  SUBOPT_LLM_TEMPERATURE,
  SUBOPT_LLM_MAX_TOKENS,
  SUBOPT_ATOL,
  SUBOPT_RTOL,
  SUBOPT_STOP_AT_FLOOR,
};

/* The struct option entries of the shared options, to put in a command's table. */
#define SUBMIT_OPTION_ENTRIES                                                   \
  {"policy", required_argument, NULL, SUBOPT_POLICY},                           \
  {"proposer", required_argument, NULL, SUBOPT_PROPOSER},                       \
  {"steps", required_argument, NULL, SUBOPT_STEPS},                             \
  {"seconds", required_argument, NULL, SUBOPT_SECONDS},                         \
  {"precision", required_argument, NULL, SUBOPT_PRECISION},                     \
  {"trials", required_argument, NULL, SUBOPT_TRIALS},                           \
  {"seed", required_argument, NULL, SUBOPT_SEED},                               \
  {"memory", required_argument, NULL, SUBOPT_MEMORY},                           \
  {"search", required_argument, NULL, SUBOPT_SEARCH},                           \
  {"search-file", required_argument, NULL, SUBOPT_SEARCH_FILE},                 \
  {"llm-usd", required_argument, NULL, SUBOPT_LLM_USD},                         \
  {"llm-tokens", required_argument, NULL, SUBOPT_LLM_TOKENS},                   \
  {"llm-model", required_argument, NULL, SUBOPT_LLM_MODEL},                     \
  {"llm-temperature", required_argument, NULL, SUBOPT_LLM_TEMPERATURE},         \
  {"llm-max-tokens", required_argument, NULL, SUBOPT_LLM_MAX_TOKENS},           \
  {"atol", required_argument, NULL, SUBOPT_ATOL},                               \
  {"rtol", required_argument, NULL, SUBOPT_RTOL},                               \
  {"stop-at-floor", required_argument, NULL, SUBOPT_STOP_AT_FLOOR}

/* The fields given so far: a JSON object in the submission's shape, without name and
 * reference. Zero-initialized is "nothing given"; release it with submit_options_clear. */
struct submit_options {
  json_t *fields;       /* owned; NULL until the first option */
  json_t *search_file;  /* owned: the --search-file object, applied under --search */
};

/* Stores the shared option code (its value arg, a pointer into argv) in o. Returns 0, 1
 * when code is not a shared option (the command's own), or -1 after printing
 * `error: <option> expects ...` for a value of the wrong type or `error: ...` for a
 * --search-file that cannot be read. */
int submit_options_apply(struct submit_options *o, int code, const char *arg);

/* Parses value as a finite number for option opt. On anything else prints
 * `error: <opt> expects a number, got '<value>'` and returns -1; *ret is set only on
 * success. */
int submit_parse_number(const char *opt, const char *value, double *ret);

/* Prints the help lines of the shared options. */
void submit_options_usage(FILE *out);

/* The submission: the shared fields, "reference" (taken over) and "name" (copied). Later
 * --search K=V win over --search-file's keys. Returns a new reference the caller
 * releases, or NULL after printing why (out of memory). */
json_t *submit_options_body(const struct submit_options *o, json_t *reference,
                            const char *name);

/* Releases what o holds; o is then empty again. */
void submit_options_clear(struct submit_options *o);

/* Prints a refused submission from the server's error reply (borrowed, may be NULL):
 * `error: <code>: <message> (field <field>)`, without the parenthesis when the reply
 * names no field; a reply without the error shape as cli_print_server_error does. */
void submit_print_refusal(long status, const json_t *reply);

#endif
