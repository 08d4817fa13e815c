/* The builtin space: every builtin family's knobs as a finite grid, the points of it that
 * are valid for a region (its family's check against the shapes, and the device's limits),
 * and the moves of the search over it (docs/architecture.md, section 8, "The builtin
 * space").
 *
 * A region's space is its family module's grid (proposers/builtin/space_grids.c: one list
 * of values per knob, chosen for the match, with the family defaults' own values added)
 * restricted to the points that
 *   - the family's check() accepts for the match (shapes, alignment, registers, shared
 *     memory: what check() refuses a move for), and
 *   - fit the device of the profile (struct space_device: threads per block, MINB blocks
 *     per SM, registers per thread; the shared memory and threads of the generated plan's
 *     launches are checked on the points a proposal picks, space_fits_device), and
 *   - are not among the points NVRTC spills for (space_grids.c, calibrated by
 *     tests/unit/test_space.c).
 * Knobs outside the grid keep the family defaults' values.
 *
 * The canonical point key (space_point_key) names a point for tables that record points
 * (the replay evaluator keys by task, region index, family and point key). */
#ifndef OPFORGE_BUILTIN_SPACE_H
#define OPFORGE_BUILTIN_SPACE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proposers/builtin/builtin.h"

#define SPACE_MAX_DIMS 14    /* one per knob of struct knob_set, MODE included */
#define SPACE_MAX_VALUES 24  /* values of one knob */
#define SPACE_KEY_MAX 192    /* bytes of a point key, NUL included */

/* Kinds of move: what a knob (or a MODE value) changes. HTAM's directions map onto them
 * (docs: "The builtin space"): data_reuse tiling, memory_access vector, parallel_mapping
 * launch, reduction_strategy reduce, instruction_throughput precision, fusion graph. */
enum space_kind {
  SPACE_TILING = 1 << 0,    /* BM BN BK TM TN STAGES; cached/staged rows and tiles */
  SPACE_VECTOR = 1 << 1,    /* VEC ITEMS; ldg, streaming stores */
  SPACE_LAUNCH = 1 << 2,    /* BLOCK ROWS SPLIT MINB; row mappings, grid policies */
  SPACE_REDUCE = 1 << 3,    /* SPLIT UNROLL; statistics and scan algorithms */
  SPACE_PRECISION = 1 << 4, /* UNROLL; tf32x3, fast_math, idx32, recip_mul */
  SPACE_GRAPH = 1 << 5,     /* channels_last: the program's layout around the region */
  SPACE_ALL = (1 << 6) - 1,
};

/* The device facts validity is checked against: the profile's "gpu" object
 * (max_threads_per_block, max_shared_optin, sm_count), the H200's where it says nothing
 * (CPU and meta profiles). */
struct space_device {
  int sm_count;
  int max_threads_per_block;  /* 1024 */
  int max_threads_per_sm;     /* 2048 */
  long long smem_per_block;   /* max_shared_optin: 232448 (227 KiB) */
  int regs_per_sm;            /* 65536 */
};

/* One knob of the grid: its values in ascending order (MODE: names, "" the template's
 * default). */
struct space_dim {
  char knob[8];                          /* "BLOCK" ... "MODE" */
  int n;
  int values[SPACE_MAX_VALUES];          /* numeric knobs */
  char modes[SPACE_MAX_VALUES][24];      /* MODE */
};

/* A region's space. Owned by the caller; release with space_clear. */
struct builtin_space {
  const struct builtin_family *family;
  const char *module;            /* the family module: "gemm", "attention", "conv", ... */
  json_t *match;                 /* owned */
  struct space_device device;
  struct knob_set defaults;      /* the family defaults: a valid point when check takes them */
  int ndims;
  struct space_dim dims[SPACE_MAX_DIMS];
  double raw;                    /* points of the grid before validity */
};

/* The device facts of a profile (borrowed) into *ret. */
void space_device_of(json_t *profile, struct space_device *ret);

/* The space of family fam on match (borrowed; the space takes its own reference) for the
 * device of profile (borrowed, may be NULL: the H200). Returns 0, or -1 with why (out of
 * memory). */
int space_init(struct builtin_space *ret, const struct builtin_family *fam, json_t *match,
               json_t *profile, char *why, size_t whylen);

/* The space of the family that matches profile (builtin_match). -1 with why when none. */
int space_open(struct builtin_space *ret, json_t *profile, char *why, size_t whylen);

/* Releases what s owns and zeroes it; accepts a zeroed space. */
void space_clear(struct builtin_space *s);

/* The family module's name of fam ("attention" and "conv" for the modules HTAM learns
 * under "gemm"); static storage. */
const char *space_module_name(const struct builtin_family *fam);

/* True when k is a point of the grid (every grid knob at one of its values, the others at
 * the defaults'), the family's check accepts it and it fits the device; else false with
 * the reason in why (may be NULL). */
bool space_valid(const struct builtin_space *s, const struct knob_set *k, char *why,
                 size_t whylen);

/* Whether a generated candidate's plan (borrowed) fits the device: every launch's threads
 * within max_threads_per_block and its shared_bytes within smem_per_block. */
bool space_fits_device(const struct builtin_space *s, json_t *candidate, char *why,
                       size_t whylen);

/* Every valid point, in grid order (the last dim fastest), into *ret (caller frees) and
 * their number into *ret_n. Returns 0, or -1 when out of memory. */
int space_enumerate(const struct builtin_space *s, struct knob_set **ret, size_t *ret_n);

/* The number of valid points. */
size_t space_count(const struct builtin_space *s);

/* A deterministic random stream (splitmix64) and its draws. */
struct space_rng {
  uint64_t state;
};
void space_rng_seed(struct space_rng *r, uint64_t seed);
uint64_t space_rng_next(struct space_rng *r);
/* A draw in [0, n) (n >= 1). */
uint64_t space_rng_below(struct space_rng *r, uint64_t n);
/* FNV-1a of text, to seed streams from names. */
uint64_t space_hash(uint64_t h, const char *text);

/* Samples a valid point into *ret. With bias NULL (or keep 0) the draw is uniform over the
 * valid points; else each grid knob outside kinds (a mask of enum space_kind) keeps bias's
 * value with probability keep, and the knobs of kinds are drawn uniformly (a large step
 * biased toward the defaults in every knob but those its strategy moves). Returns 0, or -1
 * when the space has no valid point. */
int space_sample(const struct builtin_space *s, struct space_rng *rng,
                 const struct knob_set *bias, unsigned kinds, double keep,
                 struct knob_set *ret);

/* The valid neighbours of from: points that change one knob of kinds (a numeric knob to an
 * adjacent grid value, MODE to any value of one of kinds or to ""), or, when max_changed
 * is 2, that knob and one more of any kind. Into *ret (caller frees) and *ret_n; 0, or -1
 * when out of memory. from need not be valid itself. */
int space_neighbours(const struct builtin_space *s, const struct knob_set *from, unsigned kinds,
                     int max_changed, struct knob_set **ret, size_t *ret_n);

/* The kinds a knob's move belongs to (MODE: those of the mode value, 0 for ""). */
unsigned space_knob_kinds(const char *knob, const char *mode);

/* The kind named by a "space_<kind>" strategy value ("space_tiling", "space_vector",
 * "space_launch", "space_reduce", "space_precision", "space_graph", "space_any"), or 0
 * when mode is not one. */
unsigned space_strategy_kinds(const char *mode);

/* The canonical point key of a knob set: "NAME=value" for every knob that is set, in
 * ascending order of the knob's name (BK, BLOCK, BM, BN, ITEMS, MINB, MODE, ROWS, SPLIT,
 * STAGES, TM, TN, UNROLL, VEC), joined by ','; a numeric knob as its -D macro gets it and
 * is set when not 0, MODE as its lowercase name and set when not "" (the aliases of one
 * template mode spelled one way: 3xtf32 as tf32x3). E.g. "BK=16,BM=128,BN=128,MINB=2,
 * MODE=tf32x3,SPLIT=1,STAGES=4,TM=8,TN=8". Writes at most len bytes into buf. */
void space_point_key(const struct knob_set *k, char *buf, size_t len);

/* The point key of a candidate's -D options (["-DBLOCK=256", "-DMODE_ONLINE=1"],
 * borrowed): the same string space_point_key gives for the knobs they came from. Options
 * that are no knob are ignored. Returns 0, or -1 when options is not an array. */
int space_options_key(const json_t *options, char *buf, size_t len);

#endif
