/* The failure record shared by compile, plan, load, launch and timing. */
#include "gpu/failure.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/utf8.h"

void gpu_failure_set(struct gpu_failure *f, const char *stage, const char *cls,
                     const char *fmt, ...) {
  va_list ap;
  f->set = true;
  f->sticky = false;
  snprintf(f->stage, sizeof f->stage, "%s", stage);
  snprintf(f->cls, sizeof f->cls, "%s", cls);
  va_start(ap, fmt);
  vsnprintf(f->message, sizeof f->message, fmt, ap);
  va_end(ap);
}

void gpu_failure_clear(struct gpu_failure *f) {
  memset(f, 0, sizeof *f);
}

json_t *gpu_failure_to_json(const struct gpu_failure *f) {
  if (!f->set)
    return json_null();
  /* Messages quote client text (kernel names, option strings) and may have been cut
   * mid-character by snprintf; Jansson rejects invalid UTF-8. */
  char *msg = utf8_sanitize(f->message, strlen(f->message));
  if (!msg)
    return NULL;
  json_t *o = json_pack("{s:s, s:s, s:s}", "stage", f->stage, "class", f->cls,
                        "message", msg);
  free(msg);
  return o;
}
