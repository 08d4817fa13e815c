/* The static routing table and path matching: 404 versus 405, path parameters. */
#include "server/router.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Compares one pattern with path segment by segment. On a match and when ret_params is
 * not NULL, stores newly allocated copies of the {..} segments there. */
static bool pattern_matches(const char *pattern, const char *path, char **ret_params,
                            unsigned *ret_n) {
  unsigned n = 0;
  char *params[REQUEST_MAX_PARAMS] = {0};
  const char *p = pattern, *s = path;
  while (*p && *s) {
    if (*p != '/' || *s != '/')
      goto no;
    p++, s++;
    size_t plen = strcspn(p, "/"), slen = strcspn(s, "/");
    if (plen > 1 && p[0] == '{' && p[plen - 1] == '}') {
      if (slen == 0 || n >= REQUEST_MAX_PARAMS)
        goto no;
      if (ret_params && !(params[n] = strndup(s, slen)))
        goto no;
      n++;
    } else if (plen != slen || strncmp(p, s, plen) != 0) {
      goto no;
    }
    p += plen, s += slen;
  }
  if (*p || *s)
    goto no;
  if (ret_params)
    memcpy(ret_params, params, sizeof params);
  *ret_n = n;
  return true;
no:
  for (unsigned i = 0; i < n; i++)
    free(params[i]);
  return false;
}

/* Appends method to the comma-separated list in allow unless it is there already. */
static void allow_add(char *allow, size_t allow_len, size_t *used, const char *method) {
  size_t n = strlen(method);
  for (const char *p = allow; (p = strstr(p, method)); p += n)
    if ((p == allow || p[-1] == ' ') && (p[n] == ',' || p[n] == '\0'))
      return;
  if (*used + n + 3 < allow_len)
    *used += (size_t)snprintf(allow + *used, allow_len - *used, "%s%s", *used ? ", " : "",
                              method);
}

enum route_match router_match(const struct route *table, const char *method,
                              const char *path, struct request *req,
                              const struct route **ret_route, char *allow,
                              size_t allow_len) {
  bool path_known = false, has_get = false;
  size_t used = 0;
  if (allow_len)
    allow[0] = '\0';
  /* HEAD is GET without the body (libmicrohttpd drops it). */
  const char *want = strcmp(method, "HEAD") == 0 ? "GET" : method;
  /* A path some route spells out literally (/v1/skills/adapt) is that resource only, not
   * also a parameter of a pattern (/v1/skills/{id}): other methods on it get 405. */
  bool literal = false;
  for (const struct route *r = table; r->method && !literal; r++) {
    unsigned n;
    literal = pattern_matches(r->pattern, path, NULL, &n) && n == 0;
  }
  for (const struct route *r = table; r->method; r++) {
    unsigned n;
    if (!pattern_matches(r->pattern, path, NULL, &n) || (literal && n > 0))
      continue;
    path_known = true;
    if (strcmp(r->method, want) == 0) {
      char *params[REQUEST_MAX_PARAMS] = {0};
      if (!pattern_matches(r->pattern, path, params, &n))
        return ROUTE_NOT_FOUND;
      memcpy(req->params, params, sizeof params);
      req->n_params = n;
      *ret_route = r;
      return ROUTE_FOUND;
    }
    has_get |= strcmp(r->method, "GET") == 0;
    allow_add(allow, allow_len, &used, r->method);
  }
  if (!path_known)
    return ROUTE_NOT_FOUND;
  if (has_get)
    allow_add(allow, allow_len, &used, "HEAD");
  allow_add(allow, allow_len, &used, "OPTIONS");
  return strcmp(method, "OPTIONS") == 0 ? ROUTE_OPTIONS : ROUTE_METHOD_NOT_ALLOWED;
}
