/* The builtin families in matching order (first match wins), and the embedded templates. */
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/families.h"
#include "base/embedded.h"

extern const struct embedded_file opforge_builtin_templates[];

const struct builtin_family *const builtin_families[] = {
  /* Families are added here as their modules land (see families.h). */
  BUILTIN_FAMILY_LIST
  NULL,
};

const char *builtin_template(const char *name) {
  for (const struct embedded_file *f = opforge_builtin_templates; f->name; f++)
    if (strcmp(f->name, name) == 0)
      return f->data;
  return NULL;
}
