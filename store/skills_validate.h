/* The rules of skill records (AdaExplore's skill memory): their bounds, the vocabulary of
 * builtin constraints, and the checks of a rule body and of a whole import document. A
 * problem is reported as the memory records' are (store/memory_validate.h), so the API
 * answers both alike. */
#ifndef OPFORGE_STORE_SKILLS_VALIDATE_H
#define OPFORGE_STORE_SKILLS_VALIDATE_H

#include <jansson.h>
#include <stdbool.h>

#include "store/memory_validate.h"

#define SKILL_RULE_PREFIX "You cannot "
#define SKILL_RULE_MIN 13               /* "You cannot x." */
#define SKILL_RULE_MAX 300              /* bytes of a rule's sentence */
#define SKILL_SCORE_MAX 1000000
#define SKILL_REFUSALS_MAX ((json_int_t)1 << 53)
#define SKILL_SIGNATURE_MAX 200         /* a normalized failure signature */
#define SKILL_CLASS_MAX 96              /* a failure class (base/outcome.h) */
#define SKILL_MESSAGE_MAX 512           /* the excerpt of a failure's message kept */
#define SKILL_EXAMPLES_KEEP 20          /* newest examples kept per rule */
#define SKILL_GROUP_KEEP 20             /* newest examples kept per waiting group */
#define SKILL_LOOSE_KEEP 5000           /* examples without a rule kept in all */
#define SKILL_MAX_IMPORT 4096           /* rules an import may hold */
#define SKILL_MODE_MAX 23               /* a MODE value: [a-z0-9_]{1,23} */
#define SKILL_KNOB_VALUE_MAX 1024       /* a numeric knob value: 0..1024 */
#define SKILL_WHEN_MAX 4                /* conditions in a constraint's "when" */
#define SKILL_MULTIPLE_MAX 65536        /* (not_)multiple_of: 2..65536 */
#define SKILL_BOUND_MAX ((json_int_t)1 << 40) /* lt, ge: 1..2^40 */

/* The constraint vocabulary (NULL-terminated, static):
 *   {"knob": K, "op": O, "value": V, "when": {...}}   ("when" optional)
 * K is a builtin template knob; O compares the knob's value with V (MODE takes eq and ne
 * and a mode name, the others an integer 0..1024, 0 meaning unset); "when" narrows where
 * it holds: "family" (an op family) and "<feature>_<predicate>" conditions over the
 * region's shape, all of which must hold. A feature the region does not have makes the
 * constraint not apply. */
extern const char *const skill_knobs[];      /* BLOCK VEC ITEMS ROWS BM BN BK TM TN STAGES
                                                UNROLL MINB SPLIT MODE */
extern const char *const skill_ops[];        /* eq ne gt ge lt le */
extern const char *const skill_features[];   /* inner: the last dimension of the region's
                                                first input; numel: the elements of its
                                                first output */
extern const char *const skill_predicates[]; /* multiple_of not_multiple_of lt ge */

/* True when rule is a sentence of SKILL_RULE_MIN..SKILL_RULE_MAX printable ASCII
 * characters that starts with SKILL_RULE_PREFIX and ends with '.'. */
bool skill_rule_valid(const char *rule);

/* Checks a constraint (null or the object above); prefix and key name it as in
 * memory_check_*. Returns 0, or -1 with *ret_why filled. */
int skill_check_constraint(const json_t *v, const char *prefix, const char *key,
                           struct memory_invalid *ret_why);

/* Checks a rule body for mode: MEMORY_CREATE (rule required; score, family, enabled,
 * constraint optional), MEMORY_PATCH (the same, all optional) or MEMORY_IMPORT (also id,
 * origin, signature, refusals, examples and timestamps). Returns 0, or -1 with *ret_why
 * filled. */
int skill_check(const json_t *obj, enum memory_mode mode, const char *prefix,
                struct memory_invalid *ret_why);

/* Checks an import document {"version": 1, "exported_at"?, "skills": [...]}: every rule,
 * unique ids, one rule per (signature, family), each candidate_id in one example at most.
 * Returns 0, -1 with *ret_why filled, or -ENOMEM (logged). */
int skill_check_document(const json_t *doc, struct memory_invalid *ret_why);

#endif
