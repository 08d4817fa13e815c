/* The claim lease keeper (see claim_lease.h): one thread, a timed wait, one UPDATE. */
#include "server/claim_lease.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "base/log.h"
#include "store/tasks.h"

struct claim_lease {
  struct store *store;
  unsigned period_ms;
  claim_lease_tick_fn tick;
  void *ctx;
  pthread_mutex_t lock;
  pthread_cond_t wake;
  bool stopping;
  pthread_t thread;
};

/* Renews, then sleeps a period, until stopped. A failed renewal is logged and retried
 * next period: a lease lasts three periods, so one miss loses nothing. */
static void *keeper_main(void *arg) {
  struct claim_lease *k = arg;
  pthread_mutex_lock(&k->lock);
  while (!k->stopping) {
    pthread_mutex_unlock(&k->lock);
    int rc = store_claims_renew(k->store, NULL);
    if (rc != STORE_OK)
      log_warn("cannot renew the claim leases (store status %d)", rc);
    if (k->tick)
      k->tick(k->ctx);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long ns = until.tv_nsec + (long)(k->period_ms % 1000) * 1000000L;
    until.tv_sec += k->period_ms / 1000 + ns / 1000000000L;
    until.tv_nsec = ns % 1000000000L;
    pthread_mutex_lock(&k->lock);
    while (!k->stopping && pthread_cond_timedwait(&k->wake, &k->lock, &until) != ETIMEDOUT)
      continue;
  }
  pthread_mutex_unlock(&k->lock);
  return NULL;
}

int claim_lease_start(struct store *store, unsigned lease_s, claim_lease_tick_fn tick,
                      void *ctx, struct claim_lease **ret_keeper) {
  struct claim_lease *k = calloc(1, sizeof *k);
  if (!k) {
    log_error("out of memory starting the claim lease keeper");
    return -1;
  }
  k->store = store;
  k->tick = tick;
  k->ctx = ctx;
  k->period_ms = lease_s ? lease_s * 1000u / 3u : 1000u;
  if (k->period_ms == 0)
    k->period_ms = 1;
  pthread_mutex_init(&k->lock, NULL);
  pthread_cond_init(&k->wake, NULL);
  if (pthread_create(&k->thread, NULL, keeper_main, k) != 0) {
    log_error("cannot start the claim lease keeper");
    pthread_cond_destroy(&k->wake);
    pthread_mutex_destroy(&k->lock);
    free(k);
    return -1;
  }
  *ret_keeper = k;
  return 0;
}

void claim_lease_stop(struct claim_lease *k) {
  if (!k)
    return;
  pthread_mutex_lock(&k->lock);
  k->stopping = true;
  pthread_cond_broadcast(&k->wake);
  pthread_mutex_unlock(&k->lock);
  pthread_join(k->thread, NULL);
  pthread_cond_destroy(&k->wake);
  pthread_mutex_destroy(&k->lock);
  free(k);
}
