/* Files compiled into the binary by tools/embed.c (SQL migrations, the OpenAPI document). */
#ifndef OPFORGE_EMBEDDED_H
#define OPFORGE_EMBEDDED_H

#include <stddef.h>

/* One embedded file. Arrays of these end with an entry whose name is NULL.
 * data is NUL-terminated (size does not count the NUL). All of it is static. */
struct embedded_file {
  const char *name;
  const char *data;
  size_t size;
};

#endif
