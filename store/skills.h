/* The skill memory in the store (AdaExplore): rules learned from recurring failures, with
 * the failures they came from; their CRUD, export and import, and what one step (or one
 * failure of an adaptation pass) records. The rules records must follow are in
 * store/skills_validate.h.
 *
 * Shapes (Jansson objects; the API serves them as they are):
 *   skill:   {"id","rule","score","family"|null,"enabled","constraint"|null,
 *             "origin":"grouping|llm|user|import","signature"|null,"refusals",
 *             "example_count","created_at","updated_at"}
 *            (+ "examples": the newest SKILL_EXAMPLES_KEEP, newest first, from
 *            store_skill_get)
 *   example: {"task_id"|null,"candidate_id"|null,"class","signature","message","created_at"}
 * The export document is {"version":1,"exported_at","skills":[...]}: the same records
 * without example_count, each with all its examples, oldest first. Import takes that
 * document, or one whose records have only "rule" and any of the editable keys. */
#ifndef OPFORGE_STORE_SKILLS_H
#define OPFORGE_STORE_SKILLS_H

#include <jansson.h>
#include <stdbool.h>

#include "store/skill_example.h"
#include "store/skills_validate.h"
#include "store/status.h"

/* ---- rules (store/skills.c) ---- */

/* The rules in creation order, optionally only those of family (NULL: any; a rule without
 * a family is listed under every family) and only enabled or disabled ones (enabled < 0:
 * both). *ret_items is an array (caller owns). */
int store_skills_list(struct store *s, const char *family, int enabled, json_t **ret_items);

/* One rule with its newest examples; STORE_NOT_FOUND when there is none. */
int store_skill_get(struct store *s, long long id, json_t **ret_skill);

/* Creates a rule from a MEMORY_CREATE body (borrowed; checked by skill_check): score 1,
 * enabled and no family unless the body says, origin "user". */
int store_skill_create(struct store *s, const json_t *body, json_t **ret_skill);

/* Applies a MEMORY_PATCH body (rule, score, family, enabled, constraint). STORE_NOT_FOUND
 * when there is no such rule; STORE_CONFLICT when the new family gives a grouped rule the
 * signature and family of another (why names "family"). */
int store_skill_update(struct store *s, long long id, const json_t *body,
                       struct memory_invalid *why, json_t **ret_skill);

/* Deletes a rule and its examples. */
int store_skill_delete(struct store *s, long long id);

/* The enabled rules scored min_score or more, highest score first, each
 * {"id","rule","score","family","constraint"} (caller owns the array): what proposers get. */
int store_skills_active(struct store *s, long long min_score, json_t **ret_items);

/* ---- the whole skill memory (store/skills_io.c) ---- */

/* The export document described at the top; caller owns it. */
int store_skills_export(struct store *s, json_t **ret_doc);

/* Checks doc (borrowed) with skill_check_document, then replaces every rule and its
 * examples with the document's in one transaction (examples still waiting in a group are
 * kept). STORE_INVALID with *ret_why filled when it is refused; nothing changes then. On
 * STORE_OK *ret_counts (may be NULL; caller owns) is {"skills","examples"}. */
int store_skills_import(struct store *s, const json_t *doc, struct memory_invalid *ret_why,
                        json_t **ret_counts);

/* ---- what a failure teaches (store/skills_step.c) ---- */

/* Builds the rule of a group of failures that reached the task count: examples (borrowed)
 * is the group, oldest first, in the shape of struct skill_example plus "created_at".
 * Returns {"rule": sentence, "constraint": object|null} (caller owns), or NULL when no
 * rule can be made (the group then keeps waiting). It runs inside the store's
 * transaction and may read the store (s) there. */
typedef json_t *(*skill_group_fn)(void *ctx, struct store *s, json_t *examples,
                                  const char *signature, const char *family);

enum skill_action {
  SKILL_ACTION_NONE,     /* nothing but the refusals */
  SKILL_ACTION_EXAMINED, /* the failure was looked at and taught nothing ("no guidance") */
  SKILL_ACTION_GROUP,    /* into its group (signature, family); a rule of that group gains 1 */
  SKILL_ACTION_NEW,      /* a new rule of score 1 (an identical one gains 1 instead) */
  SKILL_ACTION_CONFIRM,  /* rule match_id gains 1 (made NEW when it is gone) */
};

/* What recording one failure did. */
enum skill_outcome {
  SKILL_OUTCOME_NONE,      /* nothing recorded */
  SKILL_OUTCOME_SEEN,      /* the candidate was examined before: nothing changed */
  SKILL_OUTCOME_EXAMINED,  /* kept as examined, no rule */
  SKILL_OUTCOME_WAITING,   /* waits in its group */
  SKILL_OUTCOME_ADDED,     /* a rule was made (skill_id) */
  SKILL_OUTCOME_CONFIRMED, /* a rule gained 1 (skill_id) */
};

struct skill_result {
  enum skill_outcome outcome;
  long long skill_id;       /* ADDED, CONFIRMED */
};

struct skill_update {
  enum skill_action action;
  struct skill_example example;
  const char *rule;          /* NEW, CONFIRM: the sentence (skill_rule_valid) */
  const char *origin;        /* NEW: "llm" (NULL: "llm") */
  long long match_id;        /* CONFIRM */
  int group_tasks;           /* GROUP: distinct tasks that make a rule (>= 1) */
  skill_group_fn make_rule;  /* GROUP */
  void *make_rule_ctx;
  json_t *refusals;          /* {"<id>": n} refusals to add to existing rules; may be NULL */
  struct skill_result *result; /* may be NULL; set by the attempt that commits */
};

/* Records u; joins the caller's store_transaction when called inside one (the step
 * commit), else runs in one of its own. A candidate_id already examined records nothing
 * (SKILL_OUTCOME_SEEN), so a failure never counts twice. STORE_INVALID for a malformed
 * update (a rule that fails skill_rule_valid, a missing signature or class). */
int store_skills_record(struct store *s, const struct skill_update *u);

/* Whether candidate_id was examined already (*ret_seen). */
int store_skills_examined(struct store *s, const char *candidate_id, bool *ret_seen);

/* Adds refusals {"<id>": n} (borrowed) to the rules that still exist. */
int store_skills_add_refusals(struct store *s, json_t *refusals);

#endif
