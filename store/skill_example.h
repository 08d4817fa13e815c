/* One failure that the skill memory learns from (struct skill_example), apart from
 * store/skills.h so that the row helpers (store/skills_rows.h) use it without including
 * the whole skills interface. */
#ifndef OPFORGE_STORE_SKILL_EXAMPLE_H
#define OPFORGE_STORE_SKILL_EXAMPLE_H

#include <jansson.h>

#include "store/skills_validate.h"

/* One failure (strings and JSON borrowed; NULL where unknown). */
struct skill_example {
  const char *task_id, *candidate_id;
  const char *family;         /* the op family of the region that failed */
  const char *failure_class;  /* base/outcome.h's class (or the stage) */
  const char *signature;      /* the normalized signature (engine/skills_rule.h) */
  const char *message;        /* the failure's message (cut to SKILL_MESSAGE_MAX) */
  const char *moved;          /* the knob the step's strategy moved */
  json_t *knobs;              /* the candidate's knobs {"VEC":4,"MODE":"online"} */
  json_t *features;           /* the region's features {"inner":512,"numel":131072} */
};

#endif
