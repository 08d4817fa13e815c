/* A recorded search space: loading, look-ups and the point key (space_table.h). */
#include "gpu/replay/space_table.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WHY(...) (snprintf(why, whylen, __VA_ARGS__), -1)

/* ---- the point key ---- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "NAME=VALUE" of one option (caller frees), or NULL when it is no knob (*ret_oom set when
 * out of memory). */
static char *key_part(const char *o, bool *ret_oom) {
  char name[32], value[32], tail;
  char *out = NULL;
  if (sscanf(o, "-DMODE_%31[A-Z0-9_]=%31s", name, value) == 2 && strcmp(value, "1") == 0) {
    for (char *c = name; *c; c++)
      *c = (char)(*c >= 'A' && *c <= 'Z' ? *c + 32 : *c);
    if (asprintf(&out, "MODE=%s", strcmp(name, "3xtf32") == 0 ? "tf32x3" : name) < 0)
      out = NULL, *ret_oom = true;
    return out;
  }
  if (sscanf(o, "-D%31[A-Z]=%31[-0-9]%c", name, value, &tail) != 2 || strcmp(name, "MODE") == 0)
    return NULL;
  long v = strtol(value, NULL, 10);
  if (v == 0)
    return NULL;
  if (asprintf(&out, "%s=%ld", name, v) < 0)
    out = NULL, *ret_oom = true;
  return out;
}

int replay_point_key(const json_t *options, char *out, size_t len) {
  size_t n = json_array_size(options), used = 0;
  if (len == 0)
    return -1;
  out[0] = '\0';
  if (n == 0)
    return 0;
  char **items = calloc(n, sizeof *items);
  if (!items)
    return -1;
  size_t m = 0;
  bool oom = false;
  for (size_t i = 0; i < n && !oom; i++) {
    const char *o = json_string_value(json_array_get(options, i));
    char *part = o ? key_part(o, &oom) : NULL;
    if (part)
      items[m++] = part;
  }
  qsort(items, m, sizeof *items, cmp_str);
  int rc = oom ? -1 : 0;
  for (size_t i = 0; rc == 0 && i < m; i++) {
    int w = snprintf(out + used, len - used, "%s%s", i ? "," : "", items[i]);
    if (w < 0 || (size_t)w >= len - used)
      rc = -1;
    else
      used += (size_t)w;
  }
  for (size_t i = 0; i < m; i++)
    free(items[i]);
  free(items);
  if (rc != 0)
    out[0] = '\0';
  return rc;
}

/* ---- loading ---- */

/* A positive number of obj's key, else NAN. */
static double ms_of(const json_t *obj, const char *key) {
  const json_t *v = json_object_get(obj, key);
  return json_is_number(v) && json_number_value(v) > 0 ? json_number_value(v) : NAN;
}

static void copy_str(char *out, size_t len, const json_t *obj, const char *key) {
  const char *v = json_string_value(json_object_get(obj, key));
  snprintf(out, len, "%s", v ? v : "");
}

static struct space_task *find_task(struct space_table *t, const char *name) {
  for (size_t i = 0; name && i < t->n_tasks; i++)
    if (strcmp(t->tasks[i].name, name) == 0)
      return &t->tasks[i];
  return NULL;
}

static struct space_region *find_region(struct space_task *task, int index) {
  for (size_t i = 0; task && i < task->n_regions; i++)
    if (task->regions[i].index == index)
      return &task->regions[i];
  return NULL;
}

/* The map key of (task, region, key) (caller frees), or NULL. */
static char *map_key(const char *task, int region, const char *key) {
  char *out = NULL;
  return asprintf(&out, "%s\x1f%d\x1f%s", task, region, key) < 0 ? NULL : out;
}

static int take_task(struct space_table *t, json_t *line, char *why, size_t whylen) {
  const char *name = json_string_value(json_object_get(line, "task"));
  if (!name || !*name || strlen(name) >= sizeof t->tasks[0].name)
    return WHY("a task line needs \"task\" (a name of 1..127 bytes)");
  if (find_task(t, name))
    return WHY("task %s is given twice", name);
  if (!json_is_object(json_object_get(line, "profile")))
    return WHY("task %s has no \"profile\" object", name);
  struct space_task *grown = realloc(t->tasks, (t->n_tasks + 1) * sizeof *grown);
  if (!grown)
    return WHY("out of memory");
  t->tasks = grown;
  struct space_task *task = &t->tasks[t->n_tasks++];
  memset(task, 0, sizeof *task);
  snprintf(task->name, sizeof task->name, "%s", name);
  copy_str(task->path, sizeof task->path, line, "path");
  copy_str(task->hardware, sizeof task->hardware, line, "hardware");
  copy_str(task->commit, sizeof task->commit, line, "commit");
  task->eager_ms = ms_of(line, "eager_ms");
  task->compile_ms = ms_of(line, "compile_ms");
  task->floor_ms = ms_of(line, "floor_ms");
  task->reference_ms = ms_of(line, "reference_ms");
  task->whole_ms = ms_of(line, "whole_ms");
  task->profile = json_incref(json_object_get(line, "profile"));
  if (isnan(task->reference_ms))
    return WHY("task %s has no positive \"reference_ms\"", name);
  return 0;
}

static int take_region(struct space_table *t, json_t *line, char *why, size_t whylen) {
  const char *name = json_string_value(json_object_get(line, "task"));
  struct space_task *task = find_task(t, name);
  json_t *index = json_object_get(line, "region");
  if (!task)
    return WHY("a region line names task %s before its task line", name ? name : "(none)");
  if (!json_is_integer(index) || json_integer_value(index) < 0)
    return WHY("a region line of task %s needs \"region\" (a number from 0)", name);
  if (find_region(task, (int)json_integer_value(index)))
    return WHY("region %lld of task %s is given twice", json_integer_value(index), name);
  struct space_region *grown = realloc(task->regions, (task->n_regions + 1) * sizeof *grown);
  if (!grown)
    return WHY("out of memory");
  task->regions = grown;
  struct space_region *r = &task->regions[task->n_regions++];
  memset(r, 0, sizeof *r);
  r->index = (int)json_integer_value(index);
  copy_str(r->family, sizeof r->family, line, "family");
  copy_str(r->first, sizeof r->first, line, "first");
  r->library_ms = ms_of(line, "library_ms");
  json_t *total = json_object_get(line, "points_total");
  r->points_total = json_is_integer(total) ? (long)json_integer_value(total) : -1;
  r->best_point_ms = r->first_ms = NAN;
  return 0;
}

static int take_model(struct space_table *t, json_t *line, char *why, size_t whylen) {
  const char *name = json_string_value(json_object_get(line, "task"));
  json_t *index = json_object_get(line, "region");
  struct space_region *r = json_is_integer(index)
                               ? find_region(find_task(t, name), (int)json_integer_value(index))
                               : NULL;
  if (!r)
    return WHY("a model line names task %s region %s before its region line",
               name ? name : "(none)", json_is_integer(index) ? "given" : "(none)");
  if (r->model)
    return WHY("region %d of task %s has two models", r->index, name);
  if (!(ms_of(line, "first_ms") > 0) || !(ms_of(line, "floor_ms") > 0) ||
      !json_is_object(json_object_get(line, "effects")) || !r->first[0])
    return WHY("the model of task %s region %d needs \"first_ms\", \"floor_ms\", "
               "\"effects\" and a region line with \"first\"", name, r->index);
  r->model = json_incref(line);
  return 0;
}

static int take_point(struct space_table *t, json_t *line, char *why, size_t whylen) {
  const char *name = json_string_value(json_object_get(line, "task"));
  const char *key = json_string_value(json_object_get(line, "point"));
  json_t *index = json_object_get(line, "region");
  struct space_task *task = find_task(t, name);
  struct space_region *r = json_is_integer(index) ? find_region(task, (int)json_integer_value(index))
                                                  : NULL;
  if (!r)
    return WHY("a point line names task %s region %s before its region line",
               name ? name : "(none)", json_is_integer(index) ? "given" : "(none)");
  if (!key || strlen(key) >= REPLAY_KEY_MAX)
    return WHY("a point line of task %s needs \"point\" (a key under %d bytes)", name,
               REPLAY_KEY_MAX);
  bool correct = json_is_true(json_object_get(line, "correct"));
  double ms = ms_of(line, "ms");
  if (correct && isnan(ms))
    return WHY("point %s of task %s is correct without a positive \"ms\"", key, name);
  if (!correct && !json_is_string(json_object_get(line, "class")))
    return WHY("point %s of task %s failed without a \"class\"", key, name);
  char *k = map_key(name, r->index, key);
  if (!k)
    return WHY("out of memory");
  if (json_object_get(t->points, k)) {
    free(k);
    return WHY("point %s of task %s region %d is given twice", key, name, r->index);
  }
  int rc = json_object_set(t->points, k, line);
  free(k);
  if (rc != 0)
    return WHY("out of memory");
  r->points_recorded++;
  if (correct && (isnan(r->best_point_ms) || ms < r->best_point_ms))
    r->best_point_ms = ms;
  return 0;
}

/* The space's best and the first candidate of every task, once every line is read. */
static void finish(struct space_table *t) {
  for (size_t i = 0; i < t->n_tasks; i++) {
    struct space_task *task = &t->tasks[i];
    double sum = 0, first = 0;
    for (size_t k = 0; k < task->n_regions; k++) {
      struct space_region *r = &task->regions[k];
      struct replay_point fp;
      if (r->first[0] && space_table_lookup(t, task->name, r->index, r->first, &fp) == 0 &&
          fp.correct)
        r->first_ms = fp.ms;
      if (r->model) {  /* a model's best is the generator's, over every point */
        double best = ms_of(r->model, "best_ms");
        if (!isnan(best) && (isnan(r->best_point_ms) || best < r->best_point_ms))
          r->best_point_ms = best;
      }
      double lib = isnan(r->library_ms) ? INFINITY : r->library_ms;
      double pt = isnan(r->best_point_ms) ? INFINITY : r->best_point_ms;
      sum += lib < pt ? lib : pt;
      first += r->first[0] ? r->first_ms : lib;
    }
    double best = task->reference_ms;
    if (task->n_regions && sum < best)
      best = sum;
    if (!isnan(task->whole_ms) && task->whole_ms < best)
      best = task->whole_ms;
    task->best_ms = best;
    task->first_ms = task->n_regions && isfinite(first) ? first : NAN;
  }
}

int space_table_parse(const char *text, size_t len, struct space_table *ret, char *why,
                      size_t whylen) {
  memset(ret, 0, sizeof *ret);
  ret->points = json_object();
  ret->header = json_object();
  if (!ret->points || !ret->header) {
    space_table_clear(ret);
    return WHY("out of memory");
  }
  size_t line_no = 0;
  for (size_t pos = 0; pos < len;) {
    const char *start = text + pos;
    const char *nl = memchr(start, '\n', len - pos);
    size_t n = nl ? (size_t)(nl - start) : len - pos;
    pos += n + (nl != NULL);
    line_no++;
    size_t blank = 0;
    while (blank < n && (start[blank] == ' ' || start[blank] == '\t' || start[blank] == '\r'))
      blank++;
    if (blank == n)
      continue;
    json_error_t jerr;
    json_t *line = json_loadb(start, n, 0, &jerr);
    const char *kind = json_string_value(json_object_get(line, "kind"));
    char inner[400] = "";
    int rc = -1;
    if (!line)
      snprintf(inner, sizeof inner, "not JSON: %s", jerr.text);
    else if (!kind)
      snprintf(inner, sizeof inner, "no \"kind\"");
    else if (strcmp(kind, "space") == 0) {
      json_object_update(ret->header, line);
      json_t *format = json_object_get(line, "format");
      if (json_is_integer(format) && json_integer_value(format) != REPLAY_TABLE_FORMAT)
        snprintf(inner, sizeof inner, "format %lld (this build reads %d)",
                 json_integer_value(format), REPLAY_TABLE_FORMAT);
      else
        rc = 0;
    } else if (strcmp(kind, "task") == 0)
      rc = take_task(ret, line, inner, sizeof inner);
    else if (strcmp(kind, "region") == 0)
      rc = take_region(ret, line, inner, sizeof inner);
    else if (strcmp(kind, "point") == 0)
      rc = take_point(ret, line, inner, sizeof inner);
    else if (strcmp(kind, "model") == 0)
      rc = take_model(ret, line, inner, sizeof inner);
    else
      rc = 0;  /* a kind this build does not know is left for later formats */
    json_decref(line);
    if (rc != 0) {
      snprintf(why, whylen, "line %zu: %s", line_no, inner);
      space_table_clear(ret);
      return -1;
    }
  }
  if (ret->n_tasks == 0) {
    space_table_clear(ret);
    return WHY("no task line");
  }
  finish(ret);
  return 0;
}

int space_table_load(const char *path, struct space_table *ret, char *why, size_t whylen) {
  memset(ret, 0, sizeof *ret);
  size_t plen = strlen(path);
  bool gz = plen > 3 && strcmp(path + plen - 3, ".gz") == 0;
  FILE *f = NULL;
  if (gz) {
    char *cmd = NULL;
    if (strchr(path, '\''))
      return WHY("%s: a compressed table's path may not hold a quote", path);
    if (asprintf(&cmd, "gzip -dc -- '%s'", path) < 0)
      return WHY("out of memory");
    f = popen(cmd, "r");
    free(cmd);
  } else {
    f = fopen(path, "rb");
  }
  if (!f)
    return WHY("%s: %s", path, strerror(errno));
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  size_t got;
  while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
    len += got;
    if (len == cap) {
      char *grown = realloc(buf, cap * 2);
      if (!grown) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = grown;
      cap *= 2;
    }
  }
  int status = gz ? pclose(f) : fclose(f);
  if (!buf)
    return WHY("out of memory");
  if (status != 0) {
    free(buf);
    return WHY("%s: cannot be read%s", path, gz ? " (gzip -dc failed)" : "");
  }
  char inner[480];
  int rc = space_table_parse(buf, len, ret, inner, sizeof inner);
  free(buf);
  if (rc != 0)
    return WHY("%s: %s", path, inner);
  return 0;
}

void space_table_clear(struct space_table *t) {
  for (size_t i = 0; i < t->n_tasks; i++) {
    for (size_t k = 0; k < t->tasks[i].n_regions; k++)
      json_decref(t->tasks[i].regions[k].model);
    json_decref(t->tasks[i].profile);
    free(t->tasks[i].regions);
  }
  free(t->tasks);
  json_decref(t->points);
  json_decref(t->header);
  memset(t, 0, sizeof *t);
}

const struct space_task *space_table_task(const struct space_table *t, const char *name) {
  return find_task((struct space_table *)t, name);
}

const struct space_region *space_task_region(const struct space_task *task, int index) {
  return find_region((struct space_task *)task, index);
}

json_t *space_table_point(const struct space_table *t, const char *task, int region,
                          const char *key) {
  char *k = map_key(task, region, key);
  json_t *p = k ? json_object_get(t->points, k) : NULL;
  free(k);
  return p;
}

/* ---- the synthetic model ---- */

static uint64_t fnv1a(uint64_t h, const char *text) {
  for (const unsigned char *c = (const unsigned char *)text; *c; c++)
    h = (h ^ *c) * 1099511628211ull;
  return h;
}

static uint64_t splitmix(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* A uniform draw in (0, 1) from the stream. */
static double uniform(uint64_t *state) {
  return ((double)(splitmix(state) >> 11) + 0.5) / 9007199254740992.0;
}

/* The effect of knob name at value (a "0" when the point does not set it) in effects. */
static double effect(json_t *effects, const char *name, const char *value) {
  json_t *v = json_object_get(json_object_get(effects, name), value);
  return json_is_number(v) ? json_number_value(v) : 0;
}

/* The value of knob name in key ("0" when absent) into out. */
static void key_value(const char *key, const char *name, char *out, size_t len) {
  size_t n = strlen(name);
  for (const char *p = key; p && *p;) {
    if (strncmp(p, name, n) == 0 && p[n] == '=') {
      size_t v = strcspn(p + n + 1, ",");
      snprintf(out, len, "%.*s", (int)v, p + n + 1);
      return;
    }
    p = strchr(p, ',');
    p = p ? p + 1 : NULL;
  }
  snprintf(out, len, "0");
}

/* The model's answer for key (space/README.md, "Model lines"). */
static void model_point(const struct space_task *task, const struct space_region *r,
                        const char *key, struct replay_point *ret) {
  json_t *m = r->model, *effects = json_object_get(m, "effects"), *bad = json_object_get(m, "bad");
  char seed[32];
  snprintf(seed, sizeof seed, "%lld|", (long long)json_integer_value(json_object_get(m, "seed")));
  uint64_t state = fnv1a(fnv1a(fnv1a(fnv1a(14695981039346656037ull, seed), task->name), "|"), key);
  double u_fail = uniform(&state), u1 = uniform(&state), u2 = uniform(&state);
  bool first = strcmp(key, r->first) == 0;
  memset(ret, 0, sizeof *ret);
  ret->modelled = true;
  const char *name;
  json_t *values;
  char value[64];
  if (!first) {
    json_object_foreach(bad, name, values) {  /* a knob value that fails every point */
      key_value(key, name, value, sizeof value);
      const char *cls = json_string_value(json_object_get(values, value));
      if (cls) {
        snprintf(ret->cls, sizeof ret->cls, "%s", cls);
        snprintf(ret->stage, sizeof ret->stage, "%.*s", (int)strcspn(cls, "/"), cls);
        return;
      }
    }
    double rate = json_number_value(json_object_get(m, "fail_rate"));
    if (u_fail < rate) {
      snprintf(ret->cls, sizeof ret->cls, "correctness/mismatch");
      snprintf(ret->stage, sizeof ret->stage, "correctness");
      return;
    }
  }
  double log_ms = log(json_number_value(json_object_get(m, "first_ms")));
  char first_value[64];
  json_object_foreach(effects, name, values) {  /* Jansson keeps the file's order */
    key_value(key, name, value, sizeof value);
    key_value(r->first, name, first_value, sizeof first_value);
    log_ms += effect(effects, name, value) - effect(effects, name, first_value);
  }
  if (!first)
    log_ms += json_number_value(json_object_get(m, "noise_sd")) * sqrt(-2 * log(u1)) *
              cos(2 * M_PI * u2);
  double ms = exp(log_ms), lo = 1.02 * json_number_value(json_object_get(m, "floor_ms"));
  double x = 20 * (ms - lo) / lo;  /* a smooth clamp: ms itself 10% above lo */
  ret->ms = lo + lo * (x > 30 ? x : log1p(exp(x))) / 20;
  ret->correct = true;
}

int space_table_lookup(const struct space_table *t, const char *task, int region,
                       const char *key, struct replay_point *ret) {
  memset(ret, 0, sizeof *ret);
  json_t *p = space_table_point(t, task, region, key);
  if (p) {
    ret->correct = json_is_true(json_object_get(p, "correct"));
    ret->ms = ret->correct ? json_number_value(json_object_get(p, "ms")) : NAN;
    const char *cls = json_string_value(json_object_get(p, "class"));
    const char *stage = json_string_value(json_object_get(p, "stage"));
    const char *msg = json_string_value(json_object_get(p, "message"));
    if (!ret->correct) {
      snprintf(ret->cls, sizeof ret->cls, "%s", cls ? cls : "correctness/mismatch");
      if (stage)
        snprintf(ret->stage, sizeof ret->stage, "%s", stage);
      else  /* the class's first part is its stage (compile/..., correctness/...) */
        snprintf(ret->stage, sizeof ret->stage, "%.*s", (int)strcspn(ret->cls, "/"), ret->cls);
      snprintf(ret->message, sizeof ret->message, "%s", msg ? msg : "");
    }
    return 0;
  }
  const struct space_task *tk = space_table_task(t, task);
  const struct space_region *r = tk ? space_task_region(tk, region) : NULL;
  if (!r || !r->model)
    return -1;
  model_point(tk, r, key, ret);
  return 0;
}
