/* Bearer-token checks for writes. Tokens are compared in constant time, never logged. */
#include "server/auth.h"

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

enum auth_result auth_check(const struct opforge_config *cfg, const char *authorization) {
  if (cfg->n_tokens == 0)
    return AUTH_OK;
  if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
    return AUTH_MISSING;
  const char *candidate = authorization + 7;
  while (*candidate == ' ')
    candidate++;
  if (!*candidate)
    return AUTH_MISSING;
  bool ok = false;
  for (int i = 0; i < cfg->n_tokens; i++)
    ok |= auth_token_equal(candidate, cfg->tokens[i]);
  return ok ? AUTH_OK : AUTH_WRONG;
}
