/* A growing text buffer and the {{name}} templates of the LLM prompts
 * (the .txt files of proposers/llm/prompts/, embedded at build time). */
#ifndef OPFORGE_LLM_TEXT_H
#define OPFORGE_LLM_TEXT_H

#include <stdbool.h>
#include <stddef.h>

/* A NUL-terminated text that grows; zero-initialized is empty. Appends after a failed
 * allocation are dropped and set oom, so a caller checks once at the end. The caller
 * frees s (ltext_clear). */
struct ltext {
  char *s;
  size_t len, cap;
  bool oom;
};

void ltext_add(struct ltext *t, const char *s, size_t n);
void ltext_puts(struct ltext *t, const char *s);
__attribute__((format(printf, 2, 3))) void ltext_printf(struct ltext *t, const char *fmt, ...);
/* The text so far ("" when empty); borrowed. */
const char *ltext_str(const struct ltext *t);
/* Takes the text's string (caller frees; NULL after an allocation failure) and resets t. */
char *ltext_take(struct ltext *t);
void ltext_clear(struct ltext *t);

/* One template variable: a {{name}} and the text put in its place (borrowed). */
struct tvar {
  const char *name;
  const char *value;
};

/* Appends tmpl with every {{name}} replaced by its value from vars (n of them), values
 * inserted verbatim (never expanded again). A line that holds only a placeholder whose
 * value is empty is dropped with its newline, so optional sections leave no gap.
 * Returns 0, or -1 with err naming a placeholder that vars lack. */
int llm_template_render(const char *tmpl, const struct tvar *vars, size_t n, struct ltext *out,
                    char *err, size_t errlen);

/* The embedded prompt template called name ("large.txt"), or NULL. Static storage. */
const char *llm_prompt_template(const char *name);

#endif
