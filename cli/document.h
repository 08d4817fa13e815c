/* JSON documents of the export and import subcommands (memory, skills): written to a file
 * or standard output, read from a file or standard input with a size cap. */
#ifndef OPFORGE_CLI_DOCUMENT_H
#define OPFORGE_CLI_DOCUMENT_H

#include <jansson.h>

#define CLI_DOCUMENT_MAX_BYTES (64L * 1024 * 1024) /* a larger file is refused before sending */

/* Writes doc (borrowed), indented, to path, or to standard output when path is NULL.
 * Prints why and returns -1 when it cannot. */
int cli_document_write(json_t *doc, const char *path);

/* Reads the document at path ("-": standard input) into *ret_doc (caller owns). Prints
 * why and returns -1 when it cannot be read, is over CLI_DOCUMENT_MAX_BYTES, or is not
 * JSON (duplicate keys included). */
int cli_document_read(const char *path, json_t **ret_doc);

#endif
