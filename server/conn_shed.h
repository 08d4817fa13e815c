/* When the connection table fills up: how many connections that are still waiting for a
 * request head to shed, so that a client that sends its request at once is served
 * instead of being refused at accept (libmicrohttpd drops new connections when the
 * table is full). Many slow clients spread over many addresses pass every per-client
 * limit; shedding the longest waits first keeps room for the fast ones. */
#ifndef OPFORGE_CONN_SHED_H
#define OPFORGE_CONN_SHED_H

/* The free slots kept for new connections out of max: an eighth, from 1 to 64. */
unsigned conn_shed_headroom(unsigned max);

/* With open connections (the new one included) out of max, how many to shed: those
 * over max less the headroom, else 0. Pure. */
unsigned conn_shed_count(unsigned open, unsigned max);

#endif
