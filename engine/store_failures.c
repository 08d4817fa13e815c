/* The per-task count of store failures (engine/store_failures.h): a small table under a
 * mutex, looked up by task id. */
#include "engine/store_failures.h"

#include <stdio.h>
#include <string.h>

#include "store/status.h"

void store_failures_init(struct store_failures *f) {
  memset(f, 0, sizeof *f);
  pthread_mutex_init(&f->lock, NULL);
}

void store_failures_destroy(struct store_failures *f) {
  pthread_mutex_destroy(&f->lock);
}

/* The entry of task_id, or NULL; called with the lock held. */
static struct store_failure_entry *find(struct store_failures *f, const char *task_id) {
  for (size_t i = 0; i < STORE_FAILURES_TASKS; i++)
    if (strcmp(f->entries[i].task_id, task_id) == 0)
      return &f->entries[i];
  return NULL;
}

/* A free slot, else the one noted longest ago; called with the lock held. */
static struct store_failure_entry *slot(struct store_failures *f) {
  struct store_failure_entry *oldest = &f->entries[0];
  for (size_t i = 0; i < STORE_FAILURES_TASKS; i++) {
    if (!f->entries[i].task_id[0])
      return &f->entries[i];
    if (f->entries[i].seq < oldest->seq)
      oldest = &f->entries[i];
  }
  return oldest;
}

int store_failures_note(struct store_failures *f, const char *task_id, int status) {
  if (!task_id || !task_id[0])
    return 0;
  pthread_mutex_lock(&f->lock);
  struct store_failure_entry *e = find(f, task_id);
  int count = e ? e->count : 0;
  if (status != STORE_BUSY && status != STORE_UNAVAILABLE) {
    if (!e) {
      e = slot(f);
      memset(e, 0, sizeof *e);
      snprintf(e->task_id, sizeof e->task_id, "%s", task_id);
    }
    count = ++e->count;
    e->last_status = status;
    e->seq = ++f->seq;
  }
  pthread_mutex_unlock(&f->lock);
  return count;
}

int store_failures_count(struct store_failures *f, const char *task_id, int *ret_status) {
  pthread_mutex_lock(&f->lock);
  const struct store_failure_entry *e = find(f, task_id);
  int count = e ? e->count : 0;
  if (ret_status)
    *ret_status = e ? e->last_status : 0;
  pthread_mutex_unlock(&f->lock);
  return count;
}

void store_failures_forget(struct store_failures *f, const char *task_id) {
  pthread_mutex_lock(&f->lock);
  struct store_failure_entry *e = find(f, task_id);
  if (e)
    memset(e, 0, sizeof *e);
  pthread_mutex_unlock(&f->lock);
}
