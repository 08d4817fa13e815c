/* opforge-space-points: the points of a task's search space under the builtin proposer,
 * for recording a space table (tests/gpu/space_record) and for the synthetic table
 * (space/make_synthetic.py). No GPU: it reads a profile and runs the proposer only.
 *
 *   opforge-space-points PROFILE.json [--max N] [--depth D] [--candidates] [--only KEYS]
 *
 * The profile is the evaluator's answer to `profile` (for the replay to match, the one
 * the table records). The graph is cut into regions as the engine cuts it
 * (engine/partition.c, with the builtin proposer). The space of a generated region is
 *   - with the builtin space (proposers/builtin/space.h): its valid grid
 *     points (space_enumerate), the proposer's starting point first;
 *   - without it: what the engine's steps can reach: the starting point, then every
 *     seed-memory strategy's knob move that applies to the region's family, from the
 *     starting point (a large step) and from every point found (a small step), up to D
 *     moves from the start (default 4) or until no move gives a new point. (The bound
 *     also keeps the closure off knob sets the committed families cannot check: ROWS
 *     doubled six times from 1 divides by zero in row_layout_resolve.)
 * At most N points (default 100000) per region are listed. Points are told apart by their
 * key (replay_point_key of the candidate's options, the replay evaluator's look-up).
 * Prints JSON lines:
 *   {"kind":"region","region":K,"family":F,"library_first":B,"points_total":N,
 *    "complete":B,"first":KEY,"enumeration":"grid"|"moves","nodes":[...]}
 *   {"kind":"point","region":K,"point":KEY[,"candidate":{source,options,plan}]}
 * one region line before its points; library regions get a region line with "family"
 * null and no points. --candidates adds each point's candidate (a grid point whose plan
 * does not fit the device is then left out, as a proposal leaves it); --only KEYS (a file
 * of "REGION KEY" lines) lists only those points. Exit 0, or 2 on a bad profile or
 * usage. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/embedded.h"
#include "engine/partition.h"
#include "gpu/replay/space_table.h"
#include "proposers/builtin/propose.h"
#include "proposers/proposer.h"

#if defined(__has_include)
#if __has_include("proposers/builtin/space.h")
#include "proposers/builtin/space.h"
#define HAVE_BUILTIN_SPACE 1
#endif
#endif

extern const struct embedded_file opforge_seed_memory[];

struct opts {
  long max;
  long depth;     /* moves from the start, the closure only */
  bool candidates;
  json_t *only;  /* {"REGION KEY": true}, or NULL for every point */
};

/* One region's points as they are found: keys in order, and their candidates. */
struct found {
  json_t *order;  /* keys */
  json_t *cands;  /* key -> candidate */
  json_t *depth;  /* key -> moves from the start (the closure) */
  bool complete;
};

static void print_line(FILE *out, json_t *v) {
  char *text = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  if (text)
    fprintf(out, "%s\n", text);
  free(text);
  json_decref(v);
}

/* Adds the point key with its candidate cand (taken; JSON null when it was not generated)
 * unless known; false when it was known. */
static bool add_key(struct found *f, const char *key, json_t *cand, const struct opts *o) {
  if (json_object_get(f->cands, key)) {
    json_decref(cand);
    return false;
  }
  if ((long)json_array_size(f->order) >= o->max) {
    json_decref(cand);
    f->complete = false;
    return false;
  }
  json_object_set_new(f->cands, key, cand ? cand : json_null());
  json_array_append_new(f->order, json_string(key));
  return true;
}

/* Adds cand (taken) under its key; false when it was known or has no key. */
static bool add_point(struct found *f, json_t *cand, const struct opts *o) {
  char key[REPLAY_KEY_MAX];
  if (!cand || replay_point_key(json_object_get(cand, "options"), key, sizeof key) != 0) {
    json_decref(cand);
    return false;
  }
  return add_key(f, key, cand, o);
}

/* True when the seed-memory strategy local applies to family. */
static bool applies(json_t *local, const char *family) {
  json_t *fams = json_object_get(local, "families"), *f;
  size_t i;
  if (!json_is_object(json_object_get(local, "knob_move")))
    return false;
  json_array_foreach(fams, i, f) {
    if (json_is_string(f) && strcmp(json_string_value(f), family) == 0)
      return true;
  }
  return false;
}

/* The closure of the seed memory's moves from the starting point (already in f). */
static void move_closure(json_t *profile, const char *family, json_t *seed, struct found *f,
                         const struct opts *o) {
  char why[1024];
  bool unsupported = false;
  json_t *locals = json_object_get(seed, "locals");
  for (size_t at = 0; at < json_array_size(f->order) && f->complete; at++) {
    const char *parent_key = json_string_value(json_array_get(f->order, at));
    json_int_t d = json_integer_value(json_object_get(f->depth, parent_key));
    if (d >= o->depth)
      continue;
    json_t *parent = json_object_get(f->cands, parent_key);
    size_t i;
    json_t *local;
    json_array_foreach(locals, i, local) {
      if (!applies(local, family))
        continue;
      json_t *cand = NULL;
      size_t before = json_array_size(f->order);
      if (builtin_propose_knobs(profile, json_object_get(local, "knob_move"),
                                json_object_get(parent, "options"), &cand, why, sizeof why,
                                &unsupported) == 0)
        add_point(f, cand, o);
      else
        json_decref(cand);
      if (json_array_size(f->order) > before)
        json_object_set_new(f->depth,
                            json_string_value(json_array_get(f->order, before)),
                            json_integer(d + 1));
      parent = json_object_get(f->cands, parent_key);
    }
  }
}

#ifdef HAVE_BUILTIN_SPACE
/* Every valid point of the region's builtin space. Returns 0, or -1 when the profile
 * opens no space (the caller falls back to the moves). Without --candidates the keys come
 * from the knobs (space_point_key, the same string as the candidate's options give) and
 * nothing is generated; with --only, only those points are. */
static int grid_points(json_t *profile, int region, struct found *f, const struct opts *o) {
  char why[512];
  struct builtin_space sp;
  if (space_open(&sp, profile, why, sizeof why) != 0)
    return -1;
  struct knob_set *pts = NULL;
  size_t n = 0;
  if (space_enumerate(&sp, &pts, &n) != 0) {
    space_clear(&sp);
    return -1;
  }
  for (size_t i = 0; i < n && f->complete; i++) {
    char key[REPLAY_KEY_MAX], id[REPLAY_KEY_MAX + 16];
    space_point_key(&pts[i], key, sizeof key);
    snprintf(id, sizeof id, "%d %s", region, key);
    if (!o->candidates || (o->only && !json_object_get(o->only, id))) {
      add_key(f, key, NULL, o);
      continue;
    }
    json_t *cand = NULL;
    if (sp.family->generate(sp.match, &pts[i], &cand, why, sizeof why) != 0 ||
        !space_fits_device(&sp, cand, why, sizeof why)) {
      json_decref(cand);
      continue;
    }
    add_point(f, cand, o);
  }
  free(pts);
  space_clear(&sp);
  return 0;
}
#endif

/* The points of one generated region (its sub-profile borrowed) into f; the enumeration
 * used into *ret_how. */
static void space_points(json_t *profile, int region, const char *family, json_t *seed,
                         struct found *f, const struct opts *o, const char **ret_how) {
  char why[1024];
  bool unsupported = false;
  json_t *cand = NULL;
  if (builtin_propose_knobs(profile, NULL, NULL, &cand, why, sizeof why, &unsupported) == 0)
    add_point(f, cand, o);
  else
    fprintf(stderr, "opforge-space-points: %s: no starting point: %s\n", family, why);
#ifdef HAVE_BUILTIN_SPACE
  if (grid_points(profile, region, f, o) == 0) {
    *ret_how = "grid";
    return;
  }
#endif
  *ret_how = "moves";
  move_closure(profile, family, seed, f, o);
}

static int usage(void) {
  fprintf(stderr, "usage: opforge-space-points PROFILE.json [--max N] [--depth D] "
                  "[--candidates] [--only KEYS]\n");
  return 2;
}

/* Reads --only's file of "REGION KEY" lines into o->only. */
static int read_only(const char *path, struct opts *o) {
  FILE *in = fopen(path, "r");
  if (!in) {
    perror(path);
    return -1;
  }
  o->only = json_object();
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, in)) > 0) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
      line[--len] = '\0';
    if (len > 0)
      json_object_set_new(o->only, line, json_true());
  }
  free(line);
  fclose(in);
  return 0;
}

int main(int argc, char **argv) {
  const char *path = NULL;
  struct opts o = {.max = 100000, .depth = 4};
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--max") == 0 && i + 1 < argc)
      o.max = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--depth") == 0 && i + 1 < argc)
      o.depth = strtol(argv[++i], NULL, 10);
    else if (strcmp(argv[i], "--candidates") == 0)
      o.candidates = true;
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      if (read_only(argv[++i], &o) != 0)
        return 2;
    } else if (argv[i][0] != '-' && !path)
      path = argv[i];
    else
      return usage();
  }
  if (!path || o.max < 1)
    return usage();
  json_error_t jerr;
  json_t *profile = json_load_file(path, 0, &jerr);
  json_t *seed = json_loads(opforge_seed_memory[0].data, 0, NULL);
  if (!json_is_object(profile) || !seed) {
    fprintf(stderr, "opforge-space-points: %s: %s\n", path, profile ? "not an object" : jerr.text);
    json_decref(profile);
    json_decref(seed);
    return 2;
  }
  struct proposer p;
  struct partition pt;
  if (proposer_builtin_new(&p) != 0 || partition_build(profile, &p, &pt) != 0) {
    fprintf(stderr, "opforge-space-points: out of memory\n");
    return 2;
  }
  for (size_t k = 0; k < pt.n; k++) {
    const struct region *r = &pt.regions[k];
    if (!r->generated) {
      print_line(stdout, json_pack("{s:s, s:i, s:n, s:b, s:i, s:b, s:n, s:O, s:s}", "kind",
                                   "region", "region", (int)k, "family", "library_first", 0,
                                   "points_total", 0, "complete", 1, "first", "nodes", r->nodes,
                                   "reason", r->reason));
      continue;
    }
    struct found f = {.order = json_array(), .cands = json_object(), .depth = json_object(),
                      .complete = true};
    const char *how = "moves";
    space_points(r->profile, (int)k, r->family, seed, &f, &o, &how);
    json_t *first = json_array_get(f.order, 0);
    print_line(stdout, json_pack("{s:s, s:i, s:s, s:b, s:i, s:b, s:O?, s:s, s:O}", "kind",
                                 "region", "region", (int)k, "family", r->family, "library_first",
                                 r->library_first, "points_total", (int)json_array_size(f.order),
                                 "complete", f.complete, "first", first, "enumeration", how,
                                 "nodes", r->nodes));
    size_t i;
    json_t *key;
    json_array_foreach(f.order, i, key) {
      char id[REPLAY_KEY_MAX + 16];
      snprintf(id, sizeof id, "%zu %s", k, json_string_value(key));
      if (o.only && !json_object_get(o.only, id))
        continue;
      json_t *line = json_pack("{s:s, s:i, s:O}", "kind", "point", "region", (int)k, "point",
                               key);
      json_t *cand = json_object_get(f.cands, json_string_value(key));
      if (o.candidates && json_is_object(cand))
        json_object_set(line, "candidate", cand);
      print_line(stdout, line);
    }
    json_decref(f.order);
    json_decref(f.cands);
    json_decref(f.depth);
  }
  partition_clear(&pt);
  if (p.free)
    p.free(p.self);
  json_decref(profile);
  json_decref(seed);
  json_decref(o.only);
  return 0;
}
