/* Request-arrival deadlines over the table of open connections: a connection must
 * deliver each request line and headers within a fixed time, and a request's body
 * within another of its head, however slowly it trickles them. libmicrohttpd only has an
 * idle timeout, which every byte restarts; this closes the connections past either
 * deadline. The same table answers what the connection limits need to know of the open
 * connections: how many there are, which of a client's are still alive, and which have
 * waited longest for a head (the first to shed when the table fills up). */
#ifndef OPFORGE_HEAD_DEADLINE_H
#define OPFORGE_HEAD_DEADLINE_H

#include <stdbool.h>
#include <sys/socket.h>

struct head_deadline;

/* One open connection; owned by the registry, found again through MHD's socket
 * context. */
struct head_watch {
  struct head_watch *prev, *next;
  int fd;
  struct sockaddr_storage peer;        /* the client's address (zeroed when unknown) */
  unsigned long long waiting_since_ns; /* monotonic; 0 while a request is being handled */
  unsigned long long body_since_ns;    /* monotonic; while a body is awaited, else 0 */
  bool tripped;                        /* shut down by the sweeper or shed */
  bool counted;                        /* for the caller: counted by client_limit */
};

/* Why connections were closed. */
enum head_deadline_reason { HEAD_LATE, BODY_LATE };

/* Called (from the sweeper thread) with how many connections one sweep shut down for
 * one reason. */
typedef void (*head_deadline_tripped_fn)(void *ctx, enum head_deadline_reason why,
                                         unsigned n);

/* Starts the registry and its sweeper thread, which every quarter of the shorter
 * deadline (at most every 250 ms) shuts down (shutdown(2), both ways) each connection
 * that has waited longer than head_s for a request head or body_s for the rest of a
 * body; libmicrohttpd then sees the socket end and closes the connection as usual.
 * ctx is borrowed. Returns NULL when out of memory or the thread cannot start; the
 * caller frees with head_deadline_free. */
struct head_deadline *head_deadline_new(unsigned head_s, unsigned body_s,
                                        head_deadline_tripped_fn tripped, void *ctx);

/* Stops the sweeper and frees the registry and every watch still in it. Accepts NULL. */
void head_deadline_free(struct head_deadline *hd);

/* A connection opened on socket fd from peer (copied; NULL when unknown): it now waits
 * for its first request head. Returns its watch (owned by hd until
 * head_deadline_closed), NULL when out of memory (the connection is then not watched).
 * Thread-safe, like every function below. */
struct head_watch *head_deadline_opened(struct head_deadline *hd, int fd,
                                        const struct sockaddr *peer);

/* The connection is closing (before libmicrohttpd closes fd). Frees w; NULL is fine. */
void head_deadline_closed(struct head_deadline *hd, struct head_watch *w);

/* The request head is complete: no head deadline while it is handled. When has_body,
 * the body deadline starts now. NULL w is fine. */
void head_deadline_head_done(struct head_deadline *hd, struct head_watch *w, bool has_body);

/* The request's body has arrived whole: its deadline stops. NULL w is fine. */
void head_deadline_body_done(struct head_deadline *hd, struct head_watch *w);

/* The request ended: the connection now waits for its next head, with a new deadline
 * (so it also bounds how long a kept-alive connection idles). NULL w is fine. */
void head_deadline_waiting(struct head_deadline *hd, struct head_watch *w);

/* How many connections are open (watched). */
unsigned head_deadline_count(struct head_deadline *hd);

/* Shuts down up to n of the connections that wait for a request head, those that have
 * waited longest first, never keep; returns how many it shut down. */
unsigned head_deadline_shed(struct head_deadline *hd, unsigned n, const struct head_watch *keep);

/* How many open connections from peer's address (any port) the client has not hung up
 * (no end of stream, reset or error on their sockets yet): those libmicrohttpd has not
 * reaped yet because its threads are busy or the connection is suspended are not
 * counted. */
unsigned head_deadline_live_from(struct head_deadline *hd, const struct sockaddr *peer);

#endif
