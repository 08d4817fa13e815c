/* In-process counters rendered as Prometheus text at /metrics. */
#ifndef OPFORGE_METRICS_H
#define OPFORGE_METRICS_H

#include <stddef.h>

struct metrics;

/* Limits that clients can trip; each trip is logged and counted. LIMIT_SHED counts the
 * connections still waiting for a head that were closed to make room when the
 * connection table filled up. */
enum metrics_limit {
  LIMIT_BODY, LIMIT_URL, LIMIT_CONNECTIONS, LIMIT_PAGE, LIMIT_REFERENCE, LIMIT_HEADER_DEADLINE,
  LIMIT_BODY_DEADLINE, LIMIT_SHED,
  LIMIT__COUNT
};

/* Returns a new registry (caller frees with metrics_free), NULL on allocation failure. */
struct metrics *metrics_new(void);
void metrics_free(struct metrics *m);

/* Records one finished request. route must be a string that lives as long as the
 * registry (a route-table pattern or a literal); it is kept by pointer. method is copied.
 * Thread-safe. */
void metrics_observe_request(struct metrics *m, const char *route, const char *method,
                             unsigned status, double seconds);

/* Counts one trip of a limit. Thread-safe. */
void metrics_limit_tripped(struct metrics *m, enum metrics_limit which);

/* Counts n trips of a limit at once. Thread-safe. */
void metrics_limit_tripped_n(struct metrics *m, enum metrics_limit which, unsigned n);

/* Appends the request counters, the latency histogram and the limit counters to a
 * malloc'd text buffer (*buf, *len, *cap grow as needed). Returns 0, -1 on allocation
 * failure. */
int metrics_render(struct metrics *m, char **buf, size_t *len, size_t *cap);

/* printf-style append to the same kind of buffer; shared with the /metrics handler. */
int metrics_appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
