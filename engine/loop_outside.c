/* Outside moves: strategies a region's candidate names (its "outside_moves") because
 * their gain lies outside the region, in a library step it reads (the pointwise family's
 * channels_last_conv_output speeds up the convolution before it). The at-floor rule sees
 * only the region's own time, so each such move is taken once per region before a task
 * may stop at its floor, and the step that takes it is forced (docs/architecture.md,
 * "Channels-last convolutions"). */
#include <stdio.h>
#include <string.h>

#include "engine/loop_internal.h"

/* The key of region k's strategy in run->outside. */
static void outside_key(size_t k, const char *strategy, char *out, size_t len) {
  snprintf(out, len, "%zu/%s", k, strategy);
}

void loop_outside_note(struct task_run *run, size_t k, json_t *region_candidate) {
  json_t *moves = json_object_get(region_candidate, "outside_moves"), *m;
  size_t i;
  json_array_foreach(moves, i, m) {
    char key[TREE_ID_MAX + 32];
    if (!json_is_string(m))
      continue;
    outside_key(k, json_string_value(m), key, sizeof key);
    if (!run->outside)
      run->outside = json_object();
    if (run->outside && !json_object_get(run->outside, key))
      json_object_set_new(run->outside, key, json_false());
  }
}

void loop_outside_taken(struct task_run *run, size_t k, const char *strategy) {
  char key[TREE_ID_MAX + 32];
  outside_key(k, strategy, key, sizeof key);
  if (run->outside && json_object_get(run->outside, key))
    json_object_set_new(run->outside, key, json_true());
}

/* The strategy of region k's first pending outside move, or NULL (borrowed from run). */
static const char *pending_of(const struct task_run *run, size_t k) {
  const char *key;
  json_t *taken;
  char prefix[32];
  snprintf(prefix, sizeof prefix, "%zu/", k);
  json_object_foreach(run->outside, key, taken) {
    if (json_is_false(taken) && strncmp(key, prefix, strlen(prefix)) == 0)
      return key + strlen(prefix);
  }
  return NULL;
}

bool loop_outside_pending(const struct task_run *run, long k) {
  if (k >= 0)
    return pending_of(run, (size_t)k) != NULL;
  for (size_t r = 0; r < run->partition.n; r++)
    if (pending_of(run, r))
      return true;
  return false;
}

bool loop_outside_choice(struct task_run *run, size_t k, const struct memory_view *memory,
                         struct policy_choice *choice) {
  const char *strategy = pending_of(run, k);
  if (!strategy)
    return false;
  for (size_t i = 0; i < memory->n_locals; i++) {
    const struct htam_local *l = &memory->locals[i];
    if (strcmp(l->id, strategy) != 0 || !l->global_id)
      continue;
    snprintf(choice->direction, sizeof choice->direction, "%s", l->global_id);
    snprintf(choice->strategy, sizeof choice->strategy, "%s", l->id);
    choice->inherited = false;
    return true;
  }
  /* The memory no longer holds the strategy (edited through the API): nothing to take. */
  loop_outside_taken(run, k, strategy);
  return false;
}
