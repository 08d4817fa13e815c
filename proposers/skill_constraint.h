/* The builtin constraints of skill rules as proposers apply them: a region's features, a
 * candidate's knobs, and whether a constraint forbids a knob set. The vocabulary is the
 * store's (store/skills_validate.h; tests/unit/test_skills.c checks that both agree); a
 * constraint is taken as valid, and anything this code does not know makes it not apply. */
#ifndef OPFORGE_SKILL_CONSTRAINT_H
#define OPFORGE_SKILL_CONSTRAINT_H

#include <jansson.h>
#include <stdbool.h>

/* The features a constraint's "when" may test, from a (region) profile: "inner", the last
 * dimension of its first input, and "numel", the elements of its first output. Returns an
 * object with the features it could read (caller owns; {} when none). */
json_t *skill_profile_features(json_t *profile);

/* The knobs of -D options (["-DVEC=4", "-DMODE_ONLINE=1"]; borrowed) as
 * {"VEC": 4, "MODE": "online"} (caller owns; {} when none). */
json_t *skill_knobs_of_options(json_t *options);

/* True when constraint (borrowed; {"knob","op","value","when"}) forbids the knobs
 * ({"VEC": 4, "MODE": "online"}; an absent numeric knob is 0, an absent MODE "") in a
 * region of family with features (skill_profile_features). */
bool skill_constraint_forbids(const json_t *constraint, const char *family, json_t *features,
                              const json_t *knobs);

/* The first rule of skills ([{"id","rule","score","constraint"}...]; borrowed) whose
 * constraint forbids knobs in a region of family and profile; NULL when none (borrowed
 * from skills). */
json_t *skill_refusing_rule(json_t *skills, const char *family, json_t *profile,
                            const json_t *knobs);

/* A "parse/invalid_move" failure that names the refusing rule (caller owns):
 * {"stage":"parse","class":"parse/invalid_move","message":"skill rule 7 refuses VEC=4: You
 * cannot ...","skill":7}. The loop counts such refusals on the rule. */
json_t *skill_refusal_failure(json_t *rule);

/* The id of the rule that refused the move of failure (a skill_refusal_failure), else 0. */
long long skill_refusal_id(json_t *failure);

#endif
