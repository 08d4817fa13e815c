/* Validation of a task submission (docs/architecture.md, "Formats") into normalized options. */
#ifndef OPFORGE_SUBMISSION_H
#define OPFORGE_SUBMISSION_H

#include <jansson.h>
#include <stddef.h>

#include "base/errors.h"

struct search_config;
struct store;

#define SUBMISSION_MAX_REFERENCE (256u * 1024u)

/* A validated submission. options is owned (json_decref via submission_clear);
 * reference is borrowed from the body it was parsed from. */
struct submission {
  char name[129];
  json_t *options;
  const char *reference;
  size_t reference_bytes;
};

/* Why a submission was refused: the API error, the JSON path of the field, a message. */
struct validation_error {
  enum api_error code;
  char field[64];
  char message[256];
};

/* Validates body (borrowed) and fills *ret with defaults applied. Returns 0, or -1 with
 * *err filled (ret untouched). */
int submission_parse(json_t *body, struct submission *ret, struct validation_error *err);

/* Completes a parsed submission with what needs the server: options.memory ("default"
 * when absent) must name an existing namespace (else 404 memory_namespace_not_found,
 * field "memory"), and options.search becomes the task's whole effective search
 * configuration: defaults (the server's, borrowed) with the submitted keys over them.
 * Returns 0, or -1 with *err filled (s keeps its options; clear it as usual). */
int submission_resolve(struct submission *s, struct store *store,
                       const struct search_config *defaults, struct validation_error *err);

/* Releases what a submission owns. Accepts a zeroed struct. */
void submission_clear(struct submission *s);

/* The textual check of a reference program: returns NULL when it defines Model,
 * get_inputs and get_init_inputs, else a static message naming what is missing. */
const char *submission_check_reference(const char *source, size_t len);

#endif
