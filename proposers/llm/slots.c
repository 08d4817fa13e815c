/* Requests in flight per LLM endpoint (see slots.h). The table only grows: a process
 * talks to a handful of endpoints (in practice one), and entries are never freed. */
#include "proposers/llm/slots.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ENDPOINTS 16

struct endpoint {
  char *url;
  unsigned limit, used;
  pthread_cond_t freed;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct endpoint endpoints[MAX_ENDPOINTS];
static size_t n_endpoints;

/* The entry of url, created with limit when absent; NULL when the table is full or out
 * of memory. Called with the lock held. */
static struct endpoint *find(const char *url, unsigned limit, bool create) {
  for (size_t i = 0; i < n_endpoints; i++)
    if (strcmp(endpoints[i].url, url) == 0)
      return &endpoints[i];
  if (!create || n_endpoints == MAX_ENDPOINTS)
    return NULL;
  struct endpoint *e = &endpoints[n_endpoints];
  if (!(e->url = strdup(url)))
    return NULL;
  if (pthread_cond_init(&e->freed, NULL) != 0) {
    free(e->url);
    e->url = NULL;
    return NULL;
  }
  e->limit = limit ? limit : 1;
  e->used = 0;
  n_endpoints++;
  return e;
}

int llm_slot_acquire(const char *base_url, unsigned limit) {
  pthread_mutex_lock(&lock);
  struct endpoint *e = find(base_url, limit, true);
  if (e && limit && e->limit != limit) {
    /* The latest caller's limit holds: a raised one may admit waiters at once. */
    if (limit > e->limit)
      pthread_cond_broadcast(&e->freed);
    e->limit = limit;
  }
  if (e) {
    while (e->used >= e->limit)
      pthread_cond_wait(&e->freed, &lock);
    e->used++;
  }
  pthread_mutex_unlock(&lock);
  return e ? 0 : -1;
}

void llm_slot_release(const char *base_url) {
  pthread_mutex_lock(&lock);
  struct endpoint *e = find(base_url, 0, false);
  if (e && e->used > 0) {
    e->used--;
    pthread_cond_signal(&e->freed);
  }
  pthread_mutex_unlock(&lock);
}

unsigned llm_slots_in_use(const char *base_url) {
  pthread_mutex_lock(&lock);
  struct endpoint *e = find(base_url, 0, false);
  unsigned used = e ? e->used : 0;
  pthread_mutex_unlock(&lock);
  return used;
}
