/* Open connections per client address (see client_limit.h): a small table under a mutex,
 * searched linearly. Its size is bounded by the daemon's connection limit, and every
 * lookup is far cheaper than the request it guards. */
#include "server/client_limit.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct client_entry {
  unsigned char key[CLIENT_KEY_LEN]; /* family tag, then 4 or 16 address bytes (zero-padded) */
  unsigned open;
};

struct client_limit {
  pthread_mutex_t mu;
  unsigned limit;
  size_t cap, n;
  struct client_entry *entries;
};

struct client_limit *client_limit_new(size_t max_clients, unsigned limit) {
  struct client_limit *l = calloc(1, sizeof *l);
  if (!l)
    return NULL;
  l->entries = calloc(max_clients ? max_clients : 1, sizeof *l->entries);
  if (!l->entries) {
    free(l);
    return NULL;
  }
  pthread_mutex_init(&l->mu, NULL);
  l->cap = max_clients ? max_clients : 1;
  l->limit = limit;
  return l;
}

void client_limit_free(struct client_limit *l) {
  if (!l)
    return;
  pthread_mutex_destroy(&l->mu);
  free(l->entries);
  free(l);
}

bool client_limit_key(const struct sockaddr *addr, unsigned char ret_key[CLIENT_KEY_LEN]) {
  memset(ret_key, 0, CLIENT_KEY_LEN);
  if (!addr)
    return false;
  if (addr->sa_family == AF_INET) {
    const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)addr;
    ret_key[0] = 4;
    memcpy(ret_key + 1, &in->sin_addr, 4);
    return true;
  }
  if (addr->sa_family == AF_INET6) {
    const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)addr;
    ret_key[0] = 6;
    memcpy(ret_key + 1, &in6->sin6_addr, 16);
    return true;
  }
  return false;
}

/* Index of key in l, or l->n when absent. Caller holds l->mu. */
static size_t find(const struct client_limit *l, const unsigned char key[CLIENT_KEY_LEN]) {
  size_t i = 0;
  while (i < l->n && memcmp(l->entries[i].key, key, CLIENT_KEY_LEN) != 0)
    i++;
  return i;
}

unsigned client_limit_opened(struct client_limit *l, const struct sockaddr *addr) {
  unsigned char key[CLIENT_KEY_LEN];
  if (!l || !client_limit_key(addr, key))
    return 0;
  pthread_mutex_lock(&l->mu);
  size_t i = find(l, key);
  unsigned open = 0;
  if (i == l->n && l->n < l->cap) {
    memcpy(l->entries[i].key, key, sizeof key);
    l->entries[i].open = 0;
    l->n++;
  }
  if (i < l->n)
    open = ++l->entries[i].open;
  pthread_mutex_unlock(&l->mu);
  return open;
}

void client_limit_closed(struct client_limit *l, const struct sockaddr *addr) {
  unsigned char key[CLIENT_KEY_LEN];
  if (!l || !client_limit_key(addr, key))
    return;
  pthread_mutex_lock(&l->mu);
  size_t i = find(l, key);
  if (i < l->n && --l->entries[i].open == 0)
    l->entries[i] = l->entries[--l->n]; /* order does not matter */
  pthread_mutex_unlock(&l->mu);
}

unsigned client_limit_count(struct client_limit *l, const struct sockaddr *addr) {
  unsigned char key[CLIENT_KEY_LEN];
  if (!l || !client_limit_key(addr, key))
    return 0;
  pthread_mutex_lock(&l->mu);
  size_t i = find(l, key);
  unsigned open = i < l->n ? l->entries[i].open : 0;
  pthread_mutex_unlock(&l->mu);
  return open;
}

bool client_limit_over(struct client_limit *l, const struct sockaddr *addr) {
  return l && client_limit_count(l, addr) > l->limit;
}

unsigned client_limit_limit(const struct client_limit *l) {
  return l ? l->limit : 0;
}
