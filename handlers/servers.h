/* GET /v1/servers: the servers sharing this store (store/servers.h). */
#ifndef OPFORGE_HANDLERS_SERVERS_H
#define OPFORGE_HANDLERS_SERVERS_H

#include "server/request.h"

/* Answers 200 {"store":"sqlite"|"postgresql","lease_seconds":N,"servers":[...]}: every
 * live server (renewed within a lease), oldest first, with its host, GPUs, slots, device
 * classes, current tasks and last renewal; or the store's failure (503 when the database
 * is away). */
enum MHD_Result handle_servers_list(struct request *req);

#endif
