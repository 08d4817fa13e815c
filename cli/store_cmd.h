/* `opforge store`: offline work on a store (no server involved). */
#ifndef OPFORGE_CLI_STORE_CMD_H
#define OPFORGE_CLI_STORE_CMD_H

/* `opforge store copy --from sqlite:DIR --to postgresql://... [--to-password-file F]`:
 * copies one host's SQLite store into a PostgreSQL database (store/copy.h), printing a
 * line per table and a summary on stdout. argv[0] is "store". Returns the exit status: 0
 * copied, 1 refused or failed (nothing written; `error: ...` on stderr), 2 bad usage or
 * an unusable file. */
int cli_store_main(int argc, char **argv);

#endif
