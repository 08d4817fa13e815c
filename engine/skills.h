/* The skill memory in the loop (AdaExplore, docs/architecture.md "Skill memory"): which
 * rules reach a proposal, the refusals of builtin constraints, what a failed step records
 * (through the LLM proposer's extraction and dedup prompts, or by grouping signatures), and
 * the adaptation pass over finished tasks behind POST /v1/skills/adapt. */
#ifndef OPFORGE_ENGINE_SKILLS_H
#define OPFORGE_ENGINE_SKILLS_H

#include <jansson.h>
#include <stdbool.h>

#include "base/outcome.h"
#include "engine/skills_rule.h"
#include "proposers/proposer.h"
#include "store/skills.h"

struct llm_settings;
struct partition;

/* One task's skill memory while its loop runs. */
struct skill_run {
  bool on;           /* the task's search.skills (true unless it says false) */
  json_t *active;    /* owned: the enabled rules scored SKILLS_MIN_SCORE or more */
  json_t *refusals;  /* owned: {"<id>": n} refusals not yet committed */
};

/* True unless the task's options (borrowed) set "search": {"skills": false}. */
bool skills_enabled(json_t *options);

/* Starts the skill state of a task with options (borrowed). */
void skills_run_init(struct skill_run *sr, json_t *options);

/* Frees what sr owns. Accepts a zeroed struct. */
void skills_run_clear(struct skill_run *sr);

/* Reads the active rules again (once a step). 0, or -1 on a store failure. Does nothing
 * when the skill memory is off. */
int skills_load(struct store *s, struct skill_run *sr);

/* The active rules that apply to a region of family (theirs, or none), for
 * proposal_request.skills: [{"id","rule","score","constraint"}] (caller owns), or NULL
 * when the skill memory is off. */
json_t *skills_for(const struct skill_run *sr, const char *family);

/* Counts the refusal a proposer's failure names (skill_refusal_id), if any. */
void skills_note_refusal(struct skill_run *sr, json_t *failure);

/* Commits the refusals not yet committed (at the end of a run). */
int skills_flush_refusals(struct store *s, struct skill_run *sr);

/* One failed evaluation, as the step (or the adaptation pass) saw it; borrowed. */
struct skills_failure {
  const char *task_id, *candidate_id;
  const char *family;         /* the task's family, for a whole-task candidate */
  json_t *candidate;          /* the evaluated candidate (source and options, or program) */
  json_t *result;             /* its result: failure {stage, class, message}, compile.log */
  const struct partition *partition; /* the task's regions (the failing one's profile
                                 gives the features), or NULL */
  json_t *task_profile;       /* the task's profile, for a whole-task candidate; may be NULL */
  const char *moved;          /* the knob the step's strategy moved, or NULL */
  json_t *task_options;
  struct proposer *proposer;  /* reflects (an LLM) when it can; else failures are grouped */
  struct proposal_usage *usage;
  struct proposal_limit *limit;
};

/* What one failure records: the update for store_skills_record (or the step commit), and
 * what it owns. */
struct skills_step {
  struct skill_update update;
  struct skill_result result;
  char signature[SKILL_SIGNATURE_MAX + 1];
  char rule[SKILL_RULE_MAX + 1];
  char family[32];
  char *message;
  json_t *knobs, *features, *refusals;
};

/* Prepares what failure f teaches: nothing for a correct result or a failure the memory
 * skips; with a reflecting proposer, its verdict (the calls' cost goes to f->usage);
 * otherwise the failure's group. The refusals of sr are moved into it. Release with
 * skills_step_clear. */
void skills_step_prepare(struct skill_run *sr, struct store *s, const struct skills_failure *f,
                         struct skills_step *ret);
void skills_step_clear(struct skills_step *st);

/* The adaptation pass of POST /v1/skills/adapt over the failures of finished tasks (ids
 * borrowed): through the LLM proposer when llm (NULL: the OPFORGE_LLM_* variables) has an
 * endpoint (at most
 * SKILLS_ADAPT_LLM_MAX failures a pass), else by grouping. *ret_report (caller owns):
 * {"method","tasks","failures","examined","skipped","added":[skill],"confirmed":[skill]}.
 * STORE_NOT_FOUND with ret_missing (may be NULL) set to the id of a task that does not
 * exist, STORE_CONFLICT with it set to one not finished yet. */
#define SKILLS_ADAPT_LLM_MAX 16
int skills_adapt(struct store *s, const struct llm_settings *llm, json_t *task_ids,
                 json_t **ret_report, const char **ret_missing);

#endif
