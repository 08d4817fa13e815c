/* Request-arrival deadlines (see head_deadline.h): a list of open connections under a
 * mutex and a sweeper thread. A socket may be shut down or polled only while the mutex
 * is held and its watch is in the list: libmicrohttpd reports a connection closed
 * (head_deadline_closed, which takes the mutex) before it closes the socket, so the
 * descriptor cannot have been closed and reused meanwhile. */
#include "server/head_deadline.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/client_limit.h"
#include "server/request.h"

struct head_deadline {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  struct head_watch *head;
  unsigned count;
  unsigned long long head_ns, body_ns;
  unsigned period_ms;
  bool stopping;
  head_deadline_tripped_fn tripped;
  void *ctx;
  pthread_t thread;
};

/* Shuts w down; lock held. */
static void trip(struct head_watch *w) {
  shutdown(w->fd, SHUT_RDWR);
  w->tripped = true;
}

/* Shuts down the connections past a deadline, counting them by reason. Lock held. */
static void sweep(struct head_deadline *hd, unsigned long long now, unsigned ret_n[2]) {
  for (struct head_watch *w = hd->head; w; w = w->next) {
    if (w->tripped)
      continue;
    if (w->waiting_since_ns && now - w->waiting_since_ns >= hd->head_ns) {
      trip(w);
      ret_n[HEAD_LATE]++;
    } else if (w->body_since_ns && now - w->body_since_ns >= hd->body_ns) {
      trip(w);
      ret_n[BODY_LATE]++;
    }
  }
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
    unsigned n[2] = {0, 0};
    sweep(hd, monotonic_ns(), n);
    for (int why = HEAD_LATE; why <= BODY_LATE && hd->tripped; why++) {
      if (!n[why])
        continue;
      pthread_mutex_unlock(&hd->lock);
      hd->tripped(hd->ctx, (enum head_deadline_reason)why, n[why]);
      pthread_mutex_lock(&hd->lock);
    }
  }
  pthread_mutex_unlock(&hd->lock);
  return NULL;
}

struct head_deadline *head_deadline_new(unsigned head_s, unsigned body_s,
                                        head_deadline_tripped_fn tripped, void *ctx) {
  struct head_deadline *hd = calloc(1, sizeof *hd);
  if (!hd)
    return NULL;
  hd->head_ns = (unsigned long long)head_s * 1000000000ull;
  hd->body_ns = (unsigned long long)body_s * 1000000000ull;
  unsigned shorter = head_s < body_s ? head_s : body_s;
  hd->period_ms = shorter * 1000u / 4u;
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

struct head_watch *head_deadline_opened(struct head_deadline *hd, int fd,
                                        const struct sockaddr *peer) {
  struct head_watch *w = calloc(1, sizeof *w);
  if (!w)
    return NULL;
  w->fd = fd;
  if (peer && (peer->sa_family == AF_INET || peer->sa_family == AF_INET6))
    memcpy(&w->peer, peer, peer->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                      : sizeof(struct sockaddr_in6));
  w->waiting_since_ns = monotonic_ns();
  pthread_mutex_lock(&hd->lock);
  w->next = hd->head;
  if (hd->head)
    hd->head->prev = w;
  hd->head = w;
  hd->count++;
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
  hd->count--;
  pthread_mutex_unlock(&hd->lock);
  free(w);
}

void head_deadline_head_done(struct head_deadline *hd, struct head_watch *w, bool has_body) {
  if (!w)
    return;
  unsigned long long now = monotonic_ns();
  pthread_mutex_lock(&hd->lock);
  w->waiting_since_ns = 0;
  w->body_since_ns = has_body ? now : 0;
  pthread_mutex_unlock(&hd->lock);
}

void head_deadline_body_done(struct head_deadline *hd, struct head_watch *w) {
  if (!w)
    return;
  pthread_mutex_lock(&hd->lock);
  w->body_since_ns = 0;
  pthread_mutex_unlock(&hd->lock);
}

void head_deadline_waiting(struct head_deadline *hd, struct head_watch *w) {
  if (!w)
    return;
  unsigned long long now = monotonic_ns();
  pthread_mutex_lock(&hd->lock);
  w->waiting_since_ns = now;
  w->body_since_ns = 0;
  pthread_mutex_unlock(&hd->lock);
}

unsigned head_deadline_count(struct head_deadline *hd) {
  pthread_mutex_lock(&hd->lock);
  unsigned n = hd->count;
  pthread_mutex_unlock(&hd->lock);
  return n;
}

/* Each round takes the watch that has waited longest for a head: n is small (the
 * connections over the shedding mark) and the list is bounded by the connection limit. */
unsigned head_deadline_shed(struct head_deadline *hd, unsigned n,
                            const struct head_watch *keep) {
  unsigned shed = 0;
  pthread_mutex_lock(&hd->lock);
  while (shed < n) {
    struct head_watch *oldest = NULL;
    for (struct head_watch *w = hd->head; w; w = w->next)
      if (w != keep && !w->tripped && w->waiting_since_ns &&
          (!oldest || w->waiting_since_ns < oldest->waiting_since_ns))
        oldest = w;
    if (!oldest)
      break;
    trip(oldest);
    shed++;
  }
  pthread_mutex_unlock(&hd->lock);
  return shed;
}

/* True when the peer of fd has hung up (end of stream, reset or error). */
static bool hung_up(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLRDHUP};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

unsigned head_deadline_live_from(struct head_deadline *hd, const struct sockaddr *peer) {
  unsigned char want[CLIENT_KEY_LEN], key[CLIENT_KEY_LEN];
  if (!client_limit_key(peer, want))
    return 0;
  unsigned live = 0;
  pthread_mutex_lock(&hd->lock);
  for (struct head_watch *w = hd->head; w; w = w->next)
    if (!w->tripped && client_limit_key((const struct sockaddr *)&w->peer, key) &&
        memcmp(key, want, sizeof key) == 0 && !hung_up(w->fd))
      live++;
  pthread_mutex_unlock(&hd->lock);
  return live;
}
