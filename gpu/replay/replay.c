/* opforge-replay: an evaluator that answers from a recorded space table instead of a GPU
 * (docs/architecture.md, "Replaying a recorded space"; the table: space/README.md). It
 * speaks the evaluator protocol (docs/architecture.md, "Evaluator protocol"), so a server
 * started with `--evaluator opforge-replay` runs real searches (the builtin proposer,
 * HTAM, the tree) on the CPU in seconds, against times measured once on a GPU.
 *
 *   opforge-replay [--table FILE] [--device N] [other evaluator options, ignored]
 *   the table: --table, else $OPFORGE_REPLAY_TABLE (the server must pass its
 *   environment on: `opforge serve --sandbox none`)
 *   opforge-replay --table FILE --query    reads "TASK REGION KEY" lines and prints
 *   what the table says of each point as a JSON line ({"task", "region", "point",
 *   "recorded": bool, "correct", "ms", "class", "modelled"}): the synthetic table's
 *   generator takes a modelled space's best from it
 *
 * load_task finds the table's task by a line "# opforge-replay-task: NAME" of the
 * reference source, else by the submission's name (NAME, or NAME.anything); a task the
 * table lacks is refused (ok:false, class replay/unknown_task). profile answers the
 * recorded profile with the task's eager, compile and floor times. evaluate answers:
 *   - a plain kernel (one region, the whole task): the point of region 0 whose key
 *     (replay_point_key of its -D options) it is;
 *   - a program: the sum over its regions of the recorded point's time (a generated
 *     region) or the region's library time (its library steps, the time shared equally
 *     among them), as "steps_ms"; a program of library steps only is the reference
 *     (reference_ms) and {"library": "model"} the whole model (whole_ms);
 *   - a recorded failure as that failure (its stage and class, the message saying it
 *     was recorded);
 *   - a point the table lacks as a failure of stage "protocol" and class
 *     replay/not_recorded, naming the task, the region and the key. The engine spends
 *     no step on it, records and learns nothing, counts it in the task's
 *     progress.not_recorded and treats the program as evaluated (engine/loop_step.c).
 * A program's time is the sum of its regions' recorded times: graph replay, and the
 * launches saved by merging regions, are not modelled. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpu/replay/space_table.h"

static FILE *proto;                 /* the protocol stream (the original fd 1) */
static struct space_table table;
static const struct space_task *task; /* the loaded task, or NULL */

static void send_line(json_t *v) {
  char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
  if (text) {
    fprintf(proto, "%s\n", text);
    fflush(proto);
  }
  free(text);
  json_decref(v);
}

static json_t *error_reply(json_int_t id, const char *stage, const char *cls, const char *msg) {
  return json_pack("{s:I, s:b, s:{s:s, s:s, s:s, s:s}, s:b}", "id", id, "ok", 0, "error",
                   "stage", stage, "class", cls, "message", msg, "traceback", "", "fatal", 0);
}

static json_t *ok_reply(json_int_t id, json_t *result) {
  return json_pack("{s:I, s:b, s:o}", "id", id, "ok", 1, "result", result);
}

static const char *arg_value(int argc, char **argv, const char *name) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0)
      return argv[i + 1];
  return NULL;
}

/* ---- load_task and profile ---- */

/* The task a load_task names (see the header), or NULL. */
static const struct space_task *find_task(json_t *req) {
  const char *source = json_string_value(json_object_get(req, "source"));
  const char *mark = "# opforge-replay-task: ";
  const char *at = source ? strstr(source, mark) : NULL;
  if (at) {
    at += strlen(mark);
    char name[128];
    size_t n = strcspn(at, "\r\n");
    while (n > 0 && (at[n - 1] == ' ' || at[n - 1] == '\t'))
      n--;
    snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), at);
    return space_table_task(&table, name);
  }
  const char *name = json_string_value(json_object_get(req, "name"));
  const struct space_task *best = NULL;
  for (size_t i = 0; name && i < table.n_tasks; i++) {
    size_t len = strlen(table.tasks[i].name);
    if (strncmp(name, table.tasks[i].name, len) == 0 && (name[len] == '\0' || name[len] == '.') &&
        (!best || len > strlen(best->name)))
      best = &table.tasks[i];
  }
  return best;
}

static json_t *num_or_null(double x) {
  return isfinite(x) ? json_real(x) : json_null();
}

static json_t *profile_result(void) {
  json_t *p = json_deep_copy(task->profile);
  if (!p)
    return NULL;
  json_object_set_new(p, "eager_ms", num_or_null(task->eager_ms));
  json_object_set_new(p, "compile_ms", num_or_null(task->compile_ms));
  json_object_set_new(p, "floor_ms", num_or_null(task->floor_ms));
  return p;
}

/* ---- evaluate ---- */

/* Why an evaluation has no time: the first failure met, with its stage and class. */
struct miss {
  char stage[16], cls[96], message[700];
};

/* The result of a candidate that failed (caller owns). */
static json_t *failed_result(const struct miss *m) {
  bool compiled = strcmp(m->stage, "compile") != 0;
  return json_pack("{s:{s:b, s:f, s:s}, s:b, s:[], s:n, s:n, s:n, s:n, s:{s:s, s:s, s:s}}",
                   "compile", "ok", compiled, "ms", 0.0, "log", compiled ? "" : m->message,
                   "correct", 0, "trials", "checks", "time", "speedup", "floor_fraction",
                   "failure", "stage", m->stage, "class", m->cls, "message", m->message);
}

/* The result of a correct candidate of ms (caller owns). */
static json_t *correct_result(double ms) {
  json_t *speedup = json_pack("{s:o, s:o}", "eager", num_or_null(task->eager_ms / ms),
                              "compile", num_or_null(task->compile_ms / ms));
  return json_pack("{s:{s:b, s:f, s:s}, s:b, s:[{s:i, s:b, s:f, s:f}], s:{s:b, s:b, s:b, s:b},"
                   " s:{s:f, s:f, s:i, s:f}, s:o, s:o, s:n, s:b}",
                   "compile", "ok", 1, "ms", 0.0, "log", "", "correct", 1, "trials", "seed", 1,
                   "ok", 1, "max_abs", 0.0, "max_rel", 0.0, "checks", "inputs_unchanged", 1,
                   "outputs_written", 1, "repeat_consistent", 1, "above_floor", 1, "time",
                   "median_ms", ms, "mean_ms", ms, "reps", 1, "rse", 0.0, "speedup", speedup,
                   "floor_fraction", num_or_null(task->floor_ms / ms), "failure", "replayed", 1);
}

/* The recorded time of point key of region (the candidate's options, borrowed) into
 * *ret_ms; false with *m filled when it failed or is not recorded. */
static bool point_ms(int region, const json_t *options, double *ret_ms, struct miss *m) {
  char key[REPLAY_KEY_MAX];
  if (replay_point_key(options, key, sizeof key) != 0) {
    snprintf(m->stage, sizeof m->stage, "protocol");
    snprintf(m->cls, sizeof m->cls, "%s", REPLAY_NOT_RECORDED);
    snprintf(m->message, sizeof m->message, "region %d of task %s: the point's key is longer "
             "than %d bytes", region, task->name, REPLAY_KEY_MAX - 1);
    return false;
  }
  struct replay_point p;
  if (space_table_lookup(&table, task->name, region, key, &p) != 0) {
    snprintf(m->stage, sizeof m->stage, "protocol");
    snprintf(m->cls, sizeof m->cls, "%s", REPLAY_NOT_RECORDED);
    snprintf(m->message, sizeof m->message, "point %.500s of region %d of task %s is not in "
             "the table", key[0] ? key : "(no knobs)", region, task->name);
    return false;
  }
  if (p.correct) {
    *ret_ms = p.ms;
    return true;
  }
  snprintf(m->stage, sizeof m->stage, "%s", p.stage);
  snprintf(m->cls, sizeof m->cls, "%s", p.cls);
  snprintf(m->message, sizeof m->message, "%s on %s: %s", p.modelled ? "modelled" : "recorded",
           task->hardware[0] ? task->hardware : "the GPU", p.message[0] ? p.message : p.cls);
  return false;
}

static bool library_step(json_t *step) {
  return json_object_get(step, "library") != NULL;
}

/* The result of a program (caller owns). */
static json_t *program_result(json_t *program) {
  json_t *steps = json_object_get(program, "steps"), *step;
  size_t n = json_array_size(steps), i, library = 0;
  json_array_foreach(steps, i, step)
    library += library_step(step);
  struct miss m = {0};
  if (n == 1 && json_equal(json_object_get(json_array_get(steps, 0), "library"),
                           json_string("model")) &&
      !json_object_get(json_array_get(steps, 0), "node")) {
    if (isnan(task->whole_ms)) {
      snprintf(m.stage, sizeof m.stage, "protocol");
      snprintf(m.cls, sizeof m.cls, "%s", REPLAY_NOT_RECORDED);
      snprintf(m.message, sizeof m.message, "the whole model of task %s is not in the table",
               task->name);
      return failed_result(&m);
    }
    json_t *r = correct_result(task->whole_ms);
    json_object_set_new(r, "steps_ms", json_pack("[f]", task->whole_ms));
    json_object_set_new(r, "library_ms", json_real(task->whole_ms));
    return r;
  }
  double *ms = calloc(n ? n : 1, sizeof *ms);
  if (!ms)
    return NULL;
  double total = 0;
  bool ok = true;
  if (library == n) {  /* the reference: its regions' shares of reference_ms */
    for (i = 0; i < n; i++)
      ms[i] = task->reference_ms / (double)n;
    total = task->reference_ms;
  } else {
    /* Library steps share their region's library time equally. */
    json_array_foreach(steps, i, step) {
      json_t *region = json_object_get(step, "region");
      int k = json_is_integer(region) ? (int)json_integer_value(region) : -1;
      if (!library_step(step)) {
        if (!(ok = point_ms(k, json_object_get(step, "options"), &ms[i], &m)))
          break;
        continue;
      }
      const struct space_region *r = space_task_region(task, k);
      size_t same = 0, j;
      json_t *other;
      json_array_foreach(steps, j, other)
        same += library_step(other) && json_equal(json_object_get(other, "region"), region);
      if (!r || isnan(r->library_ms)) {
        ok = false;
        snprintf(m.stage, sizeof m.stage, "protocol");
        snprintf(m.cls, sizeof m.cls, "%s", REPLAY_NOT_RECORDED);
        snprintf(m.message, sizeof m.message, "the library time of region %d of task %s is "
                 "not in the table", k, task->name);
        break;
      }
      ms[i] = r->library_ms / (double)same;
    }
    for (i = 0; ok && i < n; i++)
      total += ms[i];
  }
  json_t *result;
  if (ok) {
    result = correct_result(total);
    json_t *steps_ms = json_array();
    double lib = 0;
    for (i = 0; i < n; i++) {
      json_array_append_new(steps_ms, json_real(ms[i]));
      lib += library_step(json_array_get(steps, i)) ? ms[i] : 0;
    }
    json_object_set_new(result, "steps_ms", steps_ms);
    json_object_set_new(result, "library_ms", json_real(lib));
    json_object_set_new(result, "graph", json_pack("{s:O, s:b, s:s, s:s}", "mode",
                                                   json_object_get(program, "graph"), "captured",
                                                   0, "used", "stream", "reason",
                                                   "a replay times no graph"));
  } else {
    result = failed_result(&m);
  }
  free(ms);
  return result;
}

static json_t *evaluate(json_t *req, json_int_t id) {
  if (!task)
    return error_reply(id, "protocol", "protocol/no_task", "evaluate before load_task");
  json_t *cand = json_object_get(req, "candidate");
  json_t *program = json_object_get(cand, "program");
  json_t *result;
  if (json_is_object(program)) {
    result = program_result(program);
  } else if (json_is_string(json_object_get(cand, "source"))) {
    double ms = 0;
    struct miss m = {0};
    result = point_ms(0, json_object_get(cand, "options"), &ms, &m) ? correct_result(ms)
                                                                    : failed_result(&m);
  } else {
    return error_reply(id, "protocol", "protocol/bad_request",
                       "a candidate needs a source or a program");
  }
  return result ? ok_reply(id, result)
                : error_reply(id, "protocol", "protocol/out_of_memory", "out of memory");
}

static json_t *answer(json_t *req, bool *ret_bye) {
  const char *op = json_string_value(json_object_get(req, "op"));
  json_int_t id = json_integer_value(json_object_get(req, "id"));
  if (!op)
    return error_reply(id, "protocol", "protocol/bad_request", "request without an op");
  if (strcmp(op, "load_task") == 0) {
    task = find_task(req);
    if (!task) {
      const char *name = json_string_value(json_object_get(req, "name"));
      char msg[300];
      snprintf(msg, sizeof msg, "task %s is not in the table", name ? name : "(unnamed)");
      return error_reply(id, "load", "replay/unknown_task", msg);
    }
    return ok_reply(id, json_pack("{s:b, s:{s:[], s:{}}, s:s}", "loaded", 1, "init_inputs", "args",
                                  "kwargs", "replay_task", task->name));
  }
  if (strcmp(op, "profile") == 0) {
    if (!task)
      return error_reply(id, "protocol", "protocol/no_task", "profile before load_task");
    json_t *p = profile_result();
    return p ? ok_reply(id, p) : error_reply(id, "protocol", "protocol/out_of_memory",
                                             "out of memory");
  }
  if (strcmp(op, "evaluate") == 0)
    return evaluate(req, id);
  if (strcmp(op, "shutdown") == 0) {
    *ret_bye = true;
    return ok_reply(id, json_pack("{s:b}", "bye", 1));
  }
  return error_reply(id, "protocol", "protocol/unknown_op", op);
}

/* --query: one JSON line per "TASK REGION KEY" line of stdin. */
static int query(void) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, stdin)) > 0) {
    while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
      line[--len] = '\0';
    char name[128];
    int region = -1, used = 0;
    if (sscanf(line, "%127s %d %n", name, &region, &used) < 2) {
      fprintf(stderr, "opforge-replay: --query: '%s' is not TASK REGION KEY\n", line);
      free(line);
      return 2;
    }
    const char *key = line + used;
    struct replay_point p;
    bool found = space_table_lookup(&table, name, region, key, &p) == 0;
    json_t *out = json_pack("{s:s, s:i, s:s, s:b}", "task", name, "region", region, "point", key,
                            "recorded", found);
    if (found) {
      json_object_set_new(out, "correct", json_boolean(p.correct));
      json_object_set_new(out, "ms", p.correct ? json_real(p.ms) : json_null());
      json_object_set_new(out, "class", p.correct ? json_null() : json_string(p.cls));
      json_object_set_new(out, "modelled", json_boolean(p.modelled));
    }
    char *text = json_dumps(out, JSON_COMPACT);
    printf("%s\n", text ? text : "{}");
    free(text);
    json_decref(out);
  }
  free(line);
  return 0;
}

int main(int argc, char **argv) {
  bool query_mode = false;
  for (int i = 1; i < argc; i++)
    query_mode = query_mode || strcmp(argv[i], "--query") == 0;
  int fd = query_mode ? 1 : dup(1);  /* the protocol on a private fd, fd 1 pointed at stderr */
  if (!query_mode && (fd < 0 || dup2(2, 1) < 0 || !(proto = fdopen(fd, "w"))))
    return 2;
  const char *path = arg_value(argc, argv, "--table");
  if (!path)
    path = getenv("OPFORGE_REPLAY_TABLE");
  if (!path || !*path) {
    fprintf(stderr, "opforge-replay: no table: pass --table FILE or set OPFORGE_REPLAY_TABLE\n");
    return 2;
  }
  char why[600];
  if (space_table_load(path, &table, why, sizeof why) != 0) {
    fprintf(stderr, "opforge-replay: %s\n", why);
    return 2;
  }
  if (query_mode) {
    int rc = query();
    space_table_clear(&table);
    return rc;
  }
  const char *device = arg_value(argc, argv, "--device");
  long index = device ? strtol(device, NULL, 10) : 0;
  const char *hw = json_string_value(json_object_get(table.header, "hardware"));
  if (!hw)
    hw = table.tasks[0].hardware[0] ? table.tasks[0].hardware : "recorded GPU";
  char name[160];
  snprintf(name, sizeof name, "replay of %s", hw);
  send_line(json_pack("{s:s, s:i, s:{s:s, s:I, s:s, s:I}}", "event", "ready", "pid",
                      (int)getpid(), "device", "name", name, "index", (json_int_t)index,
                      "capability", "9.0", "memory_bytes", (json_int_t)150000000000LL));
  char *line = NULL;
  size_t cap = 0;
  bool bye = false;
  while (!bye && getline(&line, &cap, stdin) > 0) {
    json_t *req = json_loads(line, 0, NULL);
    send_line(req ? answer(req, &bye)
                  : error_reply(0, "protocol", "protocol/bad_json", "request is not JSON"));
    json_decref(req);
  }
  free(line);
  space_table_clear(&table);
  fclose(proto);
  return 0;
}
