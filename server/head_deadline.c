/* The request-head deadline (see head_deadline.h): a list of open connections under a
 * mutex and a sweeper thread. The sweeper may shut a socket down only while it holds the
 * mutex and the watch is in the list: libmicrohttpd reports a connection closed
 * (head_deadline_closed, which takes the mutex) before it closes the socket, so the
 * descriptor cannot have been closed and reused under the sweeper. */
#include "server/head_deadline.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

#include "server/request.h"

struct head_deadline {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  struct head_watch *head;
  unsigned long long deadline_ns;
  unsigned period_ms;
  bool stopping;
  head_deadline_tripped_fn tripped;
  void *ctx;
  pthread_t thread;
};

/* Shuts down the watched connections past the deadline; returns how many. Lock held. */
static unsigned sweep(struct head_deadline *hd, unsigned long long now) {
  unsigned n = 0;
  for (struct head_watch *w = hd->head; w; w = w->next) {
    if (w->tripped || !w->waiting_since_ns || now - w->waiting_since_ns < hd->deadline_ns)
      continue;
    shutdown(w->fd, SHUT_RDWR);
    w->tripped = true;
    n++;
  }
  return n;
}

static void *sweeper_main(void *arg) {
  struct head_deadline *hd = arg;
  pthread_mutex_lock(&hd->lock);
  while (!hd->stopping) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    long ns = until.tv_nsec + (long)hd->period_ms * 1000000L;
    until.tv_sec += ns / 1000000000L;
    until.tv_nsec = ns % 1000000000L;
    while (!hd->stopping && pthread_cond_timedwait(&hd->wake, &hd->lock, &until) != ETIMEDOUT)
      continue;
    if (hd->stopping)
      break;
    unsigned n = sweep(hd, monotonic_ns());
    if (n && hd->tripped) {
      pthread_mutex_unlock(&hd->lock);
      hd->tripped(hd->ctx, n);
      pthread_mutex_lock(&hd->lock);
    }
  }
  pthread_mutex_unlock(&hd->lock);
  return NULL;
}

struct head_deadline *head_deadline_new(unsigned deadline_s, head_deadline_tripped_fn tripped,
                                        void *ctx) {
  struct head_deadline *hd = calloc(1, sizeof *hd);
  if (!hd)
    return NULL;
  hd->deadline_ns = (unsigned long long)deadline_s * 1000000000ull;
  hd->period_ms = deadline_s * 1000u / 4u;
  if (hd->period_ms > 250 || hd->period_ms == 0)
    hd->period_ms = 250;
  hd->tripped = tripped;
  hd->ctx = ctx;
  pthread_mutex_init(&hd->lock, NULL);
  pthread_cond_init(&hd->wake, NULL);
  if (pthread_create(&hd->thread, NULL, sweeper_main, hd) != 0) {
    pthread_cond_destroy(&hd->wake);
    pthread_mutex_destroy(&hd->lock);
    free(hd);
    return NULL;
  }
  return hd;
}

void head_deadline_free(struct head_deadline *hd) {
  if (!hd)
    return;
  pthread_mutex_lock(&hd->lock);
  hd->stopping = true;
  pthread_cond_broadcast(&hd->wake);
  pthread_mutex_unlock(&hd->lock);
  pthread_join(hd->thread, NULL);
  while (hd->head) {
    struct head_watch *next = hd->head->next;
    free(hd->head);
    hd->head = next;
  }
  pthread_cond_destroy(&hd->wake);
  pthread_mutex_destroy(&hd->lock);
  free(hd);
}

struct head_watch *head_deadline_opened(struct head_deadline *hd, int fd) {
  struct head_watch *w = calloc(1, sizeof *w);
  if (!w)
    return NULL;
  w->fd = fd;
  w->waiting_since_ns = monotonic_ns();
  pthread_mutex_lock(&hd->lock);
  w->next = hd->head;
  if (hd->head)
    hd->head->prev = w;
  hd->head = w;
  pthread_mutex_unlock(&hd->lock);
  return w;
}

void head_deadline_closed(struct head_deadline *hd, struct head_watch *w) {
  if (!w)
    return;
  pthread_mutex_lock(&hd->lock);
  if (w->prev)
    w->prev->next = w->next;
  else
    hd->head = w->next;
  if (w->next)
    w->next->prev = w->prev;
  pthread_mutex_unlock(&hd->lock);
  free(w);
}

void head_deadline_head_done(struct head_deadline *hd, struct head_watch *w) {
  if (!w)
    return;
  pthread_mutex_lock(&hd->lock);
  w->waiting_since_ns = 0;
  pthread_mutex_unlock(&hd->lock);
}

void head_deadline_waiting(struct head_deadline *hd, struct head_watch *w) {
  if (!w)
    return;
  pthread_mutex_lock(&hd->lock);
  w->waiting_since_ns = monotonic_ns();
  pthread_mutex_unlock(&hd->lock);
}
