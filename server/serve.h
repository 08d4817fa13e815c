/* `opforge serve`: start-up, the wait for a signal, and the graceful shutdown. */
#ifndef OPFORGE_SERVE_H
#define OPFORGE_SERVE_H

/* Runs the server until SIGINT or SIGTERM. argv[0] is "serve". Returns the exit code:
 * 0 after a clean stop, 1 when start-up fails, 2 for a bad option. */
int serve_main(int argc, char **argv);

#endif
