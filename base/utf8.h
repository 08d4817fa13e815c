/* UTF-8 repair for text that goes into JSON (compile logs, messages). */
#ifndef OPFORGE_GPU_UTF8_H
#define OPFORGE_GPU_UTF8_H

#include <stddef.h>
#include <stdlib.h>

/* Returns a malloc'd NUL-terminated copy of the len bytes at s in which every byte that
 * is not part of a valid UTF-8 sequence (and every NUL) is replaced by '?'. The caller
 * frees it. NULL only when out of memory. */
char *utf8_sanitize(const char *s, size_t len);
/* Returns the largest n <= len such that cutting s at n does not split a multi-byte
 * sequence. */
size_t utf8_cut(const char *s, size_t len);

#endif
