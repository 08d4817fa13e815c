/* The servers that share a store (docs/architecture.md, "Store backends"): each writes its
 * row at start, renews it with its claims' leases, and deletes it when it stops. A row not
 * renewed within a lease is a server that is gone. The device classes a server advertises
 * decide which tasks it claims (store/claims.c). */
#ifndef OPFORGE_STORE_SERVERS_H
#define OPFORGE_STORE_SERVERS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "store/status.h"

/* The longest device class name, and how many one server advertises. */
#define STORE_DEVICE_CLASS_MAX 32
#define STORE_DEVICE_CLASSES 16

/* What a server says of itself. devices: its device classes (upper case, each
 * [A-Z0-9._-]{1,32}); gpus: what GET /v1/servers shows of its GPUs (borrowed). */
struct server_info {
  const char *version;
  const char *devices[STORE_DEVICE_CLASSES];
  size_t n_devices;
  const json_t *gpus;
  int slots;
};

/* Names the data directory whose lock this server holds (an absolute path). Call it
 * before store_claims_release_stale: with a shared store, the claims of earlier servers
 * on this host and directory are then released at once (they are gone: the lock is
 * ours). */
void store_server_set_data_dir(struct store *s, const char *data_dir);

/* Writes (or rewrites) this instance's row and makes info's device classes the ones its
 * claims match. Renewing with the same info is store_server_renew. Thread-safe. */
int store_server_register(struct store *s, const struct server_info *info);

/* Marks this instance's row alive now (the lease keeper calls it with each renewal). A
 * row that was deleted meanwhile (a peer took it for dead) is written again. */
int store_server_renew(struct store *s);

/* Deletes this instance's row (a clean stop). */
int store_server_remove(struct store *s);

/* The live servers (renewed within a lease), oldest first, as the API's items:
 * {"instance","host","pid","version","devices":[..],"gpus":[..],"slots","tasks":[ids],
 * "started_at","renewed_at","this":bool}. Caller owns *ret_items. */
int store_servers_list(struct store *s, json_t **ret_items);

/* Whether some live server with worker slots advertises device class (upper case), or
 * exists at all when device is NULL; *ret_classes (may be NULL; caller owns) gets those
 * servers' classes, sorted, without repeats. */
int store_servers_can_run(struct store *s, const char *device, bool *ret_yes,
                          json_t **ret_classes);

/* Upper-cases a device class in place; false when it is not 1..32 characters of
 * letters, digits, '.', '_' and '-'. */
bool store_device_class_normalize(char *name);

#endif
