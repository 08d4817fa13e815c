/* The claims this process's workers are running: the lease keeper renews those and no
 * other, so a claim whose release failed (a full disk, say) runs out and another worker
 * takes the task over instead of holding it for ever. Private to store/. */
#ifndef OPFORGE_STORE_CLAIMS_HELD_H
#define OPFORGE_STORE_CLAIMS_HELD_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#define CLAIM_ID_LEN 40

struct claims_held {
  pthread_mutex_t lock;
  char (*ids)[CLAIM_ID_LEN];
  size_t n, cap;
};

void claims_held_init(struct claims_held *h);
void claims_held_clear(struct claims_held *h);

/* Records id as run here (once). False when out of memory. */
bool claims_held_add(struct claims_held *h, const char *id);

/* Forgets id (no-op when absent). */
void claims_held_remove(struct claims_held *h, const char *id);

/* A copy of the ids into *ret_ids (caller frees; NULL when none) and their count. False
 * when out of memory. */
bool claims_held_copy(struct claims_held *h, char (**ret_ids)[CLAIM_ID_LEN], size_t *ret_n);

#endif
