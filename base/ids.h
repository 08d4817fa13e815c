/* Resource ids: random UUIDs, lowercase, and their validation. */
#ifndef OPFORGE_IDS_H
#define OPFORGE_IDS_H

#include <stdbool.h>

#define ID_LEN 36

/* Writes a new random (v4) UUID, lowercase, NUL-terminated, into out. */
void id_new(char out[ID_LEN + 1]);

/* True when s is a UUID in canonical 8-4-4-4-12 form (any case). */
bool id_valid(const char *s);

#endif
