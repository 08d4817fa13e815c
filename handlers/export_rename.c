/* Renaming of a region's kernels for the program export: every region's translation unit
 * is linked into one extension, where each extern "C" __global__ function's host stub is a
 * global symbol, so two regions defining a kernel of the same name would clash. */
#include "handlers/export_internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define MAX_KERNELS 64
#define MAX_NAME 128

/* The kernel names to rename (borrowed from the source or from extra, as pointers and
 * lengths into them). */
struct names {
  const char *text[MAX_KERNELS];
  size_t len[MAX_KERNELS];
  size_t n;
};

static bool ident_start(char c) { return isalpha((unsigned char)c) || c == '_'; }
static bool ident_char(char c) { return isalnum((unsigned char)c) || c == '_'; }

/* Whether the len bytes at s are one of the names. */
static bool names_has(const struct names *ns, const char *s, size_t len) {
  for (size_t i = 0; i < ns->n; i++)
    if (ns->len[i] == len && memcmp(ns->text[i], s, len) == 0)
      return true;
  return false;
}

/* Adds the len bytes at s (borrowed: ns points into s) unless present or too many. */
static void names_add(struct names *ns, const char *s, size_t len) {
  if (len > 0 && len < MAX_NAME && ns->n < MAX_KERNELS && !names_has(ns, s, len)) {
    ns->text[ns->n] = s;
    ns->len[ns->n++] = len;
  }
}

/* The end of the comment, string or character literal starting at s[i], or i when none
 * starts there. */
static size_t skip_opaque(const char *s, size_t i) {
  if (s[i] == '/' && s[i + 1] == '/') {
    while (s[i] && s[i] != '\n')
      i++;
    return i;
  }
  if (s[i] == '/' && s[i + 1] == '*') {
    const char *end = strstr(s + i + 2, "*/");
    return end ? (size_t)(end - s) + 2 : strlen(s);
  }
  if (s[i] == '"' || s[i] == '\'') {
    char quote = s[i++];
    while (s[i] && s[i] != quote && s[i] != '\n')
      i += s[i] == '\\' && s[i + 1] ? 2 : 1;
    return s[i] == quote ? i + 1 : i;
  }
  return i;
}

/* The end of the preprocessing number starting at s[i] (digits, letters, '.', exponent
 * signs and digit separators). */
static size_t skip_number(const char *s, size_t i) {
  while (ident_char(s[i]) || s[i] == '.' ||
         ((s[i] == '+' || s[i] == '-') && strchr("eEpP", s[i - 1])) ||
         (s[i] == '\'' && ident_char(s[i + 1])))
    i++;
  return i;
}

/* The end of the preprocessing directive whose '#' is at s[i] (continuation lines
 * included). */
static size_t skip_directive(const char *s, size_t i) {
  while (s[i] && !(s[i] == '\n' && s[i - 1] != '\\'))
    i++;
  return i;
}

/* After a __global__ at s[i]: records the name of the function it declares, the first
 * identifier followed by '(' other than an attribute (whose parentheses are skipped). */
static void find_kernel_name(const char *s, size_t i, struct names *ns) {
  static const char *const attrs[] = {"__launch_bounds__", "__cluster_dims__", "__maxnreg__",
                                      "__attribute__", "__declspec", "alignas", NULL};
  while (s[i] && !strchr(";{}=", s[i])) {
    size_t j = skip_opaque(s, i);
    if (j != i || isspace((unsigned char)s[i])) {
      i = j != i ? j : i + 1;
      continue;
    }
    if (!ident_start(s[i])) {
      i++;
      continue;
    }
    size_t start = i;
    while (ident_char(s[i]))
      i++;
    size_t after = i;
    while (isspace((unsigned char)s[after]))
      after++;
    if (s[after] != '(')
      continue;
    bool attr = false;
    for (size_t a = 0; attrs[a]; a++)
      attr = attr || (strlen(attrs[a]) == i - start && memcmp(attrs[a], s + start, i - start) == 0);
    if (!attr) {
      names_add(ns, s + start, i - start);
      return;
    }
    for (int depth = 0; s[after]; after++) {
      depth += s[after] == '(' ? 1 : s[after] == ')' ? -1 : 0;
      if (depth == 0)
        break;
    }
    i = s[after] ? after + 1 : after;
  }
}

/* Records every __global__ function that source defines or declares outside directives. */
static void collect_kernels(const char *s, struct names *ns) {
  bool line_start = true;
  for (size_t i = 0; s[i];) {
    size_t j = skip_opaque(s, i);
    if (j != i) {
      i = j;
    } else if (s[i] == '#' && line_start) {
      i = skip_directive(s, i);
    } else if (isdigit((unsigned char)s[i])) {
      i = skip_number(s, i);
      line_start = false;
    } else if (ident_start(s[i])) {
      size_t start = i;
      while (ident_char(s[i]))
        i++;
      if (i - start == 10 && memcmp(s + start, "__global__", 10) == 0)
        find_kernel_name(s, i, ns);
      line_start = false;
    } else {
      line_start = s[i] == '\n' || (line_start && isspace((unsigned char)s[i]));
      i++;
    }
  }
}

char *export_rename_kernels(const char *source, const char *prefix, const json_t *extra) {
  struct names ns = {.n = 0};
  size_t k;
  const json_t *name;
  collect_kernels(source, &ns);
  json_array_foreach(extra, k, name) {
    const char *s = json_string_value(name);
    if (export_is_identifier(s))
      names_add(&ns, s, strlen(s));
  }
  size_t plen = strlen(prefix), cap = strlen(source) + 1;
  for (size_t i = 0; source[i]; i++) /* every renamed identifier grows by plen at most */
    cap += ident_start(source[i]) && (i == 0 || !ident_char(source[i - 1])) ? plen : 0;
  char *out = malloc(cap), *w = out;
  if (!out)
    return NULL;
  for (size_t i = 0; source[i];) {
    size_t j = skip_opaque(source, i);
    if (j == i && isdigit((unsigned char)source[i]))
      j = skip_number(source, i);
    if (j == i && ident_start(source[i])) {
      while (ident_char(source[j]))
        j++;
      if (names_has(&ns, source + i, j - i)) {
        memcpy(w, prefix, plen);
        w += plen;
      }
    }
    if (j == i)
      j = i + 1;
    memcpy(w, source + i, j - i);
    w += j - i;
    i = j;
  }
  *w = '\0';
  return out;
}
