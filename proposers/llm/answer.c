/* Strict parsing of an LLM's answer (see answer.h): fenced blocks, edits, and the two
 * shapes of answer. The plan's own checks are in plan_check.c. */
#include "proposers/llm/answer.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_BLOCKS 32

__attribute__((format(printf, 3, 4))) static void set_err(struct answer_error *err,
                                                          const char *cls, const char *fmt,
                                                          ...) {
  snprintf(err->cls, sizeof err->cls, "%s", cls);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
}

/* The end of the line at p (its '\n' or NUL). */
static const char *line_end(const char *p) {
  const char *e = strchr(p, '\n');
  return e ? e : p + strlen(p);
}

/* If the line at p is a fence (up to 3 spaces, then 3 or more backticks), returns the
 * position after the backticks and sets *ret_ticks; else NULL. */
static const char *fence_at(const char *p, size_t *ret_ticks) {
  size_t spaces = 0;
  while (p[spaces] == ' ' && spaces < 3)
    spaces++;
  size_t ticks = 0;
  while (p[spaces + ticks] == '`')
    ticks++;
  if (ticks < 3)
    return NULL;
  *ret_ticks = ticks;
  return p + spaces + ticks;
}

static bool lang_is(const char *lang, size_t len, const char *const *names) {
  for (size_t i = 0; names[i]; i++)
    if (strlen(names[i]) == len && strncasecmp(lang, names[i], len) == 0)
      return true;
  return false;
}

/* The kind of a block from its info string (lang, len bytes) and its body. */
static int block_kind(const char *lang, size_t len, const char *body, size_t blen) {
  static const char *const cuda[] = {"cuda", "cu", "cuh", "cpp", "c++", "cxx", "cc", "c",
                                     "hpp", NULL};
  static const char *const json[] = {"json", "jsonc", NULL};
  if (lang_is(lang, len, cuda))
    return BLOCK_CUDA;
  if (lang_is(lang, len, json))
    return BLOCK_JSON;
  if (len > 0)
    return BLOCK_OTHER;
  size_t skip = 0;
  while (skip < blen && isspace((unsigned char)body[skip]))
    skip++;
  if (skip < blen && body[skip] == '{')
    return BLOCK_JSON;
  return memmem(body, blen, "__global__", 10) ? BLOCK_CUDA : BLOCK_OTHER;
}

long answer_blocks(const char *text, struct answer_block *ret, size_t max,
                   struct answer_error *err) {
  long n = 0;
  for (const char *p = text; *p;) {
    const char *end = line_end(p);
    size_t ticks;
    const char *info = fence_at(p, &ticks);
    if (!info) {
      p = *end ? end + 1 : end;
      continue;
    }
    while (info < end && *info == ' ')
      info++;
    size_t lang_len = strcspn(info, " \t\r\n{");
    if (info + lang_len > end)
      lang_len = (size_t)(end - info);
    const char *body = *end ? end + 1 : end, *q = body, *close = NULL;
    while (*q && !close) {
      const char *qe = line_end(q);
      size_t t;
      const char *after = fence_at(q, &t);
      if (after && t >= ticks) {
        while (after < qe && (*after == ' ' || *after == '\t' || *after == '\r'))
          after++;
        if (after == qe)
          close = q;
      }
      if (!close)
        q = *qe ? qe + 1 : qe;
    }
    if (!close) {
      set_err(err, "parse/unclosed_block", "a ``` block opened on line '%.60s' is never "
              "closed (was the answer cut at max_tokens?)", p);
      return -1;
    }
    size_t blen = (size_t)(close - body);
    if ((size_t)n < max)
      ret[n] = (struct answer_block){block_kind(info, lang_len, body, blen), body, blen};
    n++;
    const char *ce = line_end(close);
    p = *ce ? ce + 1 : ce;
  }
  return n;
}

/* Copies len bytes of s without newlines at either end (caller frees), or NULL. */
static char *strip_newlines(const char *s, size_t len) {
  while (len > 0 && (*s == '\n' || *s == '\r')) {
    s++;
    len--;
  }
  while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r'))
    len--;
  return strndup(s, len);
}

/* Finds "<tag_N>" from p (inside text): sets *ret_num and returns the position after '>',
 * or NULL. */
static const char *find_open(const char *text, const char *p, const char *tag, long *ret_num) {
  size_t tlen = strlen(tag);
  for (const char *q = strstr(p, tag); q; q = strstr(q + 1, tag)) {
    if (q == text || q[-1] != '<' || !isdigit((unsigned char)q[tlen]))
      continue;
    char *end = NULL;
    long num = strtol(q + tlen, &end, 10);
    if (*end == '>') {
      *ret_num = num;
      return end + 1;
    }
  }
  return NULL;
}

void answer_edits_free(struct answer_edit *edits, size_t n) {
  for (size_t i = 0; edits && i < n; i++) {
    free(edits[i].old_text);
    free(edits[i].new_text);
  }
  free(edits);
}

/* Reads one <tag_N>body</tag_N> whose opening tag ends at body; returns the position after
 * the closing tag and a copy of the stripped body (caller frees), or NULL. */
static const char *read_tagged(const char *body, const char *tag, long num, char **ret_text) {
  char close[48];
  snprintf(close, sizeof close, "</%s%ld>", tag, num);
  const char *end = strstr(body, close);
  if (!end)
    return NULL;
  *ret_text = strip_newlines(body, (size_t)(end - body));
  return *ret_text ? end + strlen(close) : NULL;
}

long answer_edits(const char *text, struct answer_edit **ret_edits, struct answer_error *err) {
  struct answer_edit *edits = calloc(LLM_MAX_EDITS, sizeof *edits);
  if (!edits) {
    set_err(err, "parse/bad_edit", "out of memory reading the edits");
    return -1;
  }
  long n = 0, num;
  const char *p = text, *body;
  while ((body = find_open(text, p, "old_str_", &num))) {
    if (n == LLM_MAX_EDITS) {
      set_err(err, "parse/bad_edit", "more than %d edits; give fewer, larger ones",
              LLM_MAX_EDITS);
      answer_edits_free(edits, (size_t)n);
      return -1;
    }
    long new_num = -1;
    const char *after = read_tagged(body, "old_str_", num, &edits[n].old_text);
    const char *nb = after ? after + strspn(after, " \t\r\n") : NULL;
    if (nb && strncmp(nb, "<new_str_", 9) == 0)
      nb = find_open(text, nb, "new_str_", &new_num);
    else
      nb = NULL;
    after = nb && new_num == num ? read_tagged(nb, "new_str_", num, &edits[n].new_text) : NULL;
    if (!after) {
      set_err(err, "parse/bad_edit", "edit %ld: <old_str_%ld> must be closed by "
              "</old_str_%ld> and followed by <new_str_%ld>...</new_str_%ld>", n + 1, num, num,
              num, num);
      answer_edits_free(edits, (size_t)n + 1);
      return -1;
    }
    if (!edits[n].old_text[0]) {
      set_err(err, "parse/bad_edit", "edit %ld: old_str is empty", n + 1);
      answer_edits_free(edits, (size_t)n + 1);
      return -1;
    }
    n++;
    p = after;
  }
  if (n == 0) {
    set_err(err, "parse/no_edits", "the answer holds no edit: expected <old_str_1>...</old_str_1>"
            " <new_str_1>...</new_str_1>");
    free(edits);
    return -1;
  }
  *ret_edits = edits;
  return n;
}

/* How many times needle occurs in hay (overlaps counted), stopping at 2. */
static int occurrences(const char *hay, const char *needle, const char **ret_first) {
  int n = 0;
  *ret_first = NULL;
  for (const char *q = strstr(hay, needle); q && n < 2; q = strstr(q + 1, needle)) {
    if (!n)
      *ret_first = q;
    n++;
  }
  return n;
}

/* The first line of s, for a message (at most 60 bytes). */
static void first_line(const char *s, char *out, size_t len) {
  size_t n = strcspn(s, "\r\n");
  snprintf(out, len, "%.*s", (int)(n < 60 ? n : 60), s);
}

char *answer_apply_edits(const char *source, const struct answer_edit *edits, size_t n,
                         struct answer_error *err) {
  char *cur = strdup(source);
  for (size_t i = 0; cur && i < n; i++) {
    const char *at;
    int count = occurrences(cur, edits[i].old_text, &at);
    char line[64];
    first_line(edits[i].old_text, line, sizeof line);
    if (count != 1) {
      set_err(err, count ? "parse/edit_not_unique" : "parse/edit_not_found",
              "edit %zu: old_str (first line '%s') %s", i + 1, line,
              count ? "occurs more than once in the source; it must occur exactly once"
                    : "does not occur in the source");
      free(cur);
      return NULL;
    }
    size_t head = (size_t)(at - cur), olen = strlen(edits[i].old_text);
    size_t nlen = strlen(edits[i].new_text), tail = strlen(at + olen);
    if (head + nlen + tail > LLM_MAX_SOURCE) {
      set_err(err, "parse/bad_edit", "edit %zu makes the source longer than %u bytes", i + 1,
              LLM_MAX_SOURCE);
      free(cur);
      return NULL;
    }
    char *next = malloc(head + nlen + tail + 1);
    if (next) {
      memcpy(next, cur, head);
      memcpy(next + head, edits[i].new_text, nlen);
      memcpy(next + head + nlen, at + olen, tail + 1);
    }
    free(cur);
    cur = next;
  }
  if (!cur)
    set_err(err, "parse/bad_edit", "out of memory applying the edits");
  return cur;
}

/* The JSON blocks of blocks that are plans: at most one is allowed. Returns the parsed
 * plan (caller owns), NULL with *ret_none set when there is none, or NULL with err. */
static json_t *plan_block(const char *text, const struct answer_block *blocks, long n,
                          bool *ret_none, struct answer_error *err) {
  json_t *plan = NULL;
  int plans = 0;
  char bad[200] = "";
  *ret_none = false;
  for (long i = 0; i < n && i < MAX_BLOCKS; i++) {
    if (blocks[i].kind != BLOCK_JSON)
      continue;
    json_error_t jerr;
    json_t *doc = json_loadb(blocks[i].body, blocks[i].len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc && !bad[0])
      snprintf(bad, sizeof bad, "line %d of the block: %s", jerr.line, jerr.text);
    if (json_is_object(doc) && json_object_get(doc, "launches")) {
      if (++plans == 1)
        plan = json_incref(doc);
    }
    json_decref(doc);
  }
  (void)text;
  if (plans > 1) {
    json_decref(plan);
    set_err(err, "parse/two_plans", "the answer holds %d JSON plans; give exactly one", plans);
    return NULL;
  }
  if (!plan && bad[0]) {
    set_err(err, "parse/bad_json", "the ```json block is not valid JSON: %s", bad);
    return NULL;
  }
  *ret_none = !plan;
  return plan;
}

/* Builds {"source","options","plan"} from source and a plan block; NULL with err. */
static json_t *candidate_of(const char *source, size_t len, json_t *block, json_t *profile,
                            struct answer_error *err) {
  char *src = strndup(source, len);
  json_t *plan = NULL, *options = NULL, *cand = NULL;
  if (!src)
    set_err(err, "parse/bad_plan", "out of memory");
  else if (answer_check_plan(block, profile, src, &plan, &options, err) == 0) {
    cand = json_pack("{s:s, s:o, s:o}", "source", src, "options", options, "plan", plan);
    if (!cand)
      set_err(err, "parse/no_source", "the source is not valid UTF-8 text");
  }
  free(src);
  return cand;
}

json_t *answer_parse_large(const char *text, json_t *profile, struct answer_error *err) {
  struct answer_block blocks[MAX_BLOCKS];
  long n = answer_blocks(text, blocks, MAX_BLOCKS, err);
  if (n < 0)
    return NULL;
  const struct answer_block *cuda = NULL;
  for (long i = 0; i < n && i < MAX_BLOCKS && !cuda; i++)
    if (blocks[i].kind == BLOCK_CUDA)
      cuda = &blocks[i];
  if (!cuda) {
    set_err(err, "parse/no_source", "the answer holds no ```cuda block with the kernel source");
    return NULL;
  }
  if (cuda->len > LLM_MAX_SOURCE || memchr(cuda->body, '\0', cuda->len)) {
    set_err(err, "parse/no_source", "the ```cuda block is longer than %u bytes", LLM_MAX_SOURCE);
    return NULL;
  }
  bool none;
  json_t *block = plan_block(text, blocks, n, &none, err);
  if (!block) {
    if (none)
      set_err(err, "parse/no_plan", "the answer holds no ```json block with the launch plan "
              "(an object with \"launches\")");
    return NULL;
  }
  json_t *cand = candidate_of(cuda->body, cuda->len, block, profile, err);
  json_decref(block);
  return cand;
}

json_t *answer_parse_small(const char *text, json_t *parent, json_t *profile,
                           struct answer_error *err) {
  const char *source = json_string_value(json_object_get(parent, "source"));
  if (!source) {
    set_err(err, "parse/no_source", "the parent candidate has no source to edit");
    return NULL;
  }
  struct answer_edit *edits = NULL;
  long n = answer_edits(text, &edits, err);
  if (n < 0)
    return NULL;
  char *edited = answer_apply_edits(source, edits, (size_t)n, err);
  answer_edits_free(edits, (size_t)n);
  if (!edited)
    return NULL;
  struct answer_block blocks[MAX_BLOCKS];
  long nb = answer_blocks(text, blocks, MAX_BLOCKS, err);
  bool none = true;
  json_t *block = nb < 0 ? NULL : plan_block(text, blocks, nb, &none, err);
  json_t *cand = NULL;
  if (nb >= 0 && (block || none)) {
    if (!block) /* the parent's plan, checked against the edited source */
      block = json_deep_copy(json_object_get(parent, "plan"));
    json_t *opts = json_object_get(parent, "options");
    if (block && !json_object_get(block, "options") && json_is_array(opts))
      json_object_set(block, "options", opts);
    cand = block ? candidate_of(edited, strlen(edited), block, profile, err) : NULL;
    if (!block)
      set_err(err, "parse/bad_plan", "the parent candidate has no plan");
  }
  json_decref(block);
  json_t *parent_opts = json_object_get(parent, "options");
  if (cand && json_equal(json_object_get(cand, "source"), json_object_get(parent, "source")) &&
      json_equal(json_object_get(cand, "plan"), json_object_get(parent, "plan")) &&
      (json_equal(json_object_get(cand, "options"), parent_opts) ||
       (!parent_opts && json_array_size(json_object_get(cand, "options")) == 0))) {
    json_decref(cand);
    cand = NULL;
    set_err(err, "parse/no_change", "the edits leave the kernel and its plan as they were");
  }
  free(edited);
  return cand;
}
