/* The builtin proposer: matches the task to a family, turns the chosen strategy's knob
 * move into knobs, and generates the candidate from the family's template. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/propose.h"
#include "proposers/builtin/space.h"
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

/* The first rule of skills (may be NULL) whose constraint the knobs break, or NULL
 * (borrowed from skills). */
static json_t *refusing_rule(json_t *skills, const struct builtin_family *fam, json_t *profile,
                             const struct knob_set *k) {
  if (json_array_size(skills) == 0)
    return NULL;
  json_t *set = knob_to_json(k);
  json_t *rule = set ? skill_refusing_rule(skills, fam->name, profile, set) : NULL;
  json_decref(set);
  return rule;
}

/* How a proposal picks its knobs beyond the strategy's own move (docs/architecture.md,
 * "The builtin space"): the task's seed, the step and the strategy seed the draws. */
struct space_ctx {
  bool small;             /* a small step (from the parent's knobs) */
  uint64_t seed;          /* the draws' seed, before the starting point is hashed in */
};

/* Generates the first of the n points pts (in the order of a draw from rng) that no skill
 * rule refuses and whose plan fits the device; *ret_refused is the first rule met when
 * every point was refused by one. Returns 0, or -1 with why. */
static int generate_first_fitting(const struct builtin_space *sp, json_t *profile,
                                  struct knob_set *pts, size_t n, struct space_rng *rng,
                                  json_t *skills, json_t **ret_refused, json_t **ret_candidate,
                                  char *why, size_t whylen) {
  for (size_t i = n; i > 1; i--) { /* Fisher-Yates: the order of the draw */
    size_t j = (size_t)space_rng_below(rng, i);
    struct knob_set t = pts[i - 1];
    pts[i - 1] = pts[j];
    pts[j] = t;
  }
  json_t *first_rule = NULL;
  snprintf(why, whylen, "no point of the space fits");
  for (size_t i = 0; i < n; i++) {
    json_t *rule = refusing_rule(skills, sp->family, profile, &pts[i]);
    if (rule) {
      first_rule = first_rule ? first_rule : rule;
      continue;
    }
    json_t *cand = NULL;
    char one[512];
    if (sp->family->generate(sp->match, &pts[i], &cand, one, sizeof one) != 0) {
      snprintf(why, whylen, "%s", one);
      continue;
    }
    if (!space_fits_device(sp, cand, one, sizeof one)) {
      snprintf(why, whylen, "%s", one);
      json_decref(cand);
      continue;
    }
    *ret_candidate = cand;
    return 0;
  }
  if (first_rule) {
    *ret_refused = first_rule;
    snprintf(why, whylen, "a skill rule refuses these knobs");
  }
  return -1;
}

/* A "space_<kind>" strategy: a small step moves one knob of the kind from start to a
 * neighbouring grid value (one more knob of any kind where no single move is valid); a
 * large step samples a new point whose knobs of the kind are drawn uniformly, every other
 * knob keeping the defaults' value with probability 1/2. */
static int propose_space(const struct builtin_space *sp, json_t *profile, unsigned kinds,
                         const struct knob_set *start, const struct space_ctx *ctx,
                         json_t *skills, json_t **ret_refused, json_t **ret_candidate,
                         char *why, size_t whylen) {
  char key[SPACE_KEY_MAX];
  space_point_key(start, key, sizeof key);
  struct space_rng rng;
  space_rng_seed(&rng, space_hash(ctx->seed, key));
  struct knob_set *pts = NULL;
  size_t n = 0;
  if (ctx->small) {
    for (int changed = 1; changed <= 2 && n == 0; changed++) {
      free(pts);
      pts = NULL;
      if (space_neighbours(sp, start, kinds, changed, &pts, &n) != 0)
        return builtin_refuse(why, whylen, "out of memory");
    }
  } else {
    enum { LARGE_DRAWS = 16 };
    pts = calloc(LARGE_DRAWS, sizeof *pts);
    if (!pts)
      return builtin_refuse(why, whylen, "out of memory");
    for (int t = 0; t < LARGE_DRAWS; t++) {
      struct knob_set k;
      if (space_sample(sp, &rng, &sp->defaults, kinds, 0.5, &k) != 0)
        break;
      if (memcmp(&k, &sp->defaults, sizeof k) != 0)
        pts[n++] = k;
    }
  }
  int rc = n == 0 ? builtin_refuse(why, whylen, "the space has no %s point of this kind",
                                   ctx->small ? "neighbouring" : "new")
                  : generate_first_fitting(sp, profile, pts, n, &rng, skills, ret_refused,
                                           ret_candidate, why, whylen);
  free(pts);
  return rc;
}

/* A concrete move that the shapes refuse, repaired: the valid grid points that keep the
 * moved knob where the move put it and change one other knob to a neighbouring value. */
static int propose_repaired(const struct builtin_space *sp, json_t *profile, const char *knob,
                            const struct knob_set *moved, const struct space_ctx *ctx,
                            json_t *skills, json_t **ret_refused, json_t **ret_candidate,
                            char *why, size_t whylen) {
  struct knob_set *pts = NULL;
  size_t n = 0, kept = 0;
  if (space_neighbours(sp, moved, SPACE_ALL, 1, &pts, &n) != 0)
    return -1;
  for (size_t i = 0; i < n; i++) {
    bool same = strcmp(knob, "MODE") == 0
                    ? strcmp(pts[i].mode, moved->mode) == 0
                    : *knob_slot(&pts[i], knob) == *knob_slot((struct knob_set *)moved, knob);
    if (same)
      pts[kept++] = pts[i];
  }
  char key[SPACE_KEY_MAX];
  space_point_key(moved, key, sizeof key);
  struct space_rng rng;
  space_rng_seed(&rng, space_hash(ctx->seed, key));
  char mine[512];
  int rc = kept ? generate_first_fitting(sp, profile, pts, kept, &rng, skills, ret_refused,
                                         ret_candidate, mine, sizeof mine)
                : -1;
  if (rc != 0 && *ret_refused)
    snprintf(why, whylen, "%s", mine);
  free(pts);
  return rc;
}

/* builtin_propose_knobs with the skill rules (may be NULL) checked after the family's own
 * check, before anything is generated: a rule whose constraint the knobs break refuses the
 * move (*ret_refused, borrowed from skills). With ctx (NULL: the exact move only), a
 * "space_<kind>" strategy moves through the region's space, and a move the shapes refuse is
 * repaired by one more knob where the space has such a point. */
static int propose_knobs(json_t *profile, const json_t *knob_move, json_t *parent_options,
                         json_t *skills, const struct space_ctx *ctx, json_t **ret_refused,
                         json_t **ret_candidate, char *why, size_t whylen,
                         bool *ret_unsupported) {
  const struct builtin_family *fam = NULL;
  json_t *match = NULL;
  *ret_unsupported = false;
  if (builtin_match(profile, &fam, &match, why, whylen) != 0) {
    *ret_unsupported = true;
    return -1;
  }
  struct knob_set knobs;
  starting_knobs(fam, match, parent_options, &knobs);
  const char *knob = json_string_value(json_object_get(knob_move, "knob"));
  unsigned kinds = knob && strcmp(knob, "MODE") == 0
                       ? space_strategy_kinds(json_string_value(json_object_get(knob_move,
                                                                                "value")))
                       : 0;
  int rc = 0;
  if (kinds && ctx) {
    struct builtin_space sp;
    rc = space_init(&sp, fam, match, profile, why, whylen);
    if (rc == 0)
      rc = propose_space(&sp, profile, kinds, &knobs, ctx, skills, ret_refused, ret_candidate,
                         why, whylen);
    space_clear(&sp);
    json_decref(match);
    return rc;
  }
  if (knob_move && json_is_object(knob_move))
    rc = knob_apply_move(&knobs, knob_move, why, whylen);
  bool moved = rc == 0 && knob_move && json_is_object(knob_move);
  if (rc == 0)
    rc = fam->check(match, &knobs, why, whylen);
  if (rc != 0 && moved && ctx && !kinds) {
    struct builtin_space sp;
    if (space_init(&sp, fam, match, profile, why, whylen) == 0 &&
        propose_repaired(&sp, profile, knob, &knobs, ctx, skills, ret_refused, ret_candidate,
                         why, whylen) == 0) {
      space_clear(&sp);
      json_decref(match);
      return 0;
    }
    space_clear(&sp);
    if (*ret_refused) {
      json_decref(match);
      return -1;
    }
  }
  if (rc == 0) {
    json_t *rule = refusing_rule(skills, fam, profile, &knobs);
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
  return propose_knobs(profile, knob_move, parent_options, NULL, NULL, &refused, ret_candidate,
                       why, whylen, ret_unsupported);
}

/* The seed of a request's draws: the task's seed, the strategy, the region (its profile's
 * name) and, for a large step, the step (a small step's draw depends on its parent's
 * point, hashed in later, so that a node's patch under a strategy is one program). */
static uint64_t request_seed(const struct proposal_request *req, bool small) {
  char text[64];
  json_t *seed = json_object_get(req->task_options, "seed");
  snprintf(text, sizeof text, "%lld", (long long)json_integer_value(seed));
  uint64_t h = space_hash(0, "opforge-builtin-space");
  h = space_hash(h, text);
  h = space_hash(h, req->strategy ? req->strategy : "");
  h = space_hash(h, json_string_value(json_object_get(req->profile, "name")));
  h = space_hash(h, small ? "small" : "large");
  if (!small) {
    snprintf(text, sizeof text, "%d", req->step);
    h = space_hash(h, text);
  }
  return h;
}

/* Proposes from the family defaults (large step) or the parent's knobs (small step),
 * then the strategy's knob move (or the space's move of a "space_<kind>" strategy); a
 * move the request's skill rules refuse is a move that does not fit (parse/invalid_move
 * naming the rule). */
static int builtin_propose(const struct proposal_request *req, bool small,
                           json_t **ret_candidate, json_t **ret_failure) {
  char why[1024];
  bool unsupported;
  json_t *refused = NULL;
  json_t *move = json_object_get(req->strategy_node, "knob_move");
  json_t *parent_options = small && req->parent ? json_object_get(req->parent, "options") : NULL;
  struct space_ctx ctx = {.small = small && parent_options, .seed = request_seed(req, small)};
  if (propose_knobs(req->profile, move, parent_options, req->skills, &ctx, &refused,
                    ret_candidate, why, sizeof why, &unsupported) == 0)
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
