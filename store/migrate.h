/* Private to store/: schema migrations, applied when the store opens. */
#ifndef OPFORGE_STORE_MIGRATE_H
#define OPFORGE_STORE_MIGRATE_H

#include <stdbool.h>
#include <stddef.h>

#include "store/status.h"

/* Applies missing migrations and records them; sets s->schema_version. On failure
 * writes a reason into err and returns a store_status. */
int store_migrate(struct store *s, char *err, size_t errlen);

/* True when schema_migrations can be read and records every embedded migration, the
 * last one included. s must not be NULL. */
bool store_migrations_current(struct store *s);

#endif
