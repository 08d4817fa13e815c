/* Wakes suspended SSE connections when a task gets new events (or on a periodic tick). */
#include "server/event_bus.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct event_bus {
  pthread_mutex_t lock;
  pthread_cond_t stop_cond;
  struct bus_waiter *head;
  uint64_t generation;
  bool stopping;
  unsigned tick_ms;
  pthread_t ticker;
  bool ticker_started;
};

/* Unlinks and resumes one waiter. Lock held. Resuming under our lock keeps a waiter
 * from being resumed before it is suspended (it links and suspends under the lock). */
static void resume_locked(struct event_bus *bus, struct bus_waiter *w) {
  if (w->prev)
    w->prev->next = w->next;
  else
    bus->head = w->next;
  if (w->next)
    w->next->prev = w->prev;
  w->prev = w->next = NULL;
  w->linked = false;
  MHD_resume_connection(w->conn);
}

static void resume_all_locked(struct event_bus *bus) {
  while (bus->head)
    resume_locked(bus, bus->head);
}

static void *ticker_main(void *arg) {
  struct event_bus *bus = arg;
  pthread_mutex_lock(&bus->lock);
  while (!bus->stopping) {
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += bus->tick_ms / 1000;
    deadline.tv_nsec += (long)(bus->tick_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&bus->stop_cond, &bus->lock, &deadline);
    resume_all_locked(bus);
  }
  pthread_mutex_unlock(&bus->lock);
  return NULL;
}

struct event_bus *event_bus_new(unsigned tick_ms) {
  struct event_bus *bus = calloc(1, sizeof *bus);
  if (!bus)
    return NULL;
  pthread_mutex_init(&bus->lock, NULL);
  pthread_cond_init(&bus->stop_cond, NULL);
  bus->tick_ms = tick_ms ? tick_ms : 1000;
  if (pthread_create(&bus->ticker, NULL, ticker_main, bus) != 0) {
    event_bus_free(bus);
    return NULL;
  }
  bus->ticker_started = true;
  return bus;
}

void event_bus_free(struct event_bus *bus) {
  if (!bus)
    return;
  pthread_mutex_lock(&bus->lock);
  bus->stopping = true;
  pthread_cond_signal(&bus->stop_cond);
  resume_all_locked(bus);
  pthread_mutex_unlock(&bus->lock);
  if (bus->ticker_started)
    pthread_join(bus->ticker, NULL);
  pthread_cond_destroy(&bus->stop_cond);
  pthread_mutex_destroy(&bus->lock);
  free(bus);
}

uint64_t event_bus_generation(struct event_bus *bus) {
  pthread_mutex_lock(&bus->lock);
  uint64_t g = bus->generation;
  pthread_mutex_unlock(&bus->lock);
  return g;
}

void event_bus_notify(struct event_bus *bus, const char *task_id) {
  pthread_mutex_lock(&bus->lock);
  bus->generation++;
  struct bus_waiter *w = bus->head;
  while (w) {
    struct bus_waiter *next = w->next;
    if (strcmp(w->task_id, task_id) == 0)
      resume_locked(bus, w);
    w = next;
  }
  pthread_mutex_unlock(&bus->lock);
}

bool event_bus_wait(struct event_bus *bus, struct bus_waiter *w, struct MHD_Connection *conn,
                    const char *task_id, uint64_t seen_generation) {
  pthread_mutex_lock(&bus->lock);
  if (bus->stopping || bus->generation != seen_generation) {
    pthread_mutex_unlock(&bus->lock);
    return false;
  }
  w->conn = conn;
  snprintf(w->task_id, sizeof w->task_id, "%s", task_id);
  w->prev = NULL;
  w->next = bus->head;
  if (bus->head)
    bus->head->prev = w;
  bus->head = w;
  w->linked = true;
  MHD_suspend_connection(conn);
  pthread_mutex_unlock(&bus->lock);
  return true;
}

void event_bus_shutdown(struct event_bus *bus) {
  pthread_mutex_lock(&bus->lock);
  bus->stopping = true;
  pthread_cond_signal(&bus->stop_cond);
  resume_all_locked(bus);
  pthread_mutex_unlock(&bus->lock);
}

void event_bus_forget(struct event_bus *bus, struct bus_waiter *w) {
  pthread_mutex_lock(&bus->lock);
  if (w->linked) {
    if (w->prev)
      w->prev->next = w->next;
    else
      bus->head = w->next;
    if (w->next)
      w->next->prev = w->prev;
    w->linked = false;
  }
  pthread_mutex_unlock(&bus->lock);
}
