/* `opforge memory`: export, import, reset and browse the HTAM memory of a server. */
#ifndef OPFORGE_CLI_MEMORY_H
#define OPFORGE_CLI_MEMORY_H

#include <stdbool.h>

struct cli_client;

/* `opforge memory export [-o FILE] | import FILE | reset | show [ID] | namespaces |
 * create NAME [--from ORIGIN] | delete NAME` with --memory NAME, --server and
 * --token-file: argv[0] is "memory". Returns the exit status: 0 done, 1 refused or
 * unreachable (the server's error is printed), 2 bad usage or an unusable file. */
int cli_memory_main(int argc, char **argv);

/* Makes memory namespace name ready for a run (bench --memory, ablate): created from the
 * seed when it does not exist; with fresh, recreated from the seed when it does (the
 * default namespace, which cannot be deleted, is reset). Returns 0, or -1 after printing
 * the server's error. */
int cli_memory_prepare(struct cli_client *client, const char *name, bool fresh);

#endif
