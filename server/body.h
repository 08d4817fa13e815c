/* Body intake: a small state machine that enforces the body cap while reading. */
#ifndef OPFORGE_BODY_H
#define OPFORGE_BODY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "server/request.h"

enum body_state { BODY_READING = 0, BODY_OVERFLOW, BODY_NOMEM };

/* Checks a Content-Length header value against cap before any byte is read. Returns
 * false when it is present and larger than cap (or malformed and huge). */
bool body_length_allowed(const char *content_length, size_t cap);

/* Appends a chunk to req->body, growing it geometrically. Past cap the request switches
 * to BODY_OVERFLOW and drops the rest, so the caller can answer 413 once the upload ends. */
void body_append(struct request *req, const char *data, size_t len, size_t cap);

/* Parses req->body as a JSON object. Returns it (caller owns), or queues 400 bad_json
 * and returns NULL: the caller then just returns *ret_result. An empty body, a
 * non-object and a string holding U+0000 are bad_json. Numbers are read as JSON Schema
 * reads them: an integer literal beyond 64 bits is a real, and a real with no fraction
 * that fits 64 bits is an integer (so 5.0 is a valid integer field). */
json_t *body_parse_object(struct request *req, enum MHD_Result *ret_result);

/* Fault injection for tests: the next n allocations in body intake succeed, then one
 * fails (n < 0 disables). */
void body_fail_after(int n);

#endif
