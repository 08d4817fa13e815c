/* Store locations (docs/architecture.md, "Store backends"): which backend a --store value
 * names, and its text with any password hidden, for logs, errors and /metrics. */
#ifndef OPFORGE_STORE_CONNINFO_H
#define OPFORGE_STORE_CONNINFO_H

#include <stdbool.h>

/* True for a PostgreSQL location: a "postgresql://" or "postgres://" URL. */
bool store_location_is_pg(const char *location);

/* A copy of a libpq URL or keyword string with every password replaced by ***: the
 * user:password@ part of a URL, a password= query parameter, a password= keyword. The
 * caller frees it; NULL when out of memory. */
char *store_redact(const char *conninfo);

#endif
