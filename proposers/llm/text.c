/* A growing text buffer and the {{name}} templates of the LLM prompts (see text.h). */
#include "proposers/llm/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/embedded.h"

extern const struct embedded_file opforge_llm_prompts[];

void ltext_add(struct ltext *t, const char *s, size_t n) {
  if (t->oom)
    return;
  if (t->len + n + 1 > t->cap) {
    size_t want = t->cap ? t->cap : 1024;
    while (want < t->len + n + 1)
      want *= 2;
    char *grown = realloc(t->s, want);
    if (!grown) {
      t->oom = true;
      return;
    }
    t->s = grown;
    t->cap = want;
  }
  memcpy(t->s + t->len, s, n);
  t->len += n;
  t->s[t->len] = '\0';
}

void ltext_puts(struct ltext *t, const char *s) {
  ltext_add(t, s, strlen(s));
}

void ltext_printf(struct ltext *t, const char *fmt, ...) {
  char small[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) {
    t->oom = true;
    return;
  }
  if ((size_t)n < sizeof small) {
    ltext_add(t, small, (size_t)n);
    return;
  }
  char *big = malloc((size_t)n + 1);
  if (!big) {
    t->oom = true;
    return;
  }
  va_start(ap, fmt);
  vsnprintf(big, (size_t)n + 1, fmt, ap);
  va_end(ap);
  ltext_add(t, big, (size_t)n);
  free(big);
}

const char *ltext_str(const struct ltext *t) {
  return t->s && !t->oom ? t->s : "";
}

char *ltext_take(struct ltext *t) {
  char *s = t->oom ? NULL : t->s;
  if (!s && !t->oom)
    s = strdup("");
  if (t->oom)
    free(t->s);
  *t = (struct ltext){0};
  return s;
}

void ltext_clear(struct ltext *t) {
  free(t->s);
  *t = (struct ltext){0};
}

static const struct tvar *find_var(const struct tvar *vars, size_t n, const char *name,
                                   size_t len) {
  for (size_t i = 0; i < n; i++)
    if (strlen(vars[i].name) == len && strncmp(vars[i].name, name, len) == 0)
      return &vars[i];
  return NULL;
}

int llm_template_render(const char *tmpl, const struct tvar *vars, size_t n, struct ltext *out,
                    char *err, size_t errlen) {
  const char *p = tmpl;
  while (*p) {
    const char *open = strstr(p, "{{");
    if (!open) {
      ltext_puts(out, p);
      break;
    }
    const char *close = strstr(open + 2, "}}");
    if (!close) {
      snprintf(err, errlen, "template: '{{' without '}}'");
      return -1;
    }
    const struct tvar *v = find_var(vars, n, open + 2, (size_t)(close - open - 2));
    if (!v) {
      snprintf(err, errlen, "template: no value for {{%.*s}}", (int)(close - open - 2),
               open + 2);
      return -1;
    }
    const char *value = v->value ? v->value : "";
    bool line_start = open == tmpl || open[-1] == '\n';
    bool alone = line_start && (close[2] == '\n' || close[2] == '\0');
    ltext_add(out, p, (size_t)(open - p));
    p = close + 2;
    if (alone && !*value) {
      if (*p == '\n')
        p++;
      continue;
    }
    ltext_puts(out, value);
  }
  return 0;
}

const char *llm_prompt_template(const char *name) {
  for (const struct embedded_file *f = opforge_llm_prompts; f->name; f++)
    if (strcmp(f->name, name) == 0)
      return f->data;
  return NULL;
}
