/* Where a step works in a program: the base program it changes, the region it changes,
 * and the child program it composes; also the reference (step 0) and the at-floor rule
 * (docs/architecture.md, "Search over programs"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "engine/loop_internal.h"
#include "engine/program.h"
#include "store/candidates.h"

/* A generated region slower than its library steps by more than this is put back to
 * library steps when a child program is composed from its parent. */
#define LIBRARY_REPAIR_MARGIN 1.02

/* The proposer's own starting point for region k (a large step without a strategy), or
 * NULL when it proposes nothing (caller owns). */
static json_t *region_default(struct task_run *run, size_t k) {
  const struct region *r = &run->partition.regions[k];
  struct proposal_request req = {
    .task_id = run->id,
    .task_name = json_string_value(json_object_get(run->task, "name")),
    .task_options = run->options,
    .profile = r->profile,
    .step = run->step + 1,
    .usage = &run->step_usage,
    .limit = &run->limit,
    .reference = json_string_value(json_object_get(run->task, "reference")),
    .skills = skills_for(&run->skills, r->family),
  };
  json_t *candidate = NULL, *failure = NULL;
  if (run->proposer.propose_large(run->proposer.self, &req, &candidate, &failure) != 0) {
    skills_note_refusal(&run->skills, failure);
    log_debug("task %s: region %zu has no default candidate: %s", run->id, k,
              json_string_value(json_object_get(failure, "message")));
    json_decref(candidate);
    candidate = NULL;
  }
  json_decref(failure);
  json_decref(req.skills);
  return candidate;
}

void loop_default_choices(struct task_run *run, json_t **ret_choices) {
  if (!run->defaults) {  /* the proposer's starting points are asked for once per run */
    run->defaults = json_array();
    for (size_t k = 0; run->defaults && k < run->partition.n; k++) {
      const struct region *r = &run->partition.regions[k];
      json_t *c = r->generated && !r->library_first ? region_default(run, k) : NULL;
      loop_outside_note(run, k, c);
      json_array_append_new(run->defaults, c ? c : json_null());
    }
  }
  for (size_t k = 0; k < run->partition.n; k++) {
    json_t *c = json_array_get(run->defaults, k);
    ret_choices[k] = json_is_object(c) ? json_incref(c) : NULL;
  }
}

/* The stored candidate of tree node (caller owns), or NULL. */
static json_t *node_candidate(struct task_run *run, size_t node) {
  json_t *c = NULL;
  const char *id = run->tree->nodes[node].candidate;
  if (id[0] && store_candidate_get(run->env->store, id, &c) != STORE_OK)
    c = NULL;
  return c;
}

/* Fills ms with the region times of the evaluated program of choices (its cached
 * result), or with the reference's library times where it has none. */
static void base_times(struct task_run *run, json_t *candidate, json_t *result, double *ms) {
  program_region_times(&run->partition, candidate, result, ms);
  for (size_t k = 0; k < run->partition.n; k++)
    if (ms[k] < 0)
      ms[k] = run->ref_region_ms[k];
}

static bool exhausted(const struct task_run *run, size_t node, size_t k) {
  char key[48];
  snprintf(key, sizeof key, "%zu/%zu", node, k);
  return run->exhausted && json_object_get(run->exhausted, key) != NULL;
}

void loop_mark_exhausted(struct task_run *run, size_t node, size_t k) {
  char key[48];
  snprintf(key, sizeof key, "%zu/%zu", node, k);
  if (!run->exhausted)
    run->exhausted = json_object();
  json_object_set_new(run->exhausted, key, json_true());
}

/* Generated tries a library-first region gets while none beats its library step: cuDNN
 * usually wins, and each try is a whole-program evaluation the other regions could use.
 * A region that is the whole task has nothing else to spend its steps on. */
#define LIBRARY_FIRST_TRIES 1
#define LIBRARY_FIRST_TRIES_WHOLE 3

void loop_note_library_first(struct task_run *run, const struct step_context *c,
                             json_t *candidate, json_t *result, bool correct) {
  if (c->first || !run->partition.regions[c->region].library_first)
    return;
  char key[24];
  snprintf(key, sizeof key, "%zu", c->region);
  if (!run->library_first)
    run->library_first = json_object();
  json_int_t tries = json_integer_value(json_object_get(run->library_first, key));
  double *ms = calloc(run->partition.n, sizeof *ms);
  if (!run->library_first || !ms || tries < 0) {
    free(ms);
    return;
  }
  program_region_times(&run->partition, candidate, result, ms);
  double t = ms[c->region], lib = run->ref_region_ms[c->region];
  bool won = correct && t > 0 && lib > 0 && t < lib;
  json_object_set_new(run->library_first, key, json_integer(won ? -1 : tries + 1));
  free(ms);
}

/* True when region k is library-first and spent its tries without beating its library
 * step: it stays a library step, and the floor rule no longer waits for it. */
static bool library_first_spent(const struct task_run *run, size_t k) {
  char key[24];
  snprintf(key, sizeof key, "%zu", k);
  const struct region *r = &run->partition.regions[k];
  return r->library_first && run->library_first &&
         json_integer_value(json_object_get(run->library_first, key)) >=
             (r->whole ? LIBRARY_FIRST_TRIES_WHOLE : LIBRARY_FIRST_TRIES);
}

/* True when region k may still be worked on at node: generated, with moves left, and
 * not a library-first region that spent its tries. */
static bool region_open(const struct task_run *run, size_t node, size_t k) {
  return run->partition.regions[k].generated && !exhausted(run, node, k) &&
         !library_first_spent(run, k);
}

/* True when some generated region at node still has moves. */
static bool node_open(const struct task_run *run, size_t node) {
  for (size_t k = 0; k < run->partition.n; k++)
    if (region_open(run, node, k))
      return true;
  return false;
}

long loop_open_node(const struct task_run *run) {
  long best = -1;
  for (size_t i = 0; i < run->tree->n; i++) {
    const struct tree_node *n = &run->tree->nodes[i];
    if (n->result != TREE_CORRECT || !n->candidate[0] || !node_open(run, i))
      continue;
    if (best < 0 || n->speedup > run->tree->nodes[best].speedup)
      best = (long)i;
  }
  return best;
}

/* The generated region with the most time above its floor that still has moves at node;
 * regions never timed, and regions with an outside move pending, come first. A
 * library-first region whose time is below its floor is skipped unless it is the whole
 * task: the floor bounds fp32 SIMT code, so the generated kernel cannot beat that library
 * step. -1 when none is left. */
static long pick_region(struct task_run *run, size_t node, const double *ms) {
  long best = -1;
  double best_gap = -INFINITY;
  for (size_t k = 0; k < run->partition.n; k++) {
    if (!region_open(run, node, k))
      continue;
    const struct region *r = &run->partition.regions[k];
    double gap = ms[k] < 0 || loop_outside_pending(run, (long)k)
                     ? INFINITY
                     : ms[k] - program_region_floor(&run->partition, run->profile, k);
    if (r->library_first && !r->whole && gap < 0)
      continue;
    if (gap > best_gap) {
      best_gap = gap;
      best = (long)k;
    }
  }
  return best;
}

int loop_context_init(struct task_run *run, size_t node, struct step_context *ret) {
  size_t n = run->partition.n;
  *ret = (struct step_context){.node = node};
  ret->choices = calloc(n ? n : 1, sizeof *ret->choices);
  ret->region_ms = calloc(n ? n : 1, sizeof *ret->region_ms);
  if (!ret->choices || !ret->region_ms)
    return -1;
  ret->first = run->step == 0 && node == 0 && run->proposer.starts_every_region;
  json_t *base = NULL, *result = NULL;
  if (node == 0) {
    /* A proposer whose proposals are paid calls starts from the reference: its regions
     * are written one step at a time. */
    if (run->proposer.starts_every_region)
      loop_default_choices(run, ret->choices);
    /* Every region starts as its library step (one library-first convolution): the first
     * program would be the reference again, so the step is an ordinary one. */
    bool any = false;
    for (size_t k = 0; k < n; k++)
      any = any || ret->choices[k];
    ret->first = ret->first && any;
    base = program_compose(&run->partition, ret->choices, "auto");
    result = json_incref(loop_cached_result(run, base));
  } else {
    base = node_candidate(run, node);
    program_choices(&run->partition, base, ret->choices);
    result = json_incref(json_object_get(base, "result"));
  }
  base_times(run, base, result, ret->region_ms);
  json_decref(base);
  json_decref(result);
  long k = pick_region(run, node, ret->region_ms);
  if (k < 0 && !ret->first)
    return 1;
  ret->region = k < 0 ? 0 : (size_t)k;
  return 0;
}

void loop_context_clear(struct task_run *run, struct step_context *c) {
  if (c->choices)
    program_choices_clear(c->choices, run->partition.n);
  free(c->choices);
  free(c->region_ms);
  memset(c, 0, sizeof *c);
}

json_t *loop_compose(struct task_run *run, const struct step_context *c, json_t *region_candidate) {
  size_t n = run->partition.n;
  json_t **choices = calloc(n ? n : 1, sizeof *choices);
  if (!choices)
    return NULL;
  for (size_t k = 0; k < n; k++) {
    bool slower = c->region_ms[k] > 0 && run->ref_region_ms[k] > 0 &&
                  c->region_ms[k] > run->ref_region_ms[k] * LIBRARY_REPAIR_MARGIN;
    choices[k] = c->first ? c->choices[k] : slower ? NULL : c->choices[k];
  }
  if (!c->first)
    choices[c->region] = region_candidate;
  json_t *program = program_compose(&run->partition, choices, "auto");
  free(choices);
  return program;
}

bool loop_at_floor(const struct task_run *run) {
  if (!(run->stop_at_floor > 0) || !run->correct || !run->best_region_ms ||
      loop_outside_pending(run, -1))
    return false;
  size_t checked = 0;
  for (size_t k = 0; k < run->partition.n; k++) {
    if (!run->partition.regions[k].generated || library_first_spent(run, k))
      continue;
    double floor = program_region_floor(&run->partition, run->profile, k);
    double t = run->best_region_ms[k];
    if (!(floor > 0) || !(t > 0) || floor / t < run->stop_at_floor)
      return false;
    checked++;
  }
  return checked > 0;
}

bool loop_best_is_reference(const struct task_run *run) {
  return run->correct > 0 && run->tree && run->tree->nodes[0].candidate[0] &&
         strcmp(run->best_candidate, run->tree->nodes[0].candidate) == 0;
}
