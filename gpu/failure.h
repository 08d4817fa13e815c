/* The failure record of an evaluation step: stage, normalized class and message. */
#ifndef OPFORGE_GPU_FAILURE_H
#define OPFORGE_GPU_FAILURE_H

#include <jansson.h>
#include <stdbool.h>

/* Fixed-size so that every layer can fill one without allocating (and so without a
 * second failure path while reporting the first). */
struct gpu_failure {
  bool set;
  char stage[16];    /* compile|load|launch|protocol|... (base/outcome.h) */
  char cls[96];      /* normalized class, e.g. "plan/unknown_kernel" */
  char message[1024];
  bool sticky;       /* the CUDA context is unusable: the process must exit */
};

/* Fills f (overwriting what was there, sticky cleared); message is printf-formatted and
 * truncated. */
void gpu_failure_set(struct gpu_failure *f, const char *stage, const char *cls,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Empties f (not set, not sticky). */
void gpu_failure_clear(struct gpu_failure *f);
/* Returns a new JSON object {"stage","class","message"}, or json_null() when f is not
 * set; the caller owns the reference. NULL only when out of memory. */
json_t *gpu_failure_to_json(const struct gpu_failure *f);

#endif
