/* The builtin proposer: matches the task to a family, turns the chosen strategy's knob
 * move into knobs, and generates the candidate from the family's template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/propose.h"
#include "proposers/proposer.h"
#include "proposers/skill_constraint.h"

static int fail(json_t **ret_failure, const char *cls, const char *message) {
  *ret_failure = json_pack("{s:s, s:s, s:s}", "stage", "parse", "class", cls, "message", message);
  return -1;
}

int builtin_match(json_t *profile, const struct builtin_family **ret_family, json_t **ret_match,
                  char *why, size_t whylen) {
  char reasons[1024] = "";
  size_t used = 0;
  for (size_t i = 0; builtin_families[i]; i++) {
    char one[512] = "";
    json_t *match = NULL;
    int rc = builtin_families[i]->match(profile, &match, one, sizeof one);
    if (rc == 1) {
      *ret_family = builtin_families[i];
      *ret_match = match;
      return 0;
    }
    if (rc < 0 && used < sizeof reasons)
      used += (size_t)snprintf(reasons + used, sizeof reasons - used, "%s%s: %s",
                               used ? "; " : "", builtin_families[i]->name, one);
  }
  snprintf(why, whylen, "no builtin family matches this task%s%s; use the llm proposer",
           used ? ": " : "", reasons);
  return -1;
}

/* The family defaults, overridden by the knobs of parent_options (a parent candidate's
 * -D options, borrowed; NULL when the step regenerates). */
static void starting_knobs(const struct builtin_family *fam, json_t *match,
                           json_t *parent_options, struct knob_set *ret) {
  fam->defaults(match, ret);
  if (!parent_options)
    return;
  struct knob_set parsed = *ret;
  size_t i;
  json_t *opt;
  json_array_foreach(parent_options, i, opt) {
    const char *text = json_string_value(opt);
    char name[16];
    int value;
    if (text && sscanf(text, "-D%15[A-Z]=%d", name, &value) == 2) {
      json_t *move = json_pack("{s:s, s:s, s:i}", "knob", name, "op", "set", "value", value);
      char why[128];
      knob_apply_move(&parsed, move, why, sizeof why);
      json_decref(move);
    } else if (text && sscanf(text, "-DMODE_%15[A-Z0-9_]=1", name) == 1) {
      for (char *c = name; *c; c++)
        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
      snprintf(parsed.mode, sizeof parsed.mode, "%s", name);
    }
  }
  *ret = parsed;
}

/* builtin_propose_knobs with the skill rules (may be NULL) checked after the family's own
 * check, before anything is generated: a rule whose constraint the knobs break refuses the
 * move (*ret_refused, borrowed from skills). */
static int propose_knobs(json_t *profile, const json_t *knob_move, json_t *parent_options,
                         json_t *skills, json_t **ret_refused, json_t **ret_candidate,
                         char *why, size_t whylen, bool *ret_unsupported) {
  const struct builtin_family *fam = NULL;
  json_t *match = NULL;
  *ret_unsupported = false;
  if (builtin_match(profile, &fam, &match, why, whylen) != 0) {
    *ret_unsupported = true;
    return -1;
  }
  struct knob_set knobs;
  starting_knobs(fam, match, parent_options, &knobs);
  int rc = 0;
  if (knob_move && json_is_object(knob_move))
    rc = knob_apply_move(&knobs, knob_move, why, whylen);
  if (rc == 0)
    rc = fam->check(match, &knobs, why, whylen);
  if (rc == 0 && json_array_size(skills) > 0) {
    json_t *set = knob_to_json(&knobs);
    json_t *rule = set ? skill_refusing_rule(skills, fam->name, profile, set) : NULL;
    json_decref(set);
    if (rule) {
      *ret_refused = rule;
      snprintf(why, whylen, "a skill rule refuses these knobs");
      rc = -1;
    }
  }
  if (rc == 0)
    rc = fam->generate(match, &knobs, ret_candidate, why, whylen);
  json_decref(match);
  return rc;
}

int builtin_propose_knobs(json_t *profile, const json_t *knob_move, json_t *parent_options,
                          json_t **ret_candidate, char *why, size_t whylen, bool *ret_unsupported) {
  json_t *refused = NULL;
  return propose_knobs(profile, knob_move, parent_options, NULL, &refused, ret_candidate, why,
                       whylen, ret_unsupported);
}

/* Proposes from the family defaults (large step) or the parent's knobs (small step),
 * then the strategy's knob move; a move the request's skill rules refuse is a move that
 * does not fit (parse/invalid_move naming the rule). */
static int builtin_propose(const struct proposal_request *req, bool small,
                           json_t **ret_candidate, json_t **ret_failure) {
  char why[1024];
  bool unsupported;
  json_t *refused = NULL;
  json_t *move = json_object_get(req->strategy_node, "knob_move");
  json_t *parent_options = small && req->parent ? json_object_get(req->parent, "options") : NULL;
  if (propose_knobs(req->profile, move, parent_options, req->skills, &refused, ret_candidate,
                    why, sizeof why, &unsupported) == 0)
    return 0;
  if (refused) {
    *ret_failure = skill_refusal_failure(refused);
    return -1;
  }
  return fail(ret_failure, unsupported ? "parse/unsupported_by_builtin" : "parse/invalid_move",
              why);
}

static int builtin_large(void *self, const struct proposal_request *req, json_t **ret_candidate,
                         json_t **ret_failure) {
  (void)self;
  return builtin_propose(req, false, ret_candidate, ret_failure);
}

static int builtin_small(void *self, const struct proposal_request *req, json_t **ret_candidate,
                         json_t **ret_failure) {
  (void)self;
  return builtin_propose(req, true, ret_candidate, ret_failure);
}

/* Supported when a family matches; the family is the one HTAM learns under. */
static int builtin_supports(void *self, json_t *profile, const char **ret_family, char *why,
                            size_t whylen) {
  (void)self;
  const struct builtin_family *fam = NULL;
  json_t *match = NULL;
  if (builtin_match(profile, &fam, &match, why, whylen) != 0)
    return -1;
  json_decref(match);
  *ret_family = fam->name;
  return 0;
}

int proposer_builtin_new(struct proposer *ret) {
  *ret = (struct proposer){.name = "builtin", .starts_every_region = true,
                           .supports = builtin_supports,
                           .propose_large = builtin_large, .propose_small = builtin_small};
  return 0;
}
