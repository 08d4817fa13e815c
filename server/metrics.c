/* In-process counters rendered as Prometheus text at /metrics. */
#include "server/metrics.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SERIES 512
#define MAX_ROUTES 64

static const double latency_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                         0.05,   0.1,   0.25,   0.5,   1.0,  2.5, 10.0};
#define N_BUCKETS (sizeof latency_buckets / sizeof latency_buckets[0])

static const char *limit_names[LIMIT__COUNT] = {"body", "url", "connections", "page",
                                                "reference", "header_deadline",
                                                "body_deadline", "shed"};

struct request_series {
  const char *route;  /* borrowed from the route table or a static string */
  char method[8];
  unsigned status;
  unsigned long long count;
};

struct route_histogram {
  const char *route;
  unsigned long long buckets[N_BUCKETS];
  unsigned long long count;
  double sum;
};

struct metrics {
  pthread_mutex_t lock;
  struct request_series series[MAX_SERIES];
  size_t n_series;
  struct route_histogram hist[MAX_ROUTES];
  size_t n_hist;
  unsigned long long limits[LIMIT__COUNT];
};

struct metrics *metrics_new(void) {
  struct metrics *m = calloc(1, sizeof *m);
  if (m)
    pthread_mutex_init(&m->lock, NULL);
  return m;
}

void metrics_free(struct metrics *m) {
  if (!m)
    return;
  pthread_mutex_destroy(&m->lock);
  free(m);
}

/* Finds or adds the histogram of a route; NULL when the table is full. Lock held. */
static struct route_histogram *histogram_for(struct metrics *m, const char *route) {
  for (size_t i = 0; i < m->n_hist; i++)
    if (m->hist[i].route == route || strcmp(m->hist[i].route, route) == 0)
      return &m->hist[i];
  if (m->n_hist == MAX_ROUTES)
    return NULL;
  m->hist[m->n_hist].route = route;
  return &m->hist[m->n_hist++];
}

void metrics_observe_request(struct metrics *m, const char *route, const char *method,
                             unsigned status, double seconds) {
  pthread_mutex_lock(&m->lock);
  struct request_series *s = NULL;
  for (size_t i = 0; i < m->n_series && !s; i++)
    if (m->series[i].status == status && strcmp(m->series[i].route, route) == 0 &&
        strcmp(m->series[i].method, method) == 0)
      s = &m->series[i];
  if (!s && m->n_series < MAX_SERIES) {
    s = &m->series[m->n_series++];
    s->route = route;
    snprintf(s->method, sizeof s->method, "%s", method);
    s->status = status;
  }
  if (s)
    s->count++;
  struct route_histogram *h = histogram_for(m, route);
  if (h) {
    for (size_t b = 0; b < N_BUCKETS; b++)
      if (seconds <= latency_buckets[b])
        h->buckets[b]++;
    h->count++;
    h->sum += seconds;
  }
  pthread_mutex_unlock(&m->lock);
}

void metrics_limit_tripped(struct metrics *m, enum metrics_limit which) {
  metrics_limit_tripped_n(m, which, 1);
}

void metrics_limit_tripped_n(struct metrics *m, enum metrics_limit which, unsigned n) {
  pthread_mutex_lock(&m->lock);
  m->limits[which] += n;
  pthread_mutex_unlock(&m->lock);
}

int metrics_appendf(char **buf, size_t *len, size_t *cap, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = *cap - *len;
    int n = *buf ? vsnprintf(*buf + *len, room, fmt, ap) : -2;
    va_end(ap);
    if (n >= 0 && (size_t)n < room) {
      *len += (size_t)n;
      return 0;
    }
    if (n == -1)
      return -1;
    size_t want = *cap ? *cap * 2 : 4096;
    char *grown = realloc(*buf, want);
    if (!grown)
      return -1;
    *buf = grown;
    *cap = want;
  }
}

/* Renders the latency histogram of every route. Lock held. */
static int render_histograms(struct metrics *m, char **buf, size_t *len, size_t *cap) {
  int rc = metrics_appendf(buf, len, cap,
                           "# HELP opforge_http_request_duration_seconds Request latency.\n"
                           "# TYPE opforge_http_request_duration_seconds histogram\n");
  for (size_t i = 0; i < m->n_hist && rc == 0; i++) {
    const struct route_histogram *h = &m->hist[i];
    for (size_t b = 0; b < N_BUCKETS && rc == 0; b++)
      rc = metrics_appendf(buf, len, cap,
                           "opforge_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} "
                           "%llu\n",
                           h->route, latency_buckets[b], h->buckets[b]);
    if (rc == 0)
      rc = metrics_appendf(buf, len, cap,
                           "opforge_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} "
                           "%llu\nopforge_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n"
                           "opforge_http_request_duration_seconds_count{route=\"%s\"} %llu\n",
                           h->route, h->count, h->route, h->sum, h->route, h->count);
  }
  return rc;
}

int metrics_render(struct metrics *m, char **buf, size_t *len, size_t *cap) {
  pthread_mutex_lock(&m->lock);
  int rc = metrics_appendf(buf, len, cap,
                           "# HELP opforge_http_requests_total Requests by route, method and "
                           "status.\n# TYPE opforge_http_requests_total counter\n");
  for (size_t i = 0; i < m->n_series && rc == 0; i++)
    rc = metrics_appendf(buf, len, cap,
                         "opforge_http_requests_total{route=\"%s\",method=\"%s\",status=\"%u\"} "
                         "%llu\n",
                         m->series[i].route, m->series[i].method, m->series[i].status,
                         m->series[i].count);
  if (rc == 0)
    rc = render_histograms(m, buf, len, cap);
  if (rc == 0)
    rc = metrics_appendf(buf, len, cap,
                         "# HELP opforge_limit_trips_total Requests refused by a limit.\n"
                         "# TYPE opforge_limit_trips_total counter\n");
  for (int i = 0; i < LIMIT__COUNT && rc == 0; i++)
    rc = metrics_appendf(buf, len, cap, "opforge_limit_trips_total{limit=\"%s\"} %llu\n",
                         limit_names[i], m->limits[i]);
  pthread_mutex_unlock(&m->lock);
  return rc;
}
