/* A recorded search space (space/README.md): per task its profile and baseline times, per
 * generated region its library time, and per point of the region's knob space the time,
 * correctness and failure class measured for it. Read by the replay evaluator
 * (gpu/replay/replay.c) and by `opforge ablate --replay` (cli/ablate_replay.c).
 *
 * Needs only Jansson and libc, so the replay evaluator links it alone. */
#ifndef OPFORGE_SPACE_TABLE_H
#define OPFORGE_SPACE_TABLE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#define REPLAY_TABLE_FORMAT 1
#define REPLAY_KEY_MAX 512       /* bytes of a point key, its NUL included */
#define REPLAY_NOT_RECORDED "replay/not_recorded"  /* the class of a point the table lacks */

struct space_region {
  int index;               /* the region's number in the engine's partition */
  char family[24];
  double library_ms;       /* the region's time as library steps (step 0's steps_ms) */
  char first[REPLAY_KEY_MAX]; /* the point of the proposer's starting point ("" unknown) */
  long points_total;       /* points of the region's space (-1 unknown) */
  long points_recorded;    /* point lines in the table */
  double best_point_ms;    /* the fastest correct point; NAN when none */
  double first_ms;         /* the first point's time when correct; NAN otherwise */
  json_t *model;           /* owned: the region's "model" line (a synthetic space), or NULL */
};

struct space_task {
  char name[128];          /* the task's name (the KernelBench file's stem) */
  char path[256];          /* where it came from ("level1/23_Softmax.py"), or "" */
  char hardware[96], commit[48];
  double eager_ms, compile_ms, floor_ms; /* NAN when unknown */
  double reference_ms;     /* step 0: every region as library steps */
  double whole_ms;         /* the whole model as one library step; NAN when not recorded */
  json_t *profile;         /* owned: what the evaluator's profile answered */
  struct space_region *regions; /* owned, in region order */
  size_t n_regions;
  double best_ms;          /* the space's best program (space_task_best_ms) */
  double first_ms;         /* the first candidate (every region at its first point); NAN
                              when a region's first point is unknown or failed */
};

struct space_table {
  json_t *header;          /* owned: the "space" line (may be an empty object) */
  struct space_task *tasks;/* owned, in file order */
  size_t n_tasks;
  json_t *points;          /* owned: "task\x1fregion\x1fkey" -> the point line */
};

/* Reads a table (JSON lines; a name ending ".gz" is read through `gzip -dc`). Returns 0,
 * or -1 with the reason (file, line) in why; *ret is then empty. */
int space_table_load(const char *path, struct space_table *ret, char *why, size_t whylen);

/* Parses a table from text (JSON lines). Same contract as space_table_load. */
int space_table_parse(const char *text, size_t len, struct space_table *ret, char *why,
                      size_t whylen);

void space_table_clear(struct space_table *t);

/* The task named name, or NULL. */
const struct space_task *space_table_task(const struct space_table *t, const char *name);

/* The region numbered index of task, or NULL. */
const struct space_region *space_task_region(const struct space_task *task, int index);

/* The point line of (task, region, key) (borrowed), or NULL when the table lacks it. */
json_t *space_table_point(const struct space_table *t, const char *task, int region,
                          const char *key);

/* What the table says of one point: recorded, or computed by the region's model. */
struct replay_point {
  bool correct;
  double ms;               /* when correct */
  char stage[16], cls[96]; /* when not */
  char message[256];       /* the recorded failure's message, or "" */
  bool modelled;           /* computed by a "model" line, not recorded */
};

/* Looks up (task, region, key): a point line, else the region's model. Returns 0 with
 * *ret, or -1 when the table has neither (the point is not recorded). */
int space_table_lookup(const struct space_table *t, const char *task, int region,
                       const char *key, struct replay_point *ret);

/* The canonical key of a candidate's point, from its -D options (borrowed; NULL or empty
 * gives ""): "NAME=VALUE" for every "-DNAME=VALUE" whose NAME is capitals and VALUE not
 * 0, and "MODE=name" for "-DMODE_NAME=1" (lower case; 3xtf32 spelled tf32x3), sorted by
 * name and joined by ','; other options are no knob and left out. It is the builtin
 * space's key (proposers/builtin/space.h, space_options_key), written again here so that
 * the replay evaluator needs nothing of the proposer; tests/replay checks that the two
 * agree. Returns 0, or -1 when the key does not fit in len bytes. */
int replay_point_key(const json_t *options, char *out, size_t len);

#endif
