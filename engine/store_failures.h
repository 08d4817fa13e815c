/* How often each task's work failed to reach the store, shared by the workers of one
 * server (docs/architecture.md, "Store failures"). A step the store refuses every time
 * (STORE_CONSTRAINT, or any failure but STORE_BUSY and STORE_UNAVAILABLE) is retried a
 * bounded number of times, each on a fresh claim of the task; then the task fails with
 * error store_error. A busy store, or a database server that cannot be reached, is
 * transient: retried without a bound and never counted. */
#ifndef OPFORGE_STORE_FAILURES_H
#define OPFORGE_STORE_FAILURES_H

#include <pthread.h>

#define STORE_FAILURES_LIMIT 3   /* failed commits in a row before the task fails */
#define STORE_FAILURES_TASKS 64  /* tasks tracked at once; the oldest entry is reused */

/* One task's run of failures. */
struct store_failure_entry {
  char task_id[40];     /* "" when the slot is free */
  int count;            /* failed commits in a row, busy ones not counted */
  int last_status;      /* the store status of the last one */
  unsigned long long seq; /* when it was last noted, for reuse of the oldest slot */
};

/* The table; zero it with store_failures_init before use. Thread-safe. */
struct store_failures {
  pthread_mutex_t lock;
  struct store_failure_entry entries[STORE_FAILURES_TASKS];
  unsigned long long seq;
};

/* Initializes f (caller owns it; store_failures_destroy releases the lock). */
void store_failures_init(struct store_failures *f);
void store_failures_destroy(struct store_failures *f);

/* Notes that task_id's work failed with store status status (a negative enum
 * store_status). STORE_BUSY and STORE_UNAVAILABLE are not counted. Returns the count after noting. */
int store_failures_note(struct store_failures *f, const char *task_id, int status);

/* The count of task_id (0 when unknown), and its last status into *ret_status (may be
 * NULL). */
int store_failures_count(struct store_failures *f, const char *task_id, int *ret_status);

/* Forgets task_id: a step committed, or the task finished. */
void store_failures_forget(struct store_failures *f, const char *task_id);

#endif
