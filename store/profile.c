/* A task's profile: what profiling found, stored with the baselines it measured. */
#include "store/tasks.h"

#include <stdlib.h>

#include "store/events.h"
#include "store/statements.h"
#include "store/transaction.h"
#include "store/util.h"

int store_task_profile_get(struct store *s, const char *id, json_t **ret_profile) {
  char *text = NULL;
  int result = st_query_text(s, "SELECT profile FROM tasks WHERE id = ?1", id, NULL, &text);
  if (result != STORE_OK)
    return result;
  json_t *profile = text ? st_json_loads(text) : NULL;
  free(text);
  if (text && !profile)
    return STORE_ERROR;
  *ret_profile = profile;
  return STORE_OK;
}

struct profile_set {
  const char *id;
  char *profile_text, *baselines_text, *event_text;
};

static int profile_tx(struct store *s, void *arg) {
  struct profile_set *p = arg;
  int changed = 0;
  int result = st_run(s, "UPDATE tasks SET profile = ?2, baselines = ?3 WHERE id = ?1", p->id,
                      p->profile_text, p->baselines_text, NULL, &changed);
  if (result == STORE_OK && changed == 0)
    return STORE_NOT_FOUND;
  return result == STORE_OK ? store_event_append_tx(s, p->id, "profiled", p->event_text, NULL)
                            : result;
}

int store_task_profile_set(struct store *s, const char *id, json_t *profile,
                           json_t *baselines) {
  json_t *event = st_json_pack("{s:O}", "baselines", baselines);
  struct profile_set p = {.id = id,
                          .profile_text = st_json_dumps(profile),
                          .baselines_text = st_json_dumps(baselines),
                          .event_text = event ? st_json_dumps(event) : NULL};
  json_decref(event);
  int result = p.profile_text && p.baselines_text && p.event_text
                   ? store_transaction(s, profile_tx, &p)
                   : STORE_ERROR;
  free(p.profile_text);
  free(p.baselines_text);
  free(p.event_text);
  return result;
}
