/* Host, Origin and CORS rules (see origin.h). */
#include "server/origin.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The host part of a Host header (or listen address) without port and brackets, lower
 * case, into buf; false when it does not fit or is empty. */
static bool host_part(const char *value, char *buf, size_t len) {
  const char *start = value, *end;
  if (value[0] == '[') {
    start = value + 1;
    end = strchr(start, ']');
    if (!end || (end[1] != '\0' && end[1] != ':') || !memchr(start, ':', (size_t)(end - start)))
      return false; /* brackets hold an IPv6 literal only */
  } else {
    end = strchr(value, ':');
    if (!end)
      end = value + strlen(value);
  }
  size_t n = (size_t)(end - start);
  if (n == 0 || n >= len)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = start[i];
    buf[i] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
  }
  buf[n] = '\0';
  const char *port = value[0] == '[' ? end + 1 : end;
  if (*port == ':') /* a port, when given, is digits */
    for (const char *p = port + 1; *p; p++)
      if (*p < '0' || *p > '9')
        return false;
  return true;
}

/* 4 or 6 when s is an IP literal of that family, else 0; ret_loopback says whether it is
 * a loopback address, ret_any whether it is 0.0.0.0 or ::. */
static int ip_literal(const char *s, bool *ret_loopback, bool *ret_any) {
  struct in_addr a4;
  struct in6_addr a6;
  if (inet_pton(AF_INET, s, &a4) == 1) {
    *ret_loopback = (ntohl(a4.s_addr) >> 24) == 127;
    *ret_any = a4.s_addr == 0;
    return 4;
  }
  if (inet_pton(AF_INET6, s, &a6) == 1) {
    *ret_loopback = IN6_IS_ADDR_LOOPBACK(&a6);
    *ret_any = IN6_IS_ADDR_UNSPECIFIED(&a6);
    return 6;
  }
  *ret_loopback = *ret_any = false;
  return 0;
}

/* True when a and b are the same IP address (of one family). */
static bool same_ip(const char *a, const char *b) {
  unsigned char x[16], y[16];
  if (inet_pton(AF_INET, a, x) == 1 && inet_pton(AF_INET, b, y) == 1)
    return memcmp(x, y, 4) == 0;
  if (inet_pton(AF_INET6, a, x) == 1 && inet_pton(AF_INET6, b, y) == 1)
    return memcmp(x, y, 16) == 0;
  return false;
}

bool origin_host_allowed(const struct opforge_config *cfg, const char *host) {
  char name[CONFIG_NAME_MAX], listen[CONFIG_NAME_MAX];
  if (!host_part(host, name, sizeof name))
    return false;
  for (int i = 0; i < cfg->n_allow_hosts; i++)
    if (strcmp(name, cfg->allow_hosts[i]) == 0)
      return true;
  if (!host_part(cfg->listen_host, listen, sizeof listen))
    return false;
  bool loopback = false, any = false, name_loop, name_any;
  if (strcmp(listen, "localhost") == 0)
    loopback = true;
  else
    ip_literal(listen, &loopback, &any);
  if (strcmp(name, "localhost") == 0)
    return loopback || any;
  if (strcmp(name, listen) == 0 || same_ip(name, listen))
    return true;
  /* --listen localhost binds 127.0.0.1: its loopback literals name it too. */
  if (strcmp(listen, "localhost") == 0)
    return ip_literal(name, &name_loop, &name_any) != 0 && name_loop;
  /* Listening everywhere: any address of the host may be used, and an IP literal cannot
   * be rebound by someone else's DNS. */
  return any && ip_literal(name, &name_loop, &name_any) != 0;
}

bool origin_split_absolute(const char *url, char *ret_host, size_t host_len,
                           const char **ret_path) {
  const char *rest = strncasecmp(url, "http://", 7) == 0    ? url + 7
                     : strncasecmp(url, "https://", 8) == 0 ? url + 8
                                                            : NULL;
  if (!rest || host_len == 0)
    return false;
  size_t n = strcspn(rest, "/");
  snprintf(ret_host, host_len, "%.*s", (int)(n < host_len ? n : host_len - 1), rest);
  *ret_path = rest[n] ? rest + n : "/";
  return true;
}

bool origin_cors_listed(const struct opforge_config *cfg, const char *origin) {
  for (int i = 0; origin && i < cfg->n_cors_origins; i++)
    if (strcasecmp(origin, cfg->cors_origins[i]) == 0)
      return true;
  return false;
}

bool origin_is_own(const char *origin, const char *host) {
  if (!origin || !host || !*host)
    return false;
  const char *rest = strncasecmp(origin, "http://", 7) == 0    ? origin + 7
                     : strncasecmp(origin, "https://", 8) == 0 ? origin + 8
                                                               : NULL;
  return rest && strcasecmp(rest, host) == 0;
}

void origin_add_cors_headers(struct MHD_Response *response, const char *origin) {
  MHD_add_response_header(response, "Access-Control-Allow-Origin", origin);
  MHD_add_response_header(response, "Access-Control-Expose-Headers", ORIGIN_EXPOSE_HEADERS);
  MHD_add_response_header(response, "Vary", "Origin");
}

void origin_add_preflight_headers(struct MHD_Response *response, const char *origin,
                                  const char *allow) {
  MHD_add_response_header(response, "Access-Control-Allow-Origin", origin);
  MHD_add_response_header(response, "Access-Control-Allow-Methods", allow);
  MHD_add_response_header(response, "Access-Control-Allow-Headers", ORIGIN_ALLOW_HEADERS);
  MHD_add_response_header(response, "Access-Control-Max-Age", ORIGIN_PREFLIGHT_MAX_AGE);
  MHD_add_response_header(response, "Vary", "Origin");
}
