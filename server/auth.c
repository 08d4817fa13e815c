/* Bearer-token checks for writes. Tokens are compared in constant time, never logged. */
#include "server/auth.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

bool auth_is_write(const char *method) {
  return strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
         strcmp(method, "PATCH") == 0 || strcmp(method, "DELETE") == 0;
}

/* Compares all 128 bytes of both (zero-padded) so the time does not depend on where
 * they differ or on the token's length. */
bool auth_token_equal(const char *candidate, const char *token) {
  unsigned char a[128] = {0}, b[128] = {0};
  size_t la = strnlen(candidate, sizeof a + 1), lb = strnlen(token, sizeof b);
  unsigned diff = la > sizeof a - 1 ? 1u : 0u;
  memcpy(a, candidate, la < sizeof a ? la : sizeof a);
  memcpy(b, token, lb < sizeof b ? lb : sizeof b);
  for (size_t i = 0; i < sizeof a; i++)
    diff |= (unsigned)(a[i] ^ b[i]);
  diff |= (unsigned)(la ^ lb);
  return diff == 0;
}

/* A field value has no whitespace around it (RFC 9110 section 5.5): the library drops
 * the leading blanks and keeps the trailing ones, which are not part of the token. */
enum auth_result auth_check(const struct opforge_config *cfg, const char *authorization) {
  if (cfg->n_tokens == 0)
    return AUTH_OK;
  if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
    return AUTH_MISSING;
  const char *candidate = authorization + 7;
  while (*candidate == ' ' || *candidate == '\t')
    candidate++;
  size_t n = strlen(candidate);
  while (n && (candidate[n - 1] == ' ' || candidate[n - 1] == '\t'))
    n--;
  if (n == 0)
    return AUTH_MISSING;
  char token[AUTH_CANDIDATE_MAX + 2]; /* one byte more than a token may have: no match */
  snprintf(token, sizeof token, "%.*s", (int)(n < sizeof token - 1 ? n : sizeof token - 1),
           candidate);
  bool ok = false;
  for (int i = 0; i < cfg->n_tokens; i++)
    ok |= auth_token_equal(token, cfg->tokens[i]);
  return ok ? AUTH_OK : AUTH_WRONG;
}
