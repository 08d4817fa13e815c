/* Resource ids: random UUIDs, lowercase, and their validation. */
#include "base/ids.h"

#include <ctype.h>
#include <string.h>
#include <uuid/uuid.h>

void id_new(char out[ID_LEN + 1]) {
  uuid_t u;
  uuid_generate_random(u);
  uuid_unparse_lower(u, out);
}

bool id_valid(const char *s) {
  if (!s || strlen(s) != ID_LEN)
    return false;
  for (int i = 0; i < ID_LEN; i++) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
      return false;
  }
  return true;
}
