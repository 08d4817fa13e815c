/* Checks HTTP responses against the OpenAPI document and records spec coverage. */
#ifndef OPFORGE_SPEC_CHECK_H
#define OPFORGE_SPEC_CHECK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct spec;

/* One response header, as received (name case is irrelevant). */
struct spec_header {
  const char *name;
  const char *value;
};

/* One request/response pair to check. Everything is borrowed. */
struct spec_exchange {
  const char *method;                /* "GET", "POST", ... */
  const char *target;                /* request target: path, optionally ?query */
  long status;                       /* response status */
  const struct spec_header *headers; /* response headers */
  size_t n_headers;
  const char *body; /* response body (not NUL-terminated necessarily) */
  size_t body_len;
};

/* Takes a new reference to doc (the caller keeps its own), lints every schema in it
 * (unknown keywords, unresolvable $ref, patterns that do not compile) and indexes its
 * operations. On failure writes the reason into err and returns -1. The caller frees
 * *ret_spec with spec_free. */
int spec_load(json_t *doc, struct spec **ret_spec, char *err, size_t errlen);

/* Reads a JSON file and calls spec_load. */
int spec_load_file(const char *path, struct spec **ret_spec, char *err, size_t errlen);

/* Frees the spec and its regex cache. Accepts NULL. */
void spec_free(struct spec *spec);

/* The document (borrowed; valid until spec_free). */
const json_t *spec_document(const struct spec *spec);

/* Validates one response: finds the operation by method and path template (or the
 * document's x-opforge-unrouted-responses when no operation matches), the response by
 * status, then the required headers, the Content-Type, and the body against the schema
 * (JSON bodies; each Server-Sent Event's data for text/event-stream). Records coverage
 * of (method, template, status) whether or not the response is valid. Returns 0 when
 * valid, else -1 with the first violation in err. */
int spec_check_response(struct spec *spec, const struct spec_exchange *ex, char *err,
                        size_t errlen);

/* Validates value against schema, a schema inside the document (borrowed; its $refs
 * resolve against the document). Returns 0 when valid, else -1 with the reason and the
 * instance path (e.g. "$.items[0].status") in err. */
int spec_validate(struct spec *spec, const json_t *schema, const json_t *value, char *err,
                  size_t errlen);

/* Writes one line per operation that no checked response reached, skipping those marked
 * x-opforge-pending, and returns how many there were. */
size_t spec_report_unexercised(const struct spec *spec, FILE *out);

/* Writes, per operation, the documented statuses and whether each was seen; for the
 * test log, so the uncovered error paths are visible. */
void spec_report_coverage(const struct spec *spec, FILE *out);

#endif
