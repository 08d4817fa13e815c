/* The builtin space: valid points of a region's knob grid, sampling, neighbours and the
 * canonical point key (see space.h; the grids themselves are in space_grids.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/builtin/families.h"
#include "proposers/builtin/propose.h"
#include "proposers/builtin/space.h"
#include "proposers/builtin/space_internal.h"

/* ---- the device ---- */

void space_device_of(json_t *profile, struct space_device *ret) {
  *ret = (struct space_device){.sm_count = builtin_sm_count(profile),
                               .max_threads_per_block = 1024,
                               .max_threads_per_sm = 2048,
                               .smem_per_block = 232448,
                               .regs_per_sm = 65536};
  json_t *gpu = json_object_get(profile, "gpu");
  json_t *t = json_object_get(gpu, "max_threads_per_block");
  json_t *m = json_object_get(gpu, "max_shared_optin");
  if (json_is_integer(t) && json_integer_value(t) >= 64 && json_integer_value(t) <= 1024)
    ret->max_threads_per_block = (int)json_integer_value(t);
  if (json_is_integer(m) && json_integer_value(m) >= 16384 &&
      json_integer_value(m) <= (1LL << 24))
    ret->smem_per_block = json_integer_value(m);
}

/* ---- knobs of a point ---- */

static bool is_mode_dim(const struct space_dim *d) {
  return strcmp(d->knob, "MODE") == 0;
}

/* The template mode a MODE value names (aliases spelled one way). */
static const char *mode_canonical(const char *m) {
  return strcmp(m, "3xtf32") == 0 ? "tf32x3" : m;
}

/* Sets dim d of *k to its value i. */
static void dim_set(const struct space_dim *d, struct knob_set *k, int i) {
  if (is_mode_dim(d))
    memcpy(k->mode, d->modes[i], sizeof k->mode);
  else
    *knob_slot(k, d->knob) = d->values[i];
}

/* The index of k's value in dim d, or -1 when it is not one of them. */
static int dim_index(const struct space_dim *d, const struct knob_set *k) {
  if (is_mode_dim(d)) {
    const char *m = mode_canonical(k->mode);
    for (int i = 0; i < d->n; i++)
      if (strcmp(d->modes[i], m) == 0)
        return i;
    return -1;
  }
  int v = *knob_slot((struct knob_set *)k, d->knob);
  for (int i = 0; i < d->n; i++)
    if (d->values[i] == v)
      return i;
  return -1;
}

/* The kinds of dim d's value i. */
static unsigned dim_value_kinds(const struct space_dim *d, int i) {
  return space_knob_kinds(d->knob, is_mode_dim(d) ? d->modes[i] : NULL);
}

/* Whether dim d holds a value of kinds (MODE: a mode of one of them). */
static bool dim_of_kinds(const struct space_dim *d, unsigned kinds) {
  for (int i = 0; i < d->n; i++)
    if (dim_value_kinds(d, i) & kinds)
      return true;
  return false;
}

/* ---- kinds ---- */

static const struct {
  const char *name;
  unsigned kinds;
} knob_kinds[] = {
    {"BM", SPACE_TILING},       {"BN", SPACE_TILING},     {"BK", SPACE_TILING},
    {"TM", SPACE_TILING},       {"TN", SPACE_TILING},     {"STAGES", SPACE_TILING},
    {"VEC", SPACE_VECTOR},      {"ITEMS", SPACE_VECTOR},  {"BLOCK", SPACE_LAUNCH},
    {"ROWS", SPACE_LAUNCH},     {"MINB", SPACE_LAUNCH},   {"SPLIT", SPACE_LAUNCH | SPACE_REDUCE},
    {"UNROLL", SPACE_PRECISION | SPACE_REDUCE},
};

static const struct {
  const char *mode;
  unsigned kinds;
} mode_kinds[] = {
    {"cached_row", SPACE_TILING},      {"smem_row", SPACE_TILING},
    {"smem_tile", SPACE_TILING},       {"pad_smem", SPACE_TILING},
    {"ldg", SPACE_VECTOR},             {"stream_store", SPACE_VECTOR},
    {"warp_per_row", SPACE_LAUNCH},    {"block_per_row", SPACE_LAUNCH},
    {"grid_stride", SPACE_LAUNCH},     {"persistent", SPACE_LAUNCH},
    {"thread_per_output", SPACE_LAUNCH},
    {"online", SPACE_REDUCE},          {"two_pass", SPACE_REDUCE},
    {"welford", SPACE_REDUCE},         {"two_level", SPACE_REDUCE},
    {"decoupled_lookback", SPACE_REDUCE},
    {"tf32x3", SPACE_PRECISION | SPACE_TILING},
    {"tf32_rna", SPACE_PRECISION},     {"fast_math", SPACE_PRECISION},
    {"idx32", SPACE_PRECISION},        {"idx64", SPACE_PRECISION},
    {"recip_mul", SPACE_PRECISION},    {"channels_last", SPACE_GRAPH},
};

unsigned space_knob_kinds(const char *knob, const char *mode) {
  if (strcmp(knob, "MODE") == 0) {
    const char *m = mode_canonical(mode ? mode : "");
    for (size_t i = 0; i < sizeof mode_kinds / sizeof mode_kinds[0]; i++)
      if (strcmp(mode_kinds[i].mode, m) == 0)
        return mode_kinds[i].kinds;
    return 0;
  }
  for (size_t i = 0; i < sizeof knob_kinds / sizeof knob_kinds[0]; i++)
    if (strcmp(knob_kinds[i].name, knob) == 0)
      return knob_kinds[i].kinds;
  return 0;
}

unsigned space_strategy_kinds(const char *mode) {
  static const struct {
    const char *value;
    unsigned kinds;
  } names[] = {{"space_tiling", SPACE_TILING},       {"space_vector", SPACE_VECTOR},
               {"space_launch", SPACE_LAUNCH},       {"space_reduce", SPACE_REDUCE},
               {"space_precision", SPACE_PRECISION}, {"space_graph", SPACE_GRAPH},
               {"space_any", SPACE_ALL}};
  for (size_t i = 0; mode && i < sizeof names / sizeof names[0]; i++)
    if (strcmp(names[i].value, mode) == 0)
      return names[i].kinds;
  return 0;
}

/* ---- the space ---- */

const char *space_module_name(const struct builtin_family *fam) {
  if (fam == &builtin_family_attention)
    return "attention";
  if (fam == &builtin_family_conv)
    return "conv";
  return fam->name;
}

/* Adds k's value of every dim to that dim (in order) when it is not there. */
static void dims_add_point(struct builtin_space *s, const struct knob_set *k) {
  for (int d = 0; d < s->ndims; d++) {
    struct space_dim *dim = &s->dims[d];
    if (dim_index(dim, k) >= 0 || dim->n >= SPACE_MAX_VALUES)
      continue;
    if (is_mode_dim(dim)) {
      snprintf(dim->modes[dim->n++], sizeof dim->modes[0], "%s", mode_canonical(k->mode));
      continue;
    }
    int v = *knob_slot((struct knob_set *)k, dim->knob), i = dim->n;
    while (i > 0 && dim->values[i - 1] > v) {
      dim->values[i] = dim->values[i - 1];
      i--;
    }
    dim->values[i] = v;
    dim->n++;
  }
}

int space_init(struct builtin_space *ret, const struct builtin_family *fam, json_t *match,
               json_t *profile, char *why, size_t whylen) {
  memset(ret, 0, sizeof *ret);
  ret->family = fam;
  ret->module = space_module_name(fam);
  ret->match = json_incref(match);
  space_device_of(profile ? profile : match, &ret->device);
  fam->defaults(match, &ret->defaults);
  snprintf(ret->defaults.mode, sizeof ret->defaults.mode, "%s",
           mode_canonical(ret->defaults.mode));
  space_grid_build(ret);
  dims_add_point(ret, &ret->defaults);
  ret->raw = 1;
  for (int d = 0; d < ret->ndims; d++)
    ret->raw *= ret->dims[d].n;
  (void)why;
  (void)whylen;
  return 0;
}

int space_open(struct builtin_space *ret, json_t *profile, char *why, size_t whylen) {
  const struct builtin_family *fam = NULL;
  json_t *match = NULL;
  memset(ret, 0, sizeof *ret);
  if (builtin_match(profile, &fam, &match, why, whylen) != 0)
    return -1;
  int rc = space_init(ret, fam, match, profile, why, whylen);
  json_decref(match);
  return rc;
}

void space_clear(struct builtin_space *s) {
  json_decref(s->match);
  memset(s, 0, sizeof *s);
}

/* ---- validity ---- */

/* Threads per block of a knob set: BLOCK, else the tiles' (BM/TM)*(BN/TN). */
static long long point_threads(const struct knob_set *k) {
  if (k->block)
    return k->block;
  if (k->bm && k->bn && k->tm && k->tn)
    return (long long)(k->bm / k->tm) * (k->bn / k->tn);
  return 0;
}

/* The device and the cheap structural rules (space_grid_prefilter), then check(). */
static bool point_ok(const struct builtin_space *s, const struct knob_set *k, char *why,
                     size_t whylen) {
  long long nt = point_threads(k);
  if (nt > s->device.max_threads_per_block) {
    snprintf(why, whylen, "%lld threads per block exceed the device's %d", nt,
             s->device.max_threads_per_block);
    return false;
  }
  if (k->minb > 0 && nt * k->minb > s->device.max_threads_per_sm) {
    snprintf(why, whylen, "MINB=%d blocks of %lld threads exceed the device's %d threads per SM",
             k->minb, nt, s->device.max_threads_per_sm);
    return false;
  }
  if (!space_grid_prefilter(s, k, why, whylen))
    return false;
  return s->family->check(s->match, k, why, whylen) == 0;
}

bool space_valid(const struct builtin_space *s, const struct knob_set *k, char *why,
                 size_t whylen) {
  char scratch[256];
  if (!why) {
    why = scratch;
    whylen = sizeof scratch;
  }
  struct knob_set p = s->defaults;
  for (int d = 0; d < s->ndims; d++) {
    int i = dim_index(&s->dims[d], k);
    if (i < 0) {
      snprintf(why, whylen, "%s is not a value of the grid's %s", s->dims[d].knob,
               s->dims[d].knob);
      return false;
    }
    dim_set(&s->dims[d], &p, i);
  }
  for (size_t i = 0; knob_name(i); i++) {
    if (*knob_slot(&p, knob_name(i)) != *knob_slot((struct knob_set *)k, knob_name(i))) {
      snprintf(why, whylen, "%s is not a knob of the grid and differs from the defaults' %d",
               knob_name(i), *knob_slot(&p, knob_name(i)));
      return false;
    }
  }
  if (strcmp(p.mode, mode_canonical(k->mode)) != 0) {
    snprintf(why, whylen, "MODE is not a knob of the grid and differs from the defaults'");
    return false;
  }
  return point_ok(s, &p, why, whylen);
}

bool space_fits_device(const struct builtin_space *s, json_t *candidate, char *why,
                       size_t whylen) {
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(json_object_get(candidate, "plan"), "launches"), i, l) {
    json_t *b = json_object_get(l, "block");
    long long nt = json_integer_value(json_array_get(b, 0)) *
                   (json_array_size(b) > 1 ? json_integer_value(json_array_get(b, 1)) : 1) *
                   (json_array_size(b) > 2 ? json_integer_value(json_array_get(b, 2)) : 1);
    long long smem = json_integer_value(json_object_get(l, "shared_bytes"));
    if (nt > s->device.max_threads_per_block || smem > s->device.smem_per_block) {
      snprintf(why, whylen, "launch %zu: %lld threads and %lld bytes of shared memory exceed "
               "the device's %d and %lld", i, nt, smem, s->device.max_threads_per_block,
               s->device.smem_per_block);
      return false;
    }
  }
  return true;
}

/* ---- enumeration ---- */

/* Calls fn(k, ctx) for every valid point in grid order; stops early when fn returns false. */
static void for_each_valid(const struct builtin_space *s,
                           bool (*fn)(const struct knob_set *k, void *ctx), void *ctx) {
  int idx[SPACE_MAX_DIMS] = {0};
  struct knob_set k = s->defaults;
  for (int d = 0; d < s->ndims; d++)
    dim_set(&s->dims[d], &k, 0);
  char why[256];
  for (;;) {
    if (point_ok(s, &k, why, sizeof why) && !fn(&k, ctx))
      return;
    int d = s->ndims - 1;
    while (d >= 0 && idx[d] + 1 >= s->dims[d].n) {
      idx[d] = 0;
      dim_set(&s->dims[d], &k, 0);
      d--;
    }
    if (d < 0)
      return;
    dim_set(&s->dims[d], &k, ++idx[d]);
  }
}

struct collect {
  struct knob_set *pts;
  size_t n, cap;
  bool oom;
};

static bool collect_one(const struct knob_set *k, void *ctx) {
  struct collect *c = ctx;
  if (c->n == c->cap) {
    size_t cap = c->cap ? 2 * c->cap : 256;
    struct knob_set *p = realloc(c->pts, cap * sizeof *p);
    if (!p) {
      c->oom = true;
      return false;
    }
    c->pts = p;
    c->cap = cap;
  }
  c->pts[c->n++] = *k;
  return true;
}

int space_enumerate(const struct builtin_space *s, struct knob_set **ret, size_t *ret_n) {
  struct collect c = {0};
  for_each_valid(s, collect_one, &c);
  if (c.oom) {
    free(c.pts);
    return -1;
  }
  *ret = c.pts;
  *ret_n = c.n;
  return 0;
}

static bool count_one(const struct knob_set *k, void *ctx) {
  (void)k;
  (*(size_t *)ctx)++;
  return true;
}

size_t space_count(const struct builtin_space *s) {
  size_t n = 0;
  for_each_valid(s, count_one, &n);
  return n;
}

/* ---- random draws ---- */

void space_rng_seed(struct space_rng *r, uint64_t seed) {
  r->state = seed;
}

uint64_t space_rng_next(struct space_rng *r) {
  uint64_t z = (r->state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t space_rng_below(struct space_rng *r, uint64_t n) {
  return n <= 1 ? 0 : space_rng_next(r) % n;
}

uint64_t space_hash(uint64_t h, const char *text) {
  if (!h)
    h = 0xcbf29ce484222325ULL;
  for (const unsigned char *c = (const unsigned char *)(text ? text : ""); *c; c++)
    h = (h ^ *c) * 0x100000001b3ULL;
  return (h ^ 0xff) * 0x100000001b3ULL;
}

/* Tries of the rejection sampler before it enumerates. */
#define SAMPLE_TRIES 4096

/* Draws dim d's value for a sample: the bias's (probability keep) unless d is of kinds,
 * else uniformly (MODE of kinds: among "" and the modes of kinds). */
static int draw_dim(const struct space_dim *d, struct space_rng *rng,
                    const struct knob_set *bias, unsigned kinds, double keep) {
  bool moved = kinds && dim_of_kinds(d, kinds);
  if (bias && !moved && keep > 0) {
    int b = dim_index(d, bias);
    if (b >= 0 && (double)(space_rng_next(rng) >> 11) * 0x1.0p-53 < keep)
      return b;
  }
  if (moved && is_mode_dim(d) && kinds != SPACE_ALL) {
    int pick[SPACE_MAX_VALUES], n = 0;
    for (int i = 0; i < d->n; i++)
      if (!d->modes[i][0] || (dim_value_kinds(d, i) & kinds))
        pick[n++] = i;
    return pick[space_rng_below(rng, (uint64_t)n)];
  }
  return (int)space_rng_below(rng, (uint64_t)d->n);
}

int space_sample(const struct builtin_space *s, struct space_rng *rng,
                 const struct knob_set *bias, unsigned kinds, double keep,
                 struct knob_set *ret) {
  char why[256];
  if (!bias)
    keep = 0;
  for (int t = 0; t < SAMPLE_TRIES; t++) {
    struct knob_set k = s->defaults;
    for (int d = 0; d < s->ndims; d++)
      dim_set(&s->dims[d], &k, draw_dim(&s->dims[d], rng, bias, kinds, keep));
    if (point_ok(s, &k, why, sizeof why)) {
      *ret = k;
      return 0;
    }
  }
  /* Few valid points: draw among all of them. */
  struct knob_set *pts = NULL;
  size_t n = 0;
  if (space_enumerate(s, &pts, &n) != 0 || n == 0) {
    free(pts);
    return -1;
  }
  *ret = pts[space_rng_below(rng, n)];
  free(pts);
  return 0;
}

/* ---- neighbours ---- */

/* The indexes a move of dim d from index at (-1: not a grid value; then the values
 * around v) may take under kinds (0: any kind); into out, their number returned. */
static int dim_moves(const struct space_dim *d, int at, const struct knob_set *from,
                     unsigned kinds, int out[SPACE_MAX_VALUES]) {
  int n = 0;
  if (is_mode_dim(d)) {
    bool from_kind = !kinds || (space_knob_kinds("MODE", from->mode) & kinds);
    for (int i = 0; i < d->n; i++) {
      if (i == at)
        continue;
      bool ok = !kinds || (dim_value_kinds(d, i) & kinds) || (!d->modes[i][0] && from_kind);
      if (ok)
        out[n++] = i;
    }
    return n;
  }
  if (kinds && !(space_knob_kinds(d->knob, NULL) & kinds))
    return 0;
  if (at >= 0) {
    if (at > 0)
      out[n++] = at - 1;
    if (at + 1 < d->n)
      out[n++] = at + 1;
    return n;
  }
  int v = *knob_slot((struct knob_set *)from, d->knob), below = -1, above = -1;
  for (int i = 0; i < d->n; i++) {
    if (d->values[i] < v)
      below = i;
    else if (above < 0)
      above = i;
  }
  if (below >= 0)
    out[n++] = below;
  if (above >= 0)
    out[n++] = above;
  return n;
}

struct nbrs {
  struct knob_set *pts;
  size_t n, cap;
  bool oom;
};

static void nbrs_add(struct nbrs *nb, const struct knob_set *k) {
  for (size_t i = 0; i < nb->n; i++)
    if (memcmp(&nb->pts[i], k, sizeof *k) == 0)
      return;
  if (nb->n == nb->cap) {
    size_t cap = nb->cap ? 2 * nb->cap : 32;
    struct knob_set *p = realloc(nb->pts, cap * sizeof *p);
    if (!p) {
      nb->oom = true;
      return;
    }
    nb->pts = p;
    nb->cap = cap;
  }
  nb->pts[nb->n++] = *k;
}

int space_neighbours(const struct builtin_space *s, const struct knob_set *from, unsigned kinds,
                     int max_changed, struct knob_set **ret, size_t *ret_n) {
  struct nbrs nb = {0};
  struct knob_set base = *from;
  snprintf(base.mode, sizeof base.mode, "%s", mode_canonical(from->mode));
  char why[256];
  for (int d1 = 0; d1 < s->ndims && !nb.oom; d1++) {
    int m1[SPACE_MAX_VALUES];
    int n1 = dim_moves(&s->dims[d1], dim_index(&s->dims[d1], &base), &base, kinds, m1);
    for (int a = 0; a < n1 && !nb.oom; a++) {
      struct knob_set k1 = base;
      dim_set(&s->dims[d1], &k1, m1[a]);
      if (point_ok(s, &k1, why, sizeof why))
        nbrs_add(&nb, &k1);
      if (max_changed < 2)
        continue;
      for (int d2 = 0; d2 < s->ndims && !nb.oom; d2++) {
        if (d2 == d1)
          continue;
        int m2[SPACE_MAX_VALUES];
        int n2 = dim_moves(&s->dims[d2], dim_index(&s->dims[d2], &base), &base, 0, m2);
        for (int b = 0; b < n2; b++) {
          struct knob_set k2 = k1;
          dim_set(&s->dims[d2], &k2, m2[b]);
          if (point_ok(s, &k2, why, sizeof why))
            nbrs_add(&nb, &k2);
        }
      }
    }
  }
  if (nb.oom) {
    free(nb.pts);
    return -1;
  }
  *ret = nb.pts;
  *ret_n = nb.n;
  return 0;
}

/* ---- the canonical point key ---- */

struct key_part {
  const char *name;
  char value[32];
};

static int part_cmp(const void *a, const void *b) {
  return strcmp(((const struct key_part *)a)->name, ((const struct key_part *)b)->name);
}

void space_point_key(const struct knob_set *k, char *buf, size_t len) {
  struct key_part parts[SPACE_MAX_DIMS];
  size_t n = 0;
  for (size_t i = 0; knob_name(i); i++) {
    int v = *knob_slot((struct knob_set *)k, knob_name(i));
    if (v) {
      parts[n].name = knob_name(i);
      snprintf(parts[n++].value, sizeof parts[0].value, "%d", v);
    }
  }
  if (k->mode[0]) {
    parts[n].name = "MODE";
    snprintf(parts[n++].value, sizeof parts[0].value, "%s", mode_canonical(k->mode));
  }
  qsort(parts, n, sizeof parts[0], part_cmp);
  size_t used = 0;
  if (len)
    buf[0] = 0;
  for (size_t i = 0; i < n && used < len; i++)
    used += (size_t)snprintf(buf + used, len - used, "%s%s=%s", i ? "," : "", parts[i].name,
                             parts[i].value);
}

int space_options_key(const json_t *options, char *buf, size_t len) {
  if (!json_is_array(options))
    return -1;
  struct knob_set k = {0};
  size_t i;
  json_t *o;
  json_array_foreach(options, i, o) {
    const char *text = json_string_value(o);
    char name[24];
    int value;
    if (!text)
      continue;
    if (sscanf(text, "-DMODE_%23[A-Z0-9_]=1", name) == 1) {
      for (char *c = name; *c; c++)
        *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
      snprintf(k.mode, sizeof k.mode, "%s", name);
    } else if (sscanf(text, "-D%23[A-Z]=%d", name, &value) == 2 && knob_slot(&k, name)) {
      *knob_slot(&k, name) = value;
    }
  }
  space_point_key(&k, buf, len);
  return 0;
}
