/* Notifications from a shared store (docs/architecture.md, "Store backends"): a thread
 * that LISTENs on PostgreSQL's opforge_events (a task got events; the payload is its id)
 * and opforge_queue (a task is queued or let go), so a server hears at once what the
 * other servers did. SQLite has one server per file: there is nothing to hear. */
#ifndef OPFORGE_STORE_LISTENER_H
#define OPFORGE_STORE_LISTENER_H

#include "store/status.h"

#define STORE_CHANNEL_EVENTS "opforge_events"
#define STORE_CHANNEL_QUEUE "opforge_queue"
/* Heard with an empty payload after the listener connected again: notifications may have
 * been missed meanwhile. */
#define STORE_CHANNEL_RECONNECTED "reconnected"

/* Called on the listener's thread for each notification; channel and payload are valid
 * only during the call. */
typedef void (*store_heard_fn)(void *ctx, const char *channel, const char *payload);

struct store_listener;

/* Starts the listener of a PostgreSQL store (it connects, and reconnects after a loss,
 * on its own thread); for SQLite sets *ret_listener to NULL. s and ctx are borrowed and
 * must outlive the listener. STORE_OK, or STORE_ERROR when the thread cannot start. */
int store_listener_start(struct store *s, store_heard_fn heard, void *ctx,
                         struct store_listener **ret_listener);

/* Stops the thread and frees the listener. Accepts NULL. */
void store_listener_stop(struct store_listener *l);

#endif
