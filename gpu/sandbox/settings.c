/* The sandbox's settings (see gpu/sandbox.h): defaults, the mode's names and the check of
 * --sandbox-env entries. */
#include "gpu/sandbox/internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

void sandbox_settings_defaults(struct sandbox_settings *s) {
  memset(s, 0, sizeof *s);
  s->mode = SANDBOX_AUTO;
  s->scratch_mb = 4096;
  s->max_procs = 4096;
  s->max_files = 4096;
}

int sandbox_parse_mode(const char *text, enum sandbox_mode *ret_mode) {
  static const struct {
    const char *name;
    enum sandbox_mode mode;
  } modes[] = {{"auto", SANDBOX_AUTO}, {"bwrap", SANDBOX_BWRAP}, {"none", SANDBOX_NONE}};
  for (size_t i = 0; text && i < sizeof modes / sizeof modes[0]; i++)
    if (strcmp(text, modes[i].name) == 0) {
      *ret_mode = modes[i].mode;
      return 0;
    }
  return -1;
}

const char *sandbox_mode_name(enum sandbox_mode mode) {
  switch (mode) {
  case SANDBOX_AUTO: return "auto";
  case SANDBOX_BWRAP: return "bwrap";
  case SANDBOX_NONE: return "none";
  }
  return "unknown";
}

int sandbox_check_env_name(const char *name, char *why, size_t whylen) {
  size_t len = strlen(name);
  size_t body = len > 0 && name[len - 1] == '*' ? len - 1 : len;
  if (body == 0 || len >= SANDBOX_ENV_NAME_MAX) {
    snprintf(why, whylen, "expected a variable name or PREFIX*, got '%s'", name);
    return -1;
  }
  for (size_t i = 0; i < body; i++) {
    unsigned char c = (unsigned char)name[i];
    if (!(isalnum(c) || c == '_') || (i == 0 && isdigit(c))) {
      snprintf(why, whylen, "expected a variable name or PREFIX*, got '%s'", name);
      return -1;
    }
  }
  if (sandbox_env_is_secret(name, body)) {
    snprintf(why, whylen, "'%s' names a secret (OPFORGE_*, *KEY*, *TOKEN*, *SECRET*, "
             "*PASSW*, *CREDENTIAL*, *AUTH*): the sandbox never passes those", name);
    return -1;
  }
  return 0;
}
