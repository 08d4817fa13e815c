/* The set of claims this process runs (see store/claims_held.h). */
#include "store/claims_held.h"

#include <stdlib.h>
#include <string.h>

void claims_held_init(struct claims_held *h) {
  memset(h, 0, sizeof *h);
  pthread_mutex_init(&h->lock, NULL);
}

void claims_held_clear(struct claims_held *h) {
  free(h->ids);
  pthread_mutex_destroy(&h->lock);
  memset(h, 0, sizeof *h);
}

/* The index of id, or n when absent. Call with the lock held. */
static size_t find(const struct claims_held *h, const char *id) {
  size_t i = 0;
  while (i < h->n && strcmp(h->ids[i], id) != 0)
    i++;
  return i;
}

bool claims_held_add(struct claims_held *h, const char *id) {
  bool ok = true;
  pthread_mutex_lock(&h->lock);
  if (find(h, id) == h->n) {
    if (h->n == h->cap) {
      size_t cap = h->cap ? h->cap * 2 : 16;
      char(*grown)[CLAIM_ID_LEN] = realloc(h->ids, cap * sizeof *grown);
      ok = grown != NULL;
      if (ok) {
        h->ids = grown;
        h->cap = cap;
      }
    }
    if (ok) {
      strncpy(h->ids[h->n], id, CLAIM_ID_LEN - 1);
      h->ids[h->n++][CLAIM_ID_LEN - 1] = '\0';
    }
  }
  pthread_mutex_unlock(&h->lock);
  return ok;
}

void claims_held_remove(struct claims_held *h, const char *id) {
  pthread_mutex_lock(&h->lock);
  size_t i = find(h, id);
  if (i < h->n) {
    memmove(h->ids[i], h->ids[i + 1], (h->n - i - 1) * sizeof h->ids[0]);
    h->n--;
  }
  pthread_mutex_unlock(&h->lock);
}

bool claims_held_copy(struct claims_held *h, char (**ret_ids)[CLAIM_ID_LEN], size_t *ret_n) {
  pthread_mutex_lock(&h->lock);
  size_t n = h->n;
  char(*copy)[CLAIM_ID_LEN] = n ? malloc(n * sizeof *copy) : NULL;
  if (copy)
    memcpy(copy, h->ids, n * sizeof *copy);
  pthread_mutex_unlock(&h->lock);
  if (n && !copy)
    return false;
  *ret_ids = copy;
  *ret_n = n;
  return true;
}
