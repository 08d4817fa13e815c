/* The skill memory without an LLM (AdaExplore's rules, docs/architecture.md "Skill
 * memory"): the normalized signature failures are grouped by, which failures count, and
 * the rule a group becomes: a templated sentence and, where the failures tie to one knob
 * setting, a builtin constraint. Pure functions over JSON; engine/skills.c calls them. */
#ifndef OPFORGE_ENGINE_SKILLS_RULE_H
#define OPFORGE_ENGINE_SKILLS_RULE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "store/skills_validate.h"

#define SKILLS_GROUP_TASKS 3  /* distinct tasks a signature's group needs to become a rule */
#define SKILLS_MIN_SCORE 3    /* rules scored this or more reach the proposers */

/* The normalized signature of a failure into out (outlen bytes, at most
 * SKILL_SIGNATURE_MAX used): the class alone for correctness (mismatch classes), timeout
 * and crash failures; otherwise "<class>: <text>", where text is the failure's first
 * error line (for compile failures the line of NVRTC's "error:", after it) without a
 * program's "step i (region k): " prefix, with quoted text and identifiers (words with
 * '_', digits or inner capitals) as <id>, numbers as <n>, other words in lower case and
 * blanks collapsed; CUDA error names (CUDA_ERROR_*, cudaError*) are kept. class NULL or ""
 * is the stage; any argument may be NULL. */
void skills_signature(const char *stage, const char *cls, const char *message, char *out,
                      size_t outlen);

/* True for the numeric mismatches the extraction prompt skips (AdaExplore learns from
 * compile and runtime errors only): correctness/mismatch, correctness/robust_mismatch and
 * correctness/accuracy_budget. */
bool skills_numeric_mismatch(const char *cls);

/* True when a failure of stage is the candidate's to learn from: not a proposer's own
 * refusal (parse) and not the machine's (protocol, profile). */
bool skills_learns_from(const char *stage);

/* The constraint a group of failures ties to, or NULL (caller owns). examples is the
 * group ([{"knobs","moved","features"}...]), contrast the knob sets of correct candidates
 * of the same tasks and family (may be NULL). The knob settings every failure shares, less
 * those a correct candidate also had, narrowed to the knobs the failures' strategies moved
 * when any of those remain, must come down to exactly one: the constraint forbids it
 * ("eq") in the family, and for VEC also only where the inner size is not a multiple of
 * it when that held for every failure. */
json_t *skills_group_constraint(json_t *examples, json_t *contrast, const char *family);

/* The templated sentence of a grouped rule into out: from the constraint when there is
 * one ("You cannot use VEC=4 in softmax kernels when the inner size is not a multiple of
 * 4."), else from the signature's class and text. Always passes skill_rule_valid. */
void skills_rule_sentence(const json_t *constraint, const char *signature, const char *family,
                          char out[SKILL_RULE_MAX + 1]);

#endif
