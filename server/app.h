/* The server's shared state, built once at start-up and read by every handler. */
#ifndef OPFORGE_APP_H
#define OPFORGE_APP_H

#include <stdatomic.h>
#include <stdbool.h>

struct opforge_config;
struct store;
struct metrics;
struct event_bus;
struct supervisor_pool;
struct worker_pool;
struct search_config;
struct sandbox;

/* Owned by cli/main.c; lives for the whole process. Handlers only borrow it. */
struct app {
  const struct opforge_config *cfg;
  struct store *store;
  struct metrics *metrics;
  struct event_bus *bus;
  struct supervisor_pool *supervisors;  /* NULL when the server runs with --gpus none */
  struct sandbox *sandbox;              /* the evaluators' sandbox; NULL when no evaluator
                                           was started or none could be made */
  char sandbox_refusal[1024];           /* why no evaluator may start, or "" */
  const struct search_config *search;   /* HTAM and tree constants */
  struct worker_pool *workers;          /* NULL when no evaluator runs */
  atomic_bool shutting_down;
};

#endif
