/* Open connections per client address, counted by the daemon so that a request over
 * the per-client limit is answered 429 instead of its connection being dropped. */
#ifndef OPFORGE_CLIENT_LIMIT_H
#define OPFORGE_CLIENT_LIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

struct client_limit;

/* A client's key: a family tag (4 or 6), then its 4 or 16 address bytes, zero-padded. */
#define CLIENT_KEY_LEN 17

/* The key of addr in ret_key; false for families other than IPv4 and IPv6 (ret_key is
 * then zeroed). The port is left out: a client's connections differ only by it. */
bool client_limit_key(const struct sockaddr *addr, unsigned char ret_key[CLIENT_KEY_LEN]);

/* A counter for up to max_clients distinct addresses, each allowed limit open
 * connections. Returns NULL when out of memory; the caller frees with client_limit_free. */
struct client_limit *client_limit_new(size_t max_clients, unsigned limit);

/* Frees l (NULL is fine). */
void client_limit_free(struct client_limit *l);

/* Counts a new connection from addr; returns the open connections from addr including
 * it, or 0 when addr is not IPv4/IPv6 or the table is full (such a connection is not
 * counted, and client_limit_closed ignores it). Thread-safe. */
unsigned client_limit_opened(struct client_limit *l, const struct sockaddr *addr);

/* Counts a closed connection from addr (one that client_limit_opened counted). */
void client_limit_closed(struct client_limit *l, const struct sockaddr *addr);

/* Open connections from addr right now (0 when unknown). */
unsigned client_limit_count(struct client_limit *l, const struct sockaddr *addr);

/* True when addr has more open connections than the limit. */
bool client_limit_over(struct client_limit *l, const struct sockaddr *addr);

/* The per-client limit l was made with. */
unsigned client_limit_limit(const struct client_limit *l);

#endif
