/* Compile-log normalization: first error line -> stable snake_case class. */
#include "gpu/compile_signature.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Messages whose wording varies but mean one thing. Patterns are written as the
 * normalized words (quotes, numbers and stop words gone) and match whole words anywhere
 * in the message, so "expected a ;" and "expected an expression" both read as syntax. */
static const struct {
  const char *words;
  const char *cls;
} known[] = {
  {"expected", "syntax_error"},
  {"unrecognized token", "syntax_error"},
  {"missing closing quote", "syntax_error"},
  {"unexpected end file", "syntax_error"},
  {"value type cannot used initialize", "type_mismatch"},
  {"value type cannot assigned", "type_mismatch"},
  {"argument type incompatible", "type_mismatch"},
  {"return value type does not match", "type_mismatch"},
  {"no suitable conversion", "type_mismatch"},
  {"no suitable constructor", "type_mismatch"},
  {"too few arguments", "wrong_argument_count"},
  {"too many arguments", "wrong_argument_count"},
  {"no instance overloaded function", "no_matching_overload"},
  {"no instance function template", "no_matching_overload"},
  {"more than one instance overloaded function", "ambiguous_overload"},
  {"could not open source file", "include_not_found"},
  {"cannot open source file", "include_not_found"},
  {"uses too much shared data", "too_much_shared"},
  {"instruction not supported", "unsupported_instruction"},
  {"already been defined", "redefinition"},
  {"invalid redeclaration", "redefinition"},
};

/* True when pattern occurs in words as whole words. */
static bool has_words(const char *words, const char *pattern) {
  size_t n = strlen(pattern);
  for (const char *p = strstr(words, pattern); p; p = strstr(p + 1, pattern))
    if ((p == words || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
      return true;
  return false;
}

static const char *const stop_words[] = {"is", "a", "an", "the", "of", "to", "in", "for",
                                         "be", "this", "that", "was", "with", "on", "at"};

static bool is_stop_word(const char *w, size_t n) {
  for (size_t i = 0; i < sizeof stop_words / sizeof stop_words[0]; i++)
    if (strlen(stop_words[i]) == n && strncmp(stop_words[i], w, n) == 0)
      return true;
  return false;
}

/* Finds the first line holding "error" followed by optional blanks and ':' (NVRTC's
 * "error:", "catastrophic error:", ptxas's "error   :", "fatal   :"), and returns a
 * pointer just past that ':' and the end of the line; NULL when none. */
static const char *first_error(const char *log, const char **ret_end) {
  const char *line = log;
  while (line && *line) {
    const char *end = strchr(line, '\n');
    if (!end)
      end = line + strlen(line);
    for (const char *p = line; p < end; p++) {
      size_t kw = strncmp(p, "error", 5) == 0 ? 5 : strncmp(p, "fatal", 5) == 0 ? 5 : 0;
      if (kw == 0)
        continue;
      const char *q = p + kw;
      while (q < end && (*q == ' ' || *q == '\t'))
        q++;
      if (q < end && *q == ':') {
        *ret_end = end;
        return q + 1;
      }
    }
    line = *end ? end + 1 : NULL;
  }
  return NULL;
}

/* Lower-cases the message into space-separated words of letters only, dropping quoted
 * text (identifiers, types, file names), numbers and stop words. */
static void message_words(const char *p, const char *end, char *out, size_t outlen) {
  size_t n = 0;
  out[0] = '\0';
  while (p < end) {
    if (*p == '"' || *p == '\'') {
      const char *close = memchr(p + 1, *p, (size_t)(end - p - 1));
      p = close ? close + 1 : end;
      continue;
    }
    if (!isalpha((unsigned char)*p)) {
      /* Skip the rest of a token that started with a digit ("0x1f", "4th"). */
      if (isdigit((unsigned char)*p))
        while (p < end && isalnum((unsigned char)*p))
          p++;
      else
        p++;
      continue;
    }
    const char *w = p;
    while (p < end && (isalpha((unsigned char)*p) || *p == '_'))
      p++;
    size_t wl = (size_t)(p - w);
    if (is_stop_word(w, wl) || n + wl + 2 >= outlen)
      continue;
    if (n > 0)
      out[n++] = ' ';
    for (size_t i = 0; i < wl; i++)
      out[n++] = (char)tolower((unsigned char)w[i]);
    out[n] = '\0';
  }
}

const char *compile_first_error_line(const char *log, size_t *ret_len) {
  const char *end = NULL;
  const char *msg = log ? first_error(log, &end) : NULL;
  if (!msg)
    return NULL;
  const char *start = msg;
  while (start > log && start[-1] != '\n')
    start--;
  *ret_len = (size_t)(end - start);
  return start;
}

char *compile_signature(const char *log, char *ret, size_t retlen) {
  const char *end = NULL;
  const char *msg = log ? first_error(log, &end) : NULL;
  if (!msg) {
    snprintf(ret, retlen, "compile/failed");
    return ret;
  }
  char words[256];
  message_words(msg, end, words, sizeof words);
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    if (has_words(words, known[i].words)) {
      snprintf(ret, retlen, "compile/%s", known[i].cls);
      return ret;
    }
  }
  if (words[0] == '\0') {
    snprintf(ret, retlen, "compile/failed");
    return ret;
  }
  /* Keep the class short enough to cluster on: at most 48 characters of words. */
  char cls[49];
  size_t n = 0;
  for (const char *w = words; *w && n + 1 < sizeof cls; w++)
    cls[n++] = *w == ' ' ? '_' : *w;
  while (n > 0 && cls[n - 1] == '_')
    n--;
  cls[n] = '\0';
  snprintf(ret, retlen, "compile/%s", cls);
  return ret;
}
