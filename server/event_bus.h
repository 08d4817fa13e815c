/* Wakes suspended SSE connections when a task gets new events (or on a periodic tick). */
#ifndef OPFORGE_EVENT_BUS_H
#define OPFORGE_EVENT_BUS_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

/* One suspended connection; embedded in its owner's state (intrusive list). */
struct bus_waiter {
  struct MHD_Connection *conn;
  char task_id[40];
  bool linked;
  struct bus_waiter *prev, *next;
};

struct event_bus;

/* Starts a bus whose ticker thread resumes every waiter each tick_ms (so keep-alives go
 * out and closed clients are noticed). Caller frees with event_bus_free. */
struct event_bus *event_bus_new(unsigned tick_ms);

/* Stops the ticker, resumes every waiter, frees the bus. Accepts NULL. */
void event_bus_free(struct event_bus *bus);

/* Generation counter; it moves on every notify. */
uint64_t event_bus_generation(struct event_bus *bus);

/* Announces new events of task_id: resumes its waiters. Call after the commit. */
void event_bus_notify(struct event_bus *bus, const char *task_id);

/* From a content reader only: suspends w->conn until the next notify of task_id or tick,
 * unless the generation moved past seen_generation (then returns false and does not
 * suspend: the caller should look for events again). w must stay valid until resumed
 * or until event_bus_forget. */
bool event_bus_wait(struct event_bus *bus, struct bus_waiter *w, struct MHD_Connection *conn,
                    const char *task_id, uint64_t seen_generation);

/* Shutdown: resumes every waiter and refuses new waits from now on. */
void event_bus_shutdown(struct event_bus *bus);

/* Unlinks w if it is still waiting (without resuming it). */
void event_bus_forget(struct event_bus *bus, struct bus_waiter *w);

#endif
