/* The exported C ABI (opforge_gpu.h): JSON in, JSON out, around session, compile, plan,
 * launch and timing. No function here fails without saying why in its reply. */
#include "gpu/opforge_gpu.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/session.h"
#include "gpu/timing.h"

/* Serializes o (and drops the reference) into a plain malloc'd string, independent of
 * any allocator set with json_set_alloc_funcs, so that ofg_string_free can free() it. */
static char *reply(json_t *o) {
  if (!o)
    return NULL;
  size_t n = json_dumpb(o, NULL, 0, JSON_COMPACT);
  char *s = n ? malloc(n + 1) : NULL;
  if (s && json_dumpb(o, s, n, JSON_COMPACT) == n) {
    s[n] = '\0';
  } else {
    free(s);
    s = NULL;
  }
  json_decref(o);
  return s;
}

/* {"ok":false,"failure":{...},"sticky":f->sticky} plus extra's keys (extra is consumed). */
static char *failure_reply(const struct gpu_failure *f, json_t *extra) {
  json_t *o = extra ? extra : json_object();
  if (o && (json_object_set_new(o, "ok", json_false()) < 0 ||
            json_object_set_new(o, "failure", gpu_failure_to_json(f)) < 0 ||
            json_object_set_new(o, "sticky", json_boolean(f->sticky)) < 0)) {
    json_decref(o);
    return NULL;
  }
  return reply(o);
}

static char *protocol_reply(const char *cls, const char *msg) {
  struct gpu_failure f;
  gpu_failure_set(&f, "protocol", cls, "%s", msg);
  return failure_reply(&f, NULL);
}

/* Parses text as a JSON object; on failure fills f (protocol/bad_json) naming what. */
static json_t *parse_object(const char *text, const char *what, struct gpu_failure *f) {
  json_error_t e;
  json_t *o = text ? json_loads(text, 0, &e) : NULL;
  if (!json_is_object(o)) {
    gpu_failure_set(f, "protocol", "protocol/bad_json", "%s: %s", what,
                    !text ? "missing" : o ? "must be a JSON object" : e.text);
    json_decref(o);
    return NULL;
  }
  return o;
}

int ofg_session_open(int device, const char *cache_dir, void **ret_session, char *err,
                     size_t errlen) {
  char local[512];
  struct gpu_session *s = NULL;
  if (!ret_session)
    return -1;
  if (gpu_session_open(device, cache_dir, &s, local, sizeof local) < 0) {
    if (err && errlen)
      snprintf(err, errlen, "%s", local);
    return -1;
  }
  *ret_session = s;
  return 0;
}

void ofg_session_free(void *session) {
  gpu_session_free(session);
}

char *ofg_device_info(void *session) {
  if (!session)
    return protocol_reply("protocol/no_session", "no session");
  return reply(gpu_session_device_info(session));
}

void ofg_string_free(char *s) {
  free(s);
}

void ofg_candidate_free(void *session, int handle) {
  struct gpu_session *s = session;
  if (!s)
    return;
  gpu_session_make_current(s);
  gpu_session_remove(s, handle);
}

/* Fills req's source and options from o (strings stay owned by o). opts must hold
 * NVRTC_MAX_OPTIONS entries. Returns 0, or -1 with f set. */
static int request_from_json(const json_t *o, struct compile_request *req, const char **opts,
                             struct gpu_failure *f) {
  const json_t *src = json_object_get(o, "source"), *options = json_object_get(o, "options");
  if (!json_is_string(src) || strlen(json_string_value(src)) != json_string_length(src)) {
    gpu_failure_set(f, "protocol", "protocol/bad_request",
                    "'source' must be a string without NUL characters");
    return -1;
  }
  req->source = json_string_value(src);
  req->n_options = 0;
  if (options && !json_is_array(options)) {
    gpu_failure_set(f, "compile", "compile/option_not_allowed", "'options' must be an array");
    return -1;
  }
  if (json_array_size(options) > NVRTC_MAX_OPTIONS) {
    gpu_failure_set(f, "compile", "compile/option_not_allowed",
                    "%zu options given; at most %d are allowed", json_array_size(options),
                    NVRTC_MAX_OPTIONS);
    return -1;
  }
  for (size_t i = 0; i < json_array_size(options); i++) {
    const json_t *v = json_array_get(options, i);
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v)) {
      gpu_failure_set(f, "compile", "compile/option_not_allowed",
                      "option %zu is not a string", i);
      return -1;
    }
    opts[i] = json_string_value(v);
  }
  req->options = opts;
  req->n_options = json_array_size(options);
  return 0;
}

/* The compile object with the failure added; consumes nothing, returns a new reference. */
static json_t *compile_json_with_failure(const struct compile_result *r) {
  json_t *o = compile_result_to_json(r);
  if (o && json_object_set_new(o, "failure", gpu_failure_to_json(&r->failure)) < 0) {
    json_decref(o);
    return NULL;
  }
  return o;
}

/* Settings of a compile-only request beyond source and options. */
static int compile_only_settings(const json_t *o, struct gpu_session *s,
                                 struct compile_request *req, struct cubin_cache **ret_own,
                                 struct gpu_failure *f) {
  const json_t *arch = json_object_get(o, "arch"), *prec = json_object_get(o, "precision");
  const json_t *dir = json_object_get(o, "cache_dir");
  char err[512];
  req->arch = json_is_string(arch) ? json_string_value(arch) : s ? s->arch : "sm_90a";
  req->precision = GPU_PREC_FP32;
  if (prec && gpu_precision_parse(json_string_value(prec), &req->precision) < 0) {
    gpu_failure_set(f, "protocol", "protocol/bad_request",
                    "'precision' must be fp32, tf32 or bf16");
    return -1;
  }
  req->cache = s ? s->cache : NULL;
  if (!req->cache && json_is_string(dir) && json_string_length(dir) > 0) {
    if (cubin_cache_open(json_string_value(dir), ret_own, err, sizeof err) < 0) {
      gpu_failure_set(f, "protocol", "protocol/bad_request", "cache_dir: %s", err);
      return -1;
    }
    req->cache = *ret_own;
  }
  return 0;
}

char *ofg_compile_only(void *session, const char *request_json) {
  struct gpu_failure f = {0};
  struct compile_request req = {0};
  struct compile_result r = {0};
  struct cubin_cache *own = NULL;
  const char *opts[NVRTC_MAX_OPTIONS];
  json_t *o = parse_object(request_json, "request", &f);
  if (!o)
    return failure_reply(&f, NULL);
  char *out = NULL;
  if (request_from_json(o, &req, opts, &f) < 0 ||
      compile_only_settings(o, session, &req, &own, &f) < 0) {
    /* Same reply shape as a compile that failed, so callers read one format. */
    r.failure = f;
    r.cache = "off";
    r.registers = -1;
    r.spills = -1;
    out = reply(compile_json_with_failure(&r));
  } else if (nvrtc_compile(&req, &r) == 0) {
    out = reply(compile_json_with_failure(&r));
  }
  compile_result_clear(&r);
  cubin_cache_free(own);
  json_decref(o);
  return out;
}

/* Compiles, validates and loads; on success the candidate is complete. Returns 0, or
 * -1 with f set. */
static int prepare_candidate(struct gpu_session *s, const json_t *cand, struct gpu_candidate *c,
                             struct gpu_failure *f) {
  const char *opts[NVRTC_MAX_OPTIONS];
  struct compile_request req = {.arch = s->arch, .precision = c->tensors->precision,
                                .cache = s->cache};
  if (request_from_json(cand, &req, opts, f) < 0)
    return -1;
  if (nvrtc_compile(&req, &c->compile) < 0) {
    gpu_failure_set(f, "compile", "compile/out_of_memory", "out of memory");
    return -1;
  }
  if (!c->compile.ok) {
    *f = c->compile.failure;
    return -1;
  }
  if (gpu_plan_parse(json_object_get(cand, "plan"), c->tensors, c->compile.info, &s->limits,
                     &c->plan, f) < 0)
    return -1;
  return gpu_launch_prepare(s->api, c->compile.cubin, c->plan, c->tensors, c->compile.info,
                            &s->limits, &c->launch, f);
}

char *ofg_candidate_prepare(void *session, const char *candidate_json,
                            const char *tensors_json) {
  struct gpu_session *s = session;
  struct gpu_failure f = {0};
  if (!s)
    return protocol_reply("protocol/no_session", "no session");
  gpu_session_make_current(s);
  json_t *cand = parse_object(candidate_json, "candidate", &f);
  json_t *spec = cand ? parse_object(tensors_json, "tensors", &f) : NULL;
  struct gpu_candidate *c = spec ? calloc(1, sizeof *c) : NULL;
  if (spec && !c)
    gpu_failure_set(&f, "protocol", "protocol/out_of_memory", "out of memory");
  int rc = c && plan_tensors_parse(spec, &c->tensors, &f) == 0 &&
                   prepare_candidate(s, cand, c, &f) == 0
               ? 0
               : -1;
  if (rc == 0 && gpu_session_add(s, c) < 0) {
    gpu_failure_set(&f, "protocol", "protocol/too_many_candidates",
                    "%d candidates are prepared; free one first", SESSION_MAX_CANDIDATES);
    rc = -1;
  }
  json_t *out = json_pack("{s:i, s:o}", "handle", rc == 0 ? c->handle : -1, "compile",
                          c && c->compile.log ? compile_result_to_json(&c->compile) : json_null());
  char *text = NULL;
  if (rc < 0) {
    gpu_candidate_free(c);
    text = failure_reply(&f, out);
  } else if (out &&
             json_object_set_new(out, "globals",
                                 json_pack("{s:I, s:I}", "declared",
                                           (json_int_t)c->compile.info->n_globals, "reset",
                                           (json_int_t)gpu_launch_globals_resolved(c->launch))) ==
                 0 &&
             json_object_set_new(out, "ok", json_true()) == 0 &&
             json_object_set_new(out, "failure", json_null()) == 0 &&
             json_object_set_new(out, "sticky", json_false()) == 0) {
    text = reply(out);
  } else {
    json_decref(out);
  }
  json_decref(cand);
  json_decref(spec);
  return text;
}

/* Device pointers for the candidate's tensors, indexed like c->tensors, from
 * {"tensors":[{"name","ptr"}...]}. Every tensor the plan passes needs a non-zero ptr.
 * Returns a malloc'd array (caller frees) or NULL with f set. */
static CUdeviceptr *pointers_parse(const char *text, const struct gpu_candidate *c,
                                   struct gpu_failure *f) {
  json_t *o = parse_object(text, "pointers", f);
  const json_t *arr = json_object_get(o, "tensors");
  CUdeviceptr *ptrs = o ? calloc(c->tensors->n + 1, sizeof *ptrs) : NULL;
  if (o && (!ptrs || !json_is_array(arr)))
    gpu_failure_set(f, "protocol", "protocol/bad_pointers", "need {\"tensors\":[{name, ptr}]}");
  for (size_t i = 0; ptrs && !f->set && i < json_array_size(arr); i++) {
    const json_t *e = json_array_get(arr, i);
    const char *name = json_string_value(json_object_get(e, "name"));
    const json_t *ptr = json_object_get(e, "ptr");
    size_t t = 0;
    while (name && t < c->tensors->n && strcmp(c->tensors->items[t].name, name) != 0)
      t++;
    if (!name || t == c->tensors->n || !json_is_integer(ptr) || json_integer_value(ptr) < 0)
      gpu_failure_set(f, "protocol", "protocol/bad_pointers",
                      "tensors[%zu]: needs the name of a prepared tensor and an integer ptr", i);
    else
      ptrs[t] = (CUdeviceptr)json_integer_value(ptr);
  }
  for (size_t li = 0; ptrs && !f->set && li < c->plan->n_launches; li++)
    for (size_t ai = 0; !f->set && ai < c->plan->launches[li].n_args; ai++) {
      const struct plan_arg *a = &c->plan->launches[li].args[ai];
      if (a->kind == PLAN_ARG_TENSOR && ptrs[a->ref] == 0)
        gpu_failure_set(f, "protocol", "protocol/bad_pointers",
                        "launch %zu arg %zu: no pointer given for tensor '%s'", li, ai,
                        c->tensors->items[a->ref].name);
    }
  json_decref(o);
  if (f->set) {
    free(ptrs);
    return NULL;
  }
  return ptrs;
}

/* Looks the handle up and parses the pointers; NULL with f set on failure. */
static struct gpu_candidate *begin_call(struct gpu_session *s, int handle, const char *pointers,
                                        CUdeviceptr **ret_ptrs, struct gpu_failure *f) {
  struct gpu_candidate *c = s ? gpu_session_find(s, handle) : NULL;
  if (!s) {
    gpu_failure_set(f, "protocol", "protocol/no_session", "no session");
    return NULL;
  }
  if (!c) {
    gpu_failure_set(f, "protocol", "protocol/bad_handle", "no prepared candidate %d", handle);
    return NULL;
  }
  CUresult rc = gpu_session_make_current(s);
  if (rc != CUDA_SUCCESS) {
    gpu_launch_set_failure(s->api, rc, "cuCtxSetCurrent", f);
    return NULL;
  }
  *ret_ptrs = pointers_parse(pointers, c, f);
  return *ret_ptrs ? c : NULL;
}

char *ofg_candidate_run(void *session, int handle, const char *pointers_json,
                        unsigned long long stream) {
  struct gpu_failure f = {0};
  CUdeviceptr *ptrs = NULL;
  struct gpu_candidate *c = begin_call(session, handle, pointers_json, &ptrs, &f);
  if (!c)
    return failure_reply(&f, NULL);
  /* "reset_state": false re-runs without zeroing scratch buffers and __device__ globals,
   * so a kernel that keeps state between calls (a cached result) shows itself. */
  json_t *opts = json_loads(pointers_json, 0, NULL);
  bool reset_state = !json_is_false(json_object_get(opts, "reset_state"));
  json_decref(opts);
  int rc = gpu_launch_run(c->launch, ptrs, (CUstream)(uintptr_t)stream, reset_state, &f);
  free(ptrs);
  if (rc < 0)
    return failure_reply(&f, NULL);
  return reply(json_pack("{s:b, s:n, s:b}", "ok", 1, "failure", "sticky", 0));
}

char *ofg_candidate_time(void *session, int handle, const char *pointers_json,
                         unsigned long long stream, const char *timing_json) {
  struct gpu_session *s = session;
  struct gpu_failure f = {0};
  struct timing_params p;
  struct timing_result r;
  CUdeviceptr *ptrs = NULL, flush = 0;
  json_t *t = timing_json ? parse_object(timing_json, "timing", &f) : NULL;
  int rc = (!timing_json || t) && gpu_timing_params_parse(t, &p, &f) == 0 ? 0 : -1;
  json_decref(t);
  struct gpu_candidate *c = rc == 0 ? begin_call(s, handle, pointers_json, &ptrs, &f) : NULL;
  if (!c)
    return failure_reply(&f, NULL);
  rc = gpu_session_flush_buffer(s, p.flush_bytes, &flush, &f);
  if (rc == 0)
    rc = gpu_timing_run(s->api, c->launch, ptrs, (CUstream)(uintptr_t)stream, flush, &p, &r,
                        &f);
  free(ptrs);
  if (rc < 0)
    return failure_reply(&f, NULL);
  return reply(json_pack("{s:b, s:f, s:f, s:i, s:o, s:n, s:b}", "ok", 1, "median_ms",
                         r.median_ms, "mean_ms", r.mean_ms, "reps", r.reps, "rse",
                         isfinite(r.rse) ? json_real(r.rse) : json_null(), "failure", "sticky",
                         0));
}

char *ofg_candidate_bind(void *session, int handle, const char *pointers_json) {
  struct gpu_failure f = {0};
  CUdeviceptr *ptrs = NULL;
  struct gpu_candidate *c = begin_call(session, handle, pointers_json, &ptrs, &f);
  if (!c)
    return failure_reply(&f, NULL);
  free(c->bound);
  c->bound = ptrs;
  return NULL;
}

/* Enqueue's work on stream; on an error fills f naming the launch or the reset. */
static int enqueue_bound(struct gpu_session *s, struct gpu_candidate *c, CUstream stream,
                         struct gpu_failure *f) {
  char what[192];
  size_t failed = 0;
  CUresult rc = gpu_session_make_current(s);
  if (rc != CUDA_SUCCESS) {
    gpu_launch_set_failure(s->api, rc, "cuCtxSetCurrent", f);
    return -1;
  }
  rc = gpu_launch_reset_on_device(c->launch, stream);
  if (rc != CUDA_SUCCESS) {
    gpu_launch_set_failure(s->api, rc, "resetting buffers and globals", f);
    return -1;
  }
  rc = gpu_launch_enqueue_all(c->launch, c->bound, stream, &failed);
  if (rc != CUDA_SUCCESS) {
    snprintf(what, sizeof what, "launch %zu (kernel '%s')", failed,
             c->plan->launches[failed].kernel);
    gpu_launch_set_failure(s->api, rc, what, f);
    return -1;
  }
  return 0;
}

char *ofg_candidate_enqueue(void *session, int handle, unsigned long long stream) {
  struct gpu_session *s = session;
  struct gpu_failure f = {0};
  struct gpu_candidate *c = s ? gpu_session_find(s, handle) : NULL;
  if (!s)
    return protocol_reply("protocol/no_session", "no session");
  if (!c) {
    gpu_failure_set(&f, "protocol", "protocol/bad_handle", "no prepared candidate %d", handle);
    return failure_reply(&f, NULL);
  }
  if (!c->bound) {
    gpu_failure_set(&f, "protocol", "protocol/not_bound",
                    "candidate %d has no bound pointers: call ofg_candidate_bind first", handle);
    return failure_reply(&f, NULL);
  }
  if (enqueue_bound(s, c, (CUstream)(uintptr_t)stream, &f) < 0)
    return failure_reply(&f, NULL);
  return NULL;
}
