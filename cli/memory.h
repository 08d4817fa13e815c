/* `opforge memory`: export, import, reset and browse the HTAM memory of a server. */
#ifndef OPFORGE_CLI_MEMORY_H
#define OPFORGE_CLI_MEMORY_H

/* `opforge memory export [-o FILE] | import FILE | reset | show [ID]` with --server and
 * --token-file: argv[0] is "memory". Returns the exit status: 0 done, 1 refused or
 * unreachable (the server's error is printed), 2 bad usage or an unusable file. */
int cli_memory_main(int argc, char **argv);

#endif
