/* UTF-8 repair: Jansson refuses invalid UTF-8, and logs and messages quote user text. */
#include "base/utf8.h"

#include <string.h>

/* Length of the valid sequence starting at p (at most avail bytes), or 0 if invalid. */
static size_t valid_sequence(const unsigned char *p, size_t avail) {
  unsigned char c = p[0];
  size_t need;
  unsigned cp;
  if (c >= 0x01 && c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    need = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    need = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    need = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (need > avail)
    return 0;
  for (size_t i = 1; i < need; i++) {
    if ((p[i] & 0xc0) != 0x80)
      return 0;
    cp = cp << 6 | (p[i] & 0x3f);
  }
  /* Overlong forms, surrogates and values past U+10FFFF are invalid. */
  if ((need == 3 && cp < 0x800) || (need == 4 && cp < 0x10000) || cp > 0x10ffff ||
      (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return need;
}

char *utf8_sanitize(const char *s, size_t len) {
  char *out = malloc(len + 1);
  if (!out)
    return NULL;
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < len) {
    size_t n = valid_sequence(p + i, len - i);
    if (n == 0) {
      out[i] = '?';
      i++;
    } else {
      memcpy(out + i, p + i, n);
      i += n;
    }
  }
  out[len] = '\0';
  return out;
}

size_t utf8_cut(const char *s, size_t len) {
  size_t n = len;
  /* Step back over at most three continuation bytes to the start of the last sequence. */
  for (unsigned back = 0; back < 4 && n > 0; back++) {
    unsigned char c = (unsigned char)s[n - 1];
    if ((c & 0xc0) != 0x80) {
      if (c < 0x80)
        return n;
      size_t want = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      return len - (n - 1) >= want ? len : n - 1;
    }
    n--;
  }
  return len;
}
