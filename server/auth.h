/* Bearer-token checks for writes. Tokens are compared in constant time, never logged. */
#ifndef OPFORGE_AUTH_H
#define OPFORGE_AUTH_H

#include <stdbool.h>

#include "server/config.h"

enum auth_result { AUTH_OK, AUTH_MISSING, AUTH_WRONG };

/* The longest token that can match: tokens are at most 127 bytes. */
#define AUTH_CANDIDATE_MAX 127

/* True for methods that change state (POST, PUT, PATCH, DELETE). */
bool auth_is_write(const char *method);

/* Checks an Authorization header value (may be NULL) against the configured tokens:
 * "Bearer" (any case), blanks, the token, optional blanks. With no tokens configured
 * every request is AUTH_OK. */
enum auth_result auth_check(const struct opforge_config *cfg, const char *authorization);

/* Constant-time equality of a NUL-terminated candidate and a token (both < 128 bytes
 * matter; longer candidates never match). */
bool auth_token_equal(const char *candidate, const char *token);

#endif
