/* GET /v1/tasks/{id}/best: the best correct candidate of a task, as its CUDA source and
 * launch plan (format=cuda) or as a KernelBench file defining ModelNew (format=kernelbench);
 * pure=true refuses a program that runs library steps; generated=true takes the fastest
 * correct candidate that runs generated code when the best runs library steps only;
 * elementwise=true takes the fastest correct candidate whose every check passed the task's
 * element-wise tolerance, none judged by the float64 accuracy budget (KernelBench's eval
 * compares element-wise). A KernelBench file of a best that runs library steps only is
 * chosen by choose_library_export, so that it holds a kernel where it can. */
#include "handlers/task_best.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/export_kernelbench.h"
#include "handlers/handlers.h"
#include "server/app.h"
#include "base/log.h"
#include "server/reply.h"
#include "store/candidates.h"
#include "store/tasks.h"

#define PYTHON_CONTENT_TYPE "text/x-python; charset=utf-8"

enum best_format { FORMAT_CUDA, FORMAT_KERNELBENCH };

/* The query of the request. */
struct best_query {
  enum best_format format;
  bool pure;      /* generated code only: no library step */
  bool generated; /* some generated code: the fastest such candidate if the best has none */
  bool elementwise; /* every check passed element-wise: no float64 accuracy budget */
};

/* Reads the boolean query parameter name ("true" or "false", absent is false) into *ret;
 * queues 400 invalid_query naming it and returns -1 when it is anything else. */
static int parse_flag(struct request *req, const char *name, bool *ret,
                      enum MHD_Result *ret_result) {
  const char *v = request_query(req, name);
  *ret = v && strcmp(v, "true") == 0;
  if (v && !*ret && strcmp(v, "false") != 0) {
    *ret_result = reply_error(req, API_ERR_INVALID_QUERY, name, "%s must be true or false",
                              name);
    return -1;
  }
  return 0;
}

/* Reads ?format=, ?pure=, ?generated= and ?elementwise=; queues 400 invalid_query naming
 * the parameter and returns -1 when one is malformed. */
static int parse_query(struct request *req, struct best_query *ret_query,
                       enum MHD_Result *ret_result) {
  const char *format = request_query(req, "format");
  struct best_query q = {FORMAT_CUDA, false, false, false};
  if (format && strcmp(format, "kernelbench") == 0) {
    q.format = FORMAT_KERNELBENCH;
  } else if (format && strcmp(format, "cuda") != 0) {
    *ret_result = reply_error(req, API_ERR_INVALID_QUERY, "format",
                              "format must be cuda or kernelbench");
    return -1;
  }
  if (parse_flag(req, "pure", &q.pure, ret_result) != 0 ||
      parse_flag(req, "generated", &q.generated, ret_result) != 0 ||
      parse_flag(req, "elementwise", &q.elementwise, ret_result) != 0)
    return -1;
  *ret_query = q;
  return 0;
}

/* True when candidate (borrowed) runs generated code: a single kernel's source, or a
 * program with a step that is not a library step (a region, docs/architecture.md,
 * "Programs"). */
static bool runs_generated_code(const json_t *candidate) {
  const json_t *source = json_object_get(candidate, "source");
  if (json_is_string(source) && json_string_length(source) > 0)
    return true;
  size_t steps = json_array_size(json_object_get(json_object_get(candidate, "program"), "steps"));
  return steps > (size_t)export_library_steps(candidate, NULL, 0);
}

/* True when json (borrowed) holds, at any depth, a check judged by the float64 accuracy
 * budget: an object with the key "judged_by" (the evaluator's trial, graph-replay and
 * re-check records, docs/architecture.md "Evaluation rules"). */
static bool judged_by_budget(const json_t *json) {
  const char *key;
  const json_t *v;
  size_t i;
  if (json_is_object(json)) {
    if (json_object_get(json, "judged_by"))
      return true;
    json_object_foreach((json_t *)json, key, v) {
      if (judged_by_budget(v))
        return true;
    }
  } else if (json_is_array(json)) {
    json_array_foreach(json, i, v) {
      if (judged_by_budget(v))
        return true;
    }
  }
  return false;
}

/* True when a check of result (borrowed) on the task's own inputs passed only by the
 * float64 accuracy budget. The robust trial's record is left out: its randn inputs are
 * opforge's own check, and KernelBench's eval, which elementwise=true stands for, runs
 * the task's get_inputs() only. */
static bool own_inputs_judged_by_budget(const json_t *result) {
  const char *key;
  const json_t *v;
  json_object_foreach((json_t *)result, key, v) {
    if (strcmp(key, "robust") != 0 && judged_by_budget(v))
      return true;
  }
  return false;
}

/* True when candidate (borrowed) is what query q asks for beyond being correct: generated
 * code (generated=true) and element-wise checks on the task's own inputs only
 * (elementwise=true). */
static bool candidate_matches(const json_t *candidate, const struct best_query *q) {
  return (!q->generated || runs_generated_code(candidate)) &&
         (!q->elementwise || !own_inputs_judged_by_budget(json_object_get(candidate, "result")));
}

/* The median time of a correct candidate's result, or -1 when it is not correct or has
 * none. */
static double correct_time_ms(const json_t *candidate) {
  const json_t *result = json_object_get(candidate, "result");
  const json_t *t = json_object_get(json_object_get(result, "time"), "median_ms");
  return json_is_true(json_object_get(result, "correct")) && json_is_number(t) &&
                 json_number_value(t) > 0
             ? json_number_value(t)
             : -1;
}

#define LIST_PAGE 200

/* Queues 409 for a task none of whose correct candidates matches query q:
 * no_generated_candidate when generated=true and no correct candidate runs generated code
 * (any_generated false: the element-wise tolerance is then not the reason), else
 * no_elementwise_candidate under elementwise=true, else no_generated_candidate. */
static enum MHD_Result reply_no_match(struct request *req, const char *id,
                                      const struct best_query *q, bool any_generated) {
  if (q->elementwise && (!q->generated || any_generated))
    return reply_error(req, API_ERR_NO_ELEMENTWISE_CANDIDATE, "elementwise",
                       "task %s has no correct candidate%s whose every check passed the "
                       "task's element-wise tolerance without the float64 accuracy budget",
                       id, q->generated ? " running generated code" : "");
  return reply_error(req, API_ERR_NO_GENERATED_CANDIDATE, "generated",
                     "task %s has no correct candidate that runs generated code: "
                     "every correct one runs library steps only", id);
}

/* Finds the fastest correct candidate of task id that matches query q
 * (candidate_matches): *ret_candidate (caller owns; NULL when none matches) and
 * *ret_any_generated (whether any correct candidate runs generated code). Returns
 * STORE_OK or the store's failure, with nothing owned. */
static int find_fastest_matching(struct request *req, const char *id,
                                 const struct best_query *q, json_t **ret_candidate,
                                 bool *ret_any_generated) {
  json_t *best = NULL, *page = NULL;
  double best_ms = -1;
  int64_t after = 0;
  bool any_generated = false;
  for (;;) {
    int rc = store_candidates_list(req->app->store, id, LIST_PAGE, after, &page);
    if (rc != STORE_OK) {
      json_decref(best);
      return rc;
    }
    json_t *c;
    size_t i;
    json_array_foreach(page, i, c) {
      double ms = correct_time_ms(c);
      if (ms > 0 && runs_generated_code(c))
        any_generated = true;
      if (ms > 0 && candidate_matches(c, q) && (best_ms < 0 || ms < best_ms)) {
        json_decref(best);
        best = json_incref(c);
        best_ms = ms;
      }
      after = json_integer_value(json_object_get(c, "seq"));
    }
    size_t n = json_array_size(page);
    json_decref(page);
    if (n < LIST_PAGE)
      break;
  }
  *ret_candidate = best;
  *ret_any_generated = any_generated;
  return STORE_OK;
}

/* The fastest correct candidate of task id that matches query q (candidate_matches), into
 * *ret_candidate (caller owns). Otherwise queues the answer (409 reply_no_match, 5xx) and
 * returns -1. */
static int load_fastest_matching(struct request *req, const char *id,
                                 const struct best_query *q, json_t **ret_candidate,
                                 enum MHD_Result *ret_result) {
  json_t *best = NULL;
  bool any_generated = false;
  int rc = find_fastest_matching(req, id, q, &best, &any_generated);
  if (rc != STORE_OK) {
    *ret_result = reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
    return -1;
  }
  if (!best) {
    *ret_result = reply_no_match(req, id, q, any_generated);
    return -1;
  }
  *ret_candidate = best;
  return 0;
}

/* How much slower than the best a candidate may be and still count as its equal: the 2%
 * run-to-run noise of a timing on the H200 (docs/architecture.md, "KernelBench export"). */
#define EXPORT_EQUAL_WITHIN 1.02

/* How graph.reason begins when the evaluator ran a program in stream order because its
 * capture ran out of device memory (gpu/evaluator/evaluator.py, note_stream_rerun). */
#define REASON_OUT_OF_MEMORY "out of device memory"

/* The replay's time when the best (borrowed) is captured as one CUDA graph, on the
 * best's clock (best_ms), into *ret_ms: timed, the best's times the evaluator's graph over
 * stream-order time; or, when the evaluator could not capture it beside the other worker
 * slots for lack of device memory (graph.reason), estimated: the best's plus copying the
 * task's inputs (profile, borrowed) at the profile's copy bandwidth (bytes read and
 * written a second). *ret_estimated says which. false when neither is known. */
static bool captured_time_ms(const json_t *best, double best_ms, const json_t *profile,
                             double *ret_ms, bool *ret_estimated) {
  const json_t *graph = json_object_get(json_object_get(best, "result"), "graph");
  const json_t *g = json_object_get(graph, "graph_ms"), *s = json_object_get(graph, "stream_ms");
  const char *reason = json_string_value(json_object_get(graph, "reason"));
  if (best_ms <= 0)
    return false;
  if (json_is_number(g) && json_is_number(s) && json_number_value(g) > 0 &&
      json_number_value(s) > 0) {
    *ret_ms = best_ms * json_number_value(g) / json_number_value(s);
    *ret_estimated = false;
    return true;
  }
  double bw = json_number_value(
      json_object_get(json_object_get(profile, "floor_basis"), "copy_bw_Bps"));
  if (!reason || strncmp(reason, REASON_OUT_OF_MEMORY, strlen(REASON_OUT_OF_MEMORY)) != 0 ||
      !(bw > 0))
    return false;
  double bytes = 0;
  const json_t *input;
  size_t i;
  json_array_foreach(json_object_get(profile, "inputs"), i, input)
    bytes += json_number_value(json_object_get(input, "bytes"));
  *ret_ms = best_ms + 2.0 * bytes / bw * 1e3;
  *ret_estimated = true;
  return true;
}

/* A copy of candidate (borrowed) whose program is captured as one CUDA graph (a new
 * reference; NULL when out of memory). */
static json_t *captured_copy(const json_t *candidate) {
  json_t *copy = json_deep_copy(candidate);
  json_t *program = json_object_get(copy, "program");
  if (!copy || json_object_set_new(program, "graph", json_true()) != 0) {
    json_decref(copy);
    return NULL;
  }
  return copy;
}

/* Sets candidate's "export_note" (handlers/export_common.c writes it into the file's
 * head) to the printf-style text; false when out of memory. */
static bool set_export_note(json_t *candidate, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static bool set_export_note(json_t *candidate, const char *fmt, ...) {
  char note[640];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(note, sizeof note, fmt, ap);
  va_end(ap);
  return json_object_set_new(candidate, "export_note", json_string(note)) == 0;
}

/* The choices a library-only best's KernelBench file is made from (choose_library_export);
 * the candidates are borrowed, times in ms on the best's clock, -1 when unknown. */
struct library_export {
  const json_t *best, *generated;
  double best_ms, generated_ms, captured_ms;
  bool captured_estimated;
};

/* The chosen candidate (a new reference, with its export_note; NULL when out of memory):
 * the generated one when within EXPORT_EQUAL_WITHIN of the best, else the captured best
 * when within it, else the faster of those two. The caller has checked that one exists. */
static json_t *library_export_choice(const struct library_export *e) {
  const char *best_id = json_string_value(json_object_get(e->best, "id"));
  double limit = e->best_ms * EXPORT_EQUAL_WITHIN;
  bool generated_near = e->generated && e->generated_ms <= limit;
  bool captured_near = e->captured_ms > 0 && e->captured_ms <= limit;
  bool take_captured = !generated_near && e->captured_ms > 0 &&
                       (captured_near || !e->generated || e->captured_ms < e->generated_ms);
  json_t *choice = take_captured ? captured_copy(e->best) : json_deep_copy(e->generated);
  bool ok = choice != NULL;
  if (ok && take_captured)
    ok = set_export_note(
        choice,
        "The task's best, candidate %s (%.4g ms), runs library steps only: this file\n"
        "replays it as one CUDA graph, whose input staging is its kernel; the replay takes\n"
        "%.4g ms (%s)%s.",
        best_id, e->best_ms, e->captured_ms,
        e->captured_estimated ? "estimated: the evaluator could not capture it beside the "
                                "other worker slots\nfor lack of device memory; the best's "
                                "time plus copying the inputs"
                              : "the evaluator's timing",
        captured_near ? "" : ";\nno choice with a kernel was within 2% of the best");
  else if (ok)
    ok = set_export_note(choice,
                         "The task's best, candidate %s (%.4g ms), runs library steps only;\n"
                         "this candidate runs generated code in %.4g ms%s.",
                         best_id, e->best_ms, e->generated_ms,
                         generated_near ? ", within 2% of it"
                                        : ", the fastest correct one with a kernel\n(KernelBench's "
                                          "static checker refuses a file without one)");
  if (!ok) {
    json_decref(choice);
    return NULL;
  }
  return choice;
}

/* The KernelBench file of a best that runs library steps only (the reference, the whole
 * model, where cuDNN or cuBLAS beat every generated kernel) has no kernel of its own
 * unless it replays a CUDA graph, and KernelBench's static checker refuses a file
 * without one (docs/architecture.md, "KernelBench export"). Unless it replays a graph
 * already, *candidate (owned) is replaced by library_export_choice from the fastest
 * correct candidate that runs generated code and matches q, and the best captured
 * (captured_time_ms); with neither, it stays, with no kernel. Returns 0, or queues a 5xx
 * and returns -1 (*candidate stays the caller's). */
static int choose_library_export(struct request *req, const char *id,
                                 const struct best_query *q, json_t **candidate,
                                 enum MHD_Result *ret_result) {
  struct best_query with_code = *q;
  json_t *generated = NULL, *profile = NULL;
  bool any_generated;
  struct library_export e = {*candidate, NULL, correct_time_ms(*candidate), -1, -1, false};
  const json_t *used = json_object_get(json_object_get(json_object_get(e.best, "result"),
                                                       "graph"), "used");
  if (json_is_true(json_object_get(json_object_get(e.best, "program"), "graph")) ||
      (json_is_string(used) && strcmp(json_string_value(used), "graph") == 0))
    return 0; /* it replays a graph already: its staging is its kernel */
  with_code.generated = true;
  int rc = find_fastest_matching(req, id, &with_code, &generated, &any_generated);
  if (rc == STORE_OK)
    rc = store_task_profile_get(req->app->store, id, &profile);
  if (rc != STORE_OK) {
    json_decref(generated);
    *ret_result = reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
    return -1;
  }
  e.generated = generated;
  e.generated_ms = generated ? correct_time_ms(generated) : -1;
  if (!captured_time_ms(e.best, e.best_ms, profile, &e.captured_ms, &e.captured_estimated))
    e.captured_ms = -1;
  json_t *choice = generated || e.captured_ms > 0 ? library_export_choice(&e) : NULL;
  bool failed = (generated || e.captured_ms > 0) && !choice;
  json_decref(generated);
  json_decref(profile);
  if (failed) {
    *ret_result = reply_error(req, API_ERR_INTERNAL, NULL, "out of memory");
    return -1;
  }
  if (choice) {
    json_decref(*candidate);
    *candidate = choice;
  }
  return 0;
}

/* Queues the refusal of a candidate the query cannot have, and returns -1: a program with
 * library steps under pure=true (409 not_pure), or a program in format=cuda, whose JSON
 * holds a single kernel's source and plan (409 conflict). Else returns 0. Takes nothing
 * over. */
static int refuse_candidate(struct request *req, const struct best_query *q,
                            const json_t *candidate, enum MHD_Result *ret_result) {
  const json_t *program = json_object_get(candidate, "program");
  char steps[256];
  int n = export_library_steps(candidate, steps, sizeof steps);
  if (q->pure && n > 0) {
    *ret_result = reply_error(req, API_ERR_NOT_PURE, "pure",
                              "the best program runs %d library step%s (%s); pure=true asks "
                              "for generated code only",
                              n, n == 1 ? "" : "s", steps);
    return -1;
  }
  if (q->format == FORMAT_CUDA && json_is_object(program)) {
    *ret_result = reply_error(req, API_ERR_CONFLICT, "format",
                              "the best candidate is a program of %zu steps, which format=cuda "
                              "(one kernel's source and plan) cannot express; ask for "
                              "format=kernelbench",
                              json_array_size(json_object_get(program, "steps")));
    return -1;
  }
  return 0;
}

/* Loads the task and its best candidate, both owned by the caller on success. Otherwise
 * queues the answer (404, 409, 5xx) and returns -1. */
static int load_best(struct request *req, const char *id, json_t **ret_task,
                     json_t **ret_candidate, enum MHD_Result *ret_result) {
  json_t *task = NULL, *candidate = NULL;
  int rc = store_task_get(req->app->store, id, false, &task);
  if (rc != STORE_OK) {
    *ret_result = reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
    return -1;
  }
  const json_t *progress = json_object_get(task, "progress");
  const char *best = json_string_value(json_object_get(progress, "best_candidate"));
  if (!best || json_integer_value(json_object_get(progress, "correct")) < 1) {
    json_decref(task);
    *ret_result = reply_error(req, API_ERR_NO_CORRECT_CANDIDATE, NULL,
                              "task %s has no correct candidate yet", id);
    return -1;
  }
  rc = store_candidate_get(req->app->store, best, &candidate);
  if (rc != STORE_OK) {
    /* Candidates go only with their task: a missing best one is a broken record. */
    if (rc == STORE_NOT_FOUND)
      log_error("task %s: best candidate %s is not stored", id, best);
    json_decref(task);
    *ret_result = reply_store_failure(req, rc == STORE_NOT_FOUND ? STORE_ERROR : rc,
                                      API_ERR_TASK_NOT_FOUND);
    return -1;
  }
  *ret_task = task;
  *ret_candidate = candidate;
  return 0;
}

/* A positive number, else JSON null (a new reference). */
static json_t *positive_or_null(const json_t *v) {
  return json_is_number(v) && json_number_value(v) > 0 ? json_real(json_number_value(v))
                                                       : json_null();
}

/* The speed-up of a candidate that is not the task's best: the task's eager time (its
 * baselines', which step 0 may have timed again in turn with the reference) over the
 * candidate's median, as the task's best_speedup is computed; the evaluator's own figure
 * (against the profile's eager time) when the task has none. A new reference. */
static json_t *candidate_speedup(const json_t *task, const json_t *result) {
  double eager = json_number_value(json_object_get(json_object_get(task, "baselines"),
                                                   "eager_ms"));
  double ms = json_number_value(json_object_get(json_object_get(result, "time"), "median_ms"));
  if (eager > 0 && ms > 0)
    return json_real(eager / ms);
  return positive_or_null(json_object_get(json_object_get(result, "speedup"), "eager"));
}

/* Answers the candidate as JSON, with its speed-up and time: the task's best figures, or
 * the candidate's own when it is not the task's best (generated=true). Takes over task
 * and candidate. */
static enum MHD_Result reply_cuda(struct request *req, json_t *task, json_t *candidate) {
  const json_t *progress = json_object_get(task, "progress");
  const json_t *result = json_object_get(candidate, "result");
  const json_t *options = json_object_get(candidate, "options");
  bool best = json_equal(json_object_get(progress, "best_candidate"),
                         json_object_get(candidate, "id"));
  json_t *speedup = best ? positive_or_null(json_object_get(progress, "best_speedup"))
                         : candidate_speedup(task, result);
  json_t *time_ms = best ? json_object_get(progress, "best_ms")
                         : json_object_get(json_object_get(result, "time"), "median_ms");
  json_t *body = json_pack(
      "{s:O, s:O, s:o, s:o, s:O, s:o, s:O}", "task_id", json_object_get(task, "id"),
      "candidate_id", json_object_get(candidate, "id"), "speedup", speedup,
      "time_ms", positive_or_null(time_ms), "source", json_object_get(candidate, "source"),
      "options", json_is_array(options) ? json_incref((json_t *)options) : json_array(), "plan",
      json_object_get(candidate, "plan"));
  json_decref(task);
  json_decref(candidate);
  if (!body)
    return reply_error(req, API_ERR_INTERNAL, NULL, "out of memory");
  return reply_json(req, 200, body);
}

/* Queues text (taken over) as the Python file <task name>_opforge.py. */
static enum MHD_Result reply_python(struct request *req, const char *name, char *text) {
  char disposition[192];
  struct MHD_Response *resp =
      MHD_create_response_from_buffer_with_free_callback(strlen(text), text, free);
  if (!resp) {
    free(text);
    return reply_error(req, API_ERR_INTERNAL, NULL, "out of memory");
  }
  /* Task names are [A-Za-z0-9_.-], safe inside the quoted filename. */
  snprintf(disposition, sizeof disposition, "attachment; filename=\"%s_opforge.py\"",
           name ? name : "task");
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, PYTHON_CONTENT_TYPE);
  MHD_add_response_header(resp, "Content-Disposition", disposition);
  return reply_response(req, 200, resp);
}

/* Answers the KernelBench file. Takes over task and candidate. */
static enum MHD_Result reply_kernelbench(struct request *req, const char *id, json_t *task,
                                         json_t *candidate) {
  json_t *profile = NULL;
  char *text = NULL, err[256] = "";
  enum MHD_Result result;
  int rc = store_task_profile_get(req->app->store, id, &profile);
  if (rc != STORE_OK) {
    result = reply_store_failure(req, rc, API_ERR_TASK_NOT_FOUND);
  } else if (!profile) {
    log_error("task %s has a correct candidate but no profile", id);
    result = reply_error(req, API_ERR_INTERNAL, NULL, "task %s has no profile to export from",
                         id);
  } else if (export_kernelbench(profile, candidate, &text, err, sizeof err) != 0) {
    /* The stored records cannot make this file (a program's node step with a profile
     * that has no traced graph, say): the task's state, not a fault of the server. */
    log_warn("task %s: export of candidate %s refused: %s", id,
             json_string_value(json_object_get(candidate, "id")), err);
    result = reply_error(req, API_ERR_NOT_EXPORTABLE, "format",
                         "the best candidate cannot be exported as a KernelBench file: %s",
                         err);
  } else {
    result = reply_python(req, json_string_value(json_object_get(task, "name")), text);
  }
  json_decref(profile);
  json_decref(task);
  json_decref(candidate);
  return result;
}

enum MHD_Result handle_task_best(struct request *req) {
  enum MHD_Result result;
  struct best_query q;
  const char *id = require_id_param(req, 0, "id", &result);
  if (!id || parse_query(req, &q, &result) != 0)
    return result;
  json_t *task = NULL, *candidate = NULL;
  if (load_best(req, id, &task, &candidate, &result) != 0)
    return result;
  if (!candidate_matches(candidate, &q)) {
    json_decref(candidate);
    candidate = NULL;
    if (load_fastest_matching(req, id, &q, &candidate, &result) != 0) {
      json_decref(task);
      return result;
    }
  }
  if (refuse_candidate(req, &q, candidate, &result) != 0 ||
      (q.format == FORMAT_KERNELBENCH && !runs_generated_code(candidate) &&
       choose_library_export(req, id, &q, &candidate, &result) != 0)) {
    json_decref(task);
    json_decref(candidate);
    return result;
  }
  if (q.format == FORMAT_CUDA)
    return reply_cuda(req, task, candidate);
  return reply_kernelbench(req, id, task, candidate);
}
