/* The HTTP daemon: libmicrohttpd with its own thread pool, and request dispatch. */
#ifndef OPFORGE_DAEMON_H
#define OPFORGE_DAEMON_H

#include <stdint.h>

struct app;
struct daemon;

/* Starts listening as app->cfg says. *ret_port gets the bound port (useful with port 0).
 * The caller owns *ret_daemon and stops it with daemon_stop. Returns 0 or -1 (logged). */
int daemon_start(struct app *app, struct daemon **ret_daemon, uint16_t *ret_port);

/* Resumes suspended streams, stops the daemon and frees it. Accepts NULL. */
void daemon_stop(struct daemon *d);

#endif
