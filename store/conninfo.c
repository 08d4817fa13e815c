/* Store locations: the backend a --store value names, and its password hidden. */
#include "store/conninfo.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

bool store_location_is_pg(const char *location) {
  return location && (strncmp(location, "postgresql://", 13) == 0 ||
                      strncmp(location, "postgres://", 11) == 0);
}

/* Appends n bytes of src to *o. */
static void put(char **o, const char *src, size_t n) {
  memcpy(*o, src, n);
  *o += n;
}

/* The end of a value starting at p: a quoted keyword value runs to its closing quote
 * (backslash escapes), anything else to the next blank, or & in a URL query. */
static const char *value_end(const char *p, bool url) {
  if (!url && *p == '\'') {
    for (p++; *p && *p != '\''; p++)
      if (*p == '\\' && p[1])
        p++;
    return *p ? p + 1 : p;
  }
  while (*p && *p != ' ' && *p != '\t' && !(url && *p == '&'))
    p++;
  return p;
}

/* Copies a URL's user:password@ with the password hidden; returns where the host starts. */
static const char *redact_userinfo(const char *p, char **o) {
  const char *at = NULL;
  for (const char *q = p; *q && *q != '/' && *q != '?'; q++)
    if (*q == '@')
      at = q;
  const char *colon = at ? memchr(p, ':', (size_t)(at - p)) : NULL;
  if (!colon)
    return p;
  put(o, p, (size_t)(colon - p) + 1);
  put(o, "***", 3);
  return at;
}

char *store_redact(const char *conninfo) {
  size_t len = strlen(conninfo);
  char *out = malloc(len * 2 + 8);
  if (!out)
    return NULL;
  char *o = out;
  const char *p = conninfo;
  bool url = store_location_is_pg(conninfo);
  if (url) {
    const char *scheme_end = strstr(p, "://") + 3;
    put(&o, p, (size_t)(scheme_end - p));
    p = redact_userinfo(scheme_end, &o);
  }
  while (*p) {
    bool at_key = p == conninfo || p[-1] == ' ' || p[-1] == '\t' || p[-1] == '?' || p[-1] == '&';
    if (at_key && strncasecmp(p, "password", 8) == 0) {
      const char *eq = p + 8;
      while (!url && (*eq == ' ' || *eq == '\t'))
        eq++;
      if (*eq == '=') {
        const char *value = eq + 1;
        while (!url && (*value == ' ' || *value == '\t'))
          value++;
        put(&o, "password=***", 12);
        p = value_end(value, url);
        continue;
      }
    }
    *o++ = *p++;
  }
  *o = '\0';
  return out;
}
