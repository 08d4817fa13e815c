/* Follows the event streams of many tasks at once (libcurl's multi interface, one
 * connection per stream, at most TUNE_STREAMS_MAX open): each event goes to its task
 * (tune_task_take_event) and to the caller's hook, as it arrives. A stream that drops is
 * resumed after its last event; one that ends means its task is final. */
#ifndef OPFORGE_CLI_TUNE_FOLLOW_H
#define OPFORGE_CLI_TUNE_FOLLOW_H

#include <stddef.h>

#include <jansson.h>

#include "cli/tune_task.h"

/* Streams open at a time: well under the server's default of 64 connections per client
 * (the rest of a run's requests need some too). The tasks after them wait their turn;
 * their events are replayed when their stream opens. */
#define TUNE_STREAMS_MAX 16
/* How long the server may stay unreachable before the follower gives up. */
#define TUNE_OUTAGE_MAX_S 60.0

/* What the caller hears while it follows; every hook may be NULL. */
struct tune_follow_hooks {
  void (*on_event)(void *user, size_t task, const json_t *event); /* after the task took it */
  void (*on_end)(void *user, size_t task); /* its stream ended (final) or it was lost */
  void (*on_tick)(void *user);             /* about every half second */
  void *user;
};

enum tune_follow_result {
  TUNE_FOLLOW_DONE = 0,        /* every task with an id reached its end */
  TUNE_FOLLOW_DEADLINE = 1,    /* the deadline passed first */
  TUNE_FOLLOW_UNREACHABLE = 2, /* no connection for TUNE_OUTAGE_MAX_S (printed) */
  TUNE_FOLLOW_ERROR = 3,       /* out of memory, or a stream refused (printed) */
};

/* Follows the tasks of tasks[0..n) that have an id and whose stream has not ended, from
 * their last_event_id, on the server at base_url (no trailing slash), until each ends
 * or deadline (monotonic seconds; INFINITY for none) passes. A task whose stream answers
 * 404 becomes TUNE_LOST. tasks and hooks stay the caller's. */
enum tune_follow_result tune_follow(const char *base_url, struct tune_task *tasks, size_t n,
                                    double deadline, const struct tune_follow_hooks *hooks);

/* Seconds on the monotonic clock (what deadlines are measured in). */
double tune_now_monotonic(void);

/* Seconds since the epoch (what event times are measured in). */
double tune_now_wall(void);

#endif
