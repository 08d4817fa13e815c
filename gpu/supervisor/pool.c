/* The slot pool (see supervisor.h): every supervisor of the server, for /v1/devices and
 * /metrics. */
#include "gpu/supervisor.h"

#include <errno.h>
#include <stdlib.h>

struct supervisor_pool {
  struct supervisor **items;
  size_t count, cap;
};

struct supervisor_pool *supervisor_pool_new(void) {
  return calloc(1, sizeof(struct supervisor_pool));
}

int supervisor_pool_add(struct supervisor_pool *pool, struct supervisor *sv) {
  if (!pool || !sv) {
    supervisor_free(sv);
    return -EINVAL;
  }
  if (pool->count == pool->cap) {
    size_t cap = pool->cap ? pool->cap * 2 : 4;
    struct supervisor **grown = realloc(pool->items, cap * sizeof *grown);
    if (!grown) {
      supervisor_free(sv);
      return -ENOMEM;
    }
    pool->items = grown;
    pool->cap = cap;
  }
  pool->items[pool->count++] = sv;
  return 0;
}

size_t supervisor_pool_count(const struct supervisor_pool *pool) {
  return pool ? pool->count : 0;
}

struct supervisor *supervisor_pool_get(const struct supervisor_pool *pool, size_t i) {
  return (pool && i < pool->count) ? pool->items[i] : NULL;
}

json_t *supervisor_pool_describe(struct supervisor_pool *pool) {
  static const char *const keys[] = {"index", "name", "capability", "memory_bytes",
                                     "state", "restarts", "current_task", "last_error"};
  json_t *devices = json_array();
  json_t *out = json_pack("{s:o}", "devices", devices);
  if (!out)
    return NULL;
  for (size_t i = 0; i < supervisor_pool_count(pool); i++) {
    json_t *full = supervisor_describe(pool->items[i]);
    json_t *row = json_object();
    for (size_t k = 0; full && row && k < sizeof keys / sizeof keys[0]; k++)
      json_object_set(row, keys[k], json_object_get(full, keys[k]));
    json_decref(full);
    if (!full || !row || json_array_append_new(devices, row) < 0) {
      json_decref(out);
      return NULL;
    }
  }
  return out;
}

unsigned long supervisor_pool_restarts(struct supervisor_pool *pool) {
  unsigned long total = 0;
  for (size_t i = 0; i < supervisor_pool_count(pool); i++)
    total += supervisor_restarts(pool->items[i]);
  return total;
}

void supervisor_pool_free(struct supervisor_pool *pool) {
  if (!pool)
    return;
  for (size_t i = 0; i < pool->count; i++)
    supervisor_free(pool->items[i]);
  free(pool->items);
  free(pool);
}
