/* The skill memory's prompts and the reading of their answers (see skills.h). */
#include "proposers/llm/skills.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/utf8.h"
#include "proposers/llm/text.h"

#define N_VARS(v) (sizeof(v) / sizeof((v)[0]))

/* Renders template name with vars into *ret (caller frees). */
static int render(const char *name, const struct tvar *vars, size_t n, char **ret, char *err,
                  size_t errlen) {
  const char *tmpl = llm_prompt_template(name);
  if (!tmpl) {
    snprintf(err, errlen, "no prompt template %s", name);
    return -1;
  }
  struct ltext t = {0};
  if (llm_template_render(tmpl, vars, n, &t, err, errlen) != 0) {
    ltext_clear(&t);
    return -1;
  }
  if (t.oom) {
    ltext_clear(&t);
    snprintf(err, errlen, "out of memory rendering %s", name);
    return -1;
  }
  *ret = ltext_take(&t);
  return *ret ? 0 : -1;
}

/* At most max bytes of s (cut at a character boundary, without trailing newlines), with
 * a note when cut; caller frees. */
static char *excerpt(const char *s, size_t max) {
  size_t len = s ? strlen(s) : 0;
  while (len > 0 && s[len - 1] == '\n')
    len--;
  size_t keep = len > max ? utf8_cut(s, max) : len;
  struct ltext t = {0};
  ltext_add(&t, s ? s : "", keep);
  if (keep < len)
    ltext_printf(&t, "\n... (%zu more bytes)", len - keep);
  return ltext_take(&t);
}

int llm_skill_extract_prompt(const struct skill_reflection *req, char **ret_user, char *err,
                             size_t errlen) {
  char *source = excerpt(req->source && *req->source ? req->source : "(no source)",
                         LLM_SKILL_SOURCE_MAX);
  char *failure = excerpt(req->failure, LLM_SKILL_FAILURE_MAX);
  int rc = -1;
  if (source && failure) {
    struct tvar vars[] = {{"family", req->family ? req->family : "CUDA"},
                          {"source", source},
                          {"failure", failure}};
    rc = render("skill_extract.txt", vars, N_VARS(vars), ret_user, err, errlen);
  } else {
    snprintf(err, errlen, "out of memory building the extraction prompt");
  }
  free(source);
  free(failure);
  return rc;
}

/* True when text holds "no guidance", case aside. */
static bool says_no_guidance(const char *text) {
  for (const char *p = text; *p; p++)
    if (strncasecmp(p, "no guidance", 11) == 0)
      return true;
  return false;
}

int llm_skill_parse_rule(const char *answer, char ret[PROPOSAL_RULE_MAX + 1]) {
  if (!answer || says_no_guidance(answer))
    return 0;
  /* The last non-empty line. */
  const char *end = answer + strlen(answer), *line = NULL, *line_end = NULL;
  for (const char *p = answer; p < end;) {
    const char *eol = memchr(p, '\n', (size_t)(end - p));
    const char *stop = eol ? eol : end;
    const char *a = p, *b = stop;
    while (a < b && isspace((unsigned char)*a))
      a++;
    while (b > a && isspace((unsigned char)b[-1]))
      b--;
    if (b > a) {
      line = a;
      line_end = b;
    }
    p = eol ? eol + 1 : end;
  }
  if (!line)
    return 0;
  /* Without list markers, quotes and emphasis around it. */
  while (line < line_end && strchr("-*>`\"' ", *line))
    line++;
  while (line_end > line && strchr("`\"'* ", line_end[-1]))
    line_end--;
  size_t n = (size_t)(line_end - line);
  bool period = n > 0 && line[n - 1] == '.';
  if (n + !period > PROPOSAL_RULE_MAX || n < 12 || strncmp(line, "You cannot ", 11) != 0)
    return 0;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)line[i] < ' ')
      return 0;
  memcpy(ret, line, n);
  if (!period)
    ret[n++] = '.';
  ret[n] = '\0';
  return 1;
}

int llm_skill_dedup_prompt(const char *rule, json_t *rules, char **ret_user, char *err,
                           size_t errlen) {
  struct ltext list = {0};
  size_t i;
  json_t *r;
  json_array_foreach(rules, i, r) {
    if (i == LLM_SKILL_DEDUP_MAX)
      break;
    const char *text = json_string_value(json_object_get(r, "rule"));
    ltext_printf(&list, "%zu. %s\n", i + 1, text ? text : "");
  }
  while (list.len > 0 && list.s[list.len - 1] == '\n')
    list.s[--list.len] = '\0';
  int rc = -1;
  if (!list.oom) {
    struct tvar vars[] = {{"rules", ltext_str(&list)}, {"rule", rule}};
    rc = render("skill_dedup.txt", vars, N_VARS(vars), ret_user, err, errlen);
  } else {
    snprintf(err, errlen, "out of memory building the dedup prompt");
  }
  ltext_clear(&list);
  return rc;
}

size_t llm_skill_parse_dedup(const char *answer, size_t n) {
  const char *open = answer ? strchr(answer, '{') : NULL;
  const char *close = answer ? strrchr(answer, '}') : NULL;
  if (!open || !close || close < open)
    return 0;
  json_t *doc = json_loadb(open, (size_t)(close - open + 1), 0, NULL);
  json_t *dup = json_object_get(doc, "duplicate"), *match = json_object_get(doc, "match");
  json_t *confidence = json_object_get(doc, "confidence");
  size_t index = 0;
  if (json_is_true(dup) && json_is_integer(match) && json_integer_value(match) >= 1 &&
      (size_t)json_integer_value(match) <= n && (size_t)json_integer_value(match) <= LLM_SKILL_DEDUP_MAX &&
      (!json_is_number(confidence) || json_number_value(confidence) >= 0.5))
    index = (size_t)json_integer_value(match);
  json_decref(doc);
  return index;
}

long llm_skill_same_text(const char *rule, json_t *rules) {
  size_t i;
  json_t *r;
  json_array_foreach(rules, i, r) {
    const char *text = json_string_value(json_object_get(r, "rule"));
    if (text && strcasecmp(text, rule) == 0)
      return (long)i;
  }
  return -1;
}
