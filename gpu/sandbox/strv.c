/* A growable NULL-terminated list of owned strings, for the argv, environment and path
 * lists the sandbox builds. */
#include "gpu/sandbox/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends an owned copy of s (NULL counts as an allocation failure). */
void strv_add(struct strv *v, const char *s) {
  if (v->failed)
    return;
  if (v->n + 2 > v->cap) {
    size_t cap = v->cap ? v->cap * 2 : 16;
    char **grown = realloc(v->items, cap * sizeof *grown);
    if (!grown) {
      v->failed = true;
      return;
    }
    v->items = grown;
    v->cap = cap;
  }
  char *copy = s ? strdup(s) : NULL;
  if (!copy) {
    v->failed = true;
    return;
  }
  v->items[v->n++] = copy;
  v->items[v->n] = NULL;
}

/* Appends a printf-formatted string. */
void strv_addf(struct strv *v, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  int n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0) {
    v->failed = true;
    return;
  }
  strv_add(v, s);
  free(s);
}

/* Hands the array over (the caller frees it with strv_free_array) and empties v; NULL
 * when an allocation failed, after freeing everything. */
char **strv_take(struct strv *v) {
  if (v->failed || !v->items) {
    bool empty_ok = !v->failed && !v->items;
    strv_clear(v);
    return empty_ok ? calloc(1, sizeof(char *)) : NULL;
  }
  char **items = v->items;
  v->items = NULL;
  v->n = v->cap = 0;
  return items;
}

/* Frees every string and the array, leaving v empty and usable. */
void strv_clear(struct strv *v) {
  for (size_t i = 0; i < v->n; i++)
    free(v->items[i]);
  free(v->items);
  v->items = NULL;
  v->n = v->cap = 0;
  v->failed = false;
}

/* Frees a NULL-terminated array from strv_take (NULL is fine). */
void strv_free_array(char **items) {
  if (!items)
    return;
  for (char **p = items; *p; p++)
    free(*p);
  free(items);
}
