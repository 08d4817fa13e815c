/* The static routing table and path matching: 404 versus 405, path parameters. */
#ifndef OPFORGE_ROUTER_H
#define OPFORGE_ROUTER_H

#include <stddef.h>

#include "server/request.h"

/* One route. pattern segments written {name} match one non-empty path segment. */
struct route {
  const char *method;
  const char *pattern;
  handler_fn handler;
};

/* The table (server/routes.c), ended by an entry whose method is NULL. */
extern const struct route opforge_routes[];

enum route_match { ROUTE_FOUND, ROUTE_NOT_FOUND, ROUTE_METHOD_NOT_ALLOWED, ROUTE_OPTIONS };

/* Matches method+path against table; HEAD matches the GET route. On ROUTE_FOUND sets
 * *ret_route and copies the parameters into req (owned by req). On
 * ROUTE_METHOD_NOT_ALLOWED, and on ROUTE_OPTIONS (method OPTIONS on a known path),
 * writes the allowed methods into allow ("POST, GET, HEAD, OPTIONS": the table's, HEAD
 * when GET is there, OPTIONS always; allow_len must be at least 1). Returns
 * ROUTE_NOT_FOUND also when the path has more parameters than REQUEST_MAX_PARAMS or
 * allocation fails. */
enum route_match router_match(const struct route *table, const char *method,
                              const char *path, struct request *req,
                              const struct route **ret_route, char *allow,
                              size_t allow_len);

#endif
