/* The request-head deadline: a connection must deliver each request line and headers
 * within a fixed time, however slowly it trickles them. libmicrohttpd only has an idle
 * timeout, which every byte restarts; this closes the connections that are past it. */
#ifndef OPFORGE_HEAD_DEADLINE_H
#define OPFORGE_HEAD_DEADLINE_H

#include <stdbool.h>

struct head_deadline;

/* One open connection; owned by the registry, found again through MHD's socket
 * context. */
struct head_watch {
  struct head_watch *prev, *next;
  int fd;
  unsigned long long waiting_since_ns; /* monotonic; 0 while a request is being handled */
  bool tripped;                        /* shut down by the sweeper */
  bool counted;                        /* for the caller: counted by client_limit */
};

/* Called (from the sweeper thread) with how many connections one sweep shut down. */
typedef void (*head_deadline_tripped_fn)(void *ctx, unsigned n);

/* Starts the registry and its sweeper thread, which every quarter of the deadline (at
 * most every 250 ms) shuts down (shutdown(2), both ways) each connection that has
 * waited longer than deadline_s for a request head; libmicrohttpd then sees the socket
 * end and closes the connection as usual. ctx is borrowed. Returns NULL when out of
 * memory or the thread cannot start; the caller frees with head_deadline_free. */
struct head_deadline *head_deadline_new(unsigned deadline_s, head_deadline_tripped_fn tripped,
                                        void *ctx);

/* Stops the sweeper and frees the registry and every watch still in it. Accepts NULL. */
void head_deadline_free(struct head_deadline *hd);

/* A connection opened on socket fd: it now waits for its first request head. Returns its
 * watch (owned by hd until head_deadline_closed), NULL when out of memory (the
 * connection is then not watched). Thread-safe. */
struct head_watch *head_deadline_opened(struct head_deadline *hd, int fd);

/* The connection is closing (before libmicrohttpd closes fd). Frees w; NULL is fine. */
void head_deadline_closed(struct head_deadline *hd, struct head_watch *w);

/* The request head is complete: no deadline while it is handled. NULL w is fine. */
void head_deadline_head_done(struct head_deadline *hd, struct head_watch *w);

/* The request ended: the connection now waits for its next head, with a new deadline
 * (so it also bounds how long a kept-alive connection idles). NULL w is fine. */
void head_deadline_waiting(struct head_deadline *hd, struct head_watch *w);

#endif
