/* ofg_candidate_bind and ofg_candidate_enqueue (the launches of a program's region, fit
 * for CUDA graph capture) over a fake Driver API whose "device memory" is host memory:
 * what is bound, reset, launched and poisoned, and what is not (no synchronization, no
 * poisoning in enqueue). The kernels are compiled for real with NVRTC; no GPU needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu/opforge_gpu.h"
#include "gpu/session.h"

static const char region_src[] =
    "__device__ int g_calls;\n"
    "__device__ float g_table[4] = {1.0f, 2.0f, 3.0f, 4.0f};\n"
    "extern \"C\" __global__ void scale(const float* x, float* y, float* tmp) {\n"
    "  y[threadIdx.x] = x[threadIdx.x] * g_table[threadIdx.x & 3]; tmp[0] = 1; g_calls++;\n"
    "}\n"
    "extern \"C\" __global__ void add(const float* y, float* z, float* tmp) {\n"
    "  z[threadIdx.x] = y[threadIdx.x] + tmp[0];\n"
    "}\n";

/* node:a is a value the region writes (output: true); output:1 is a task output an
 * earlier step made, which this region only reads (output: false). */
static const char tensors_json[] =
    "{\"precision\":\"fp32\",\"tensors\":["
    "{\"name\":\"input:0\",\"dtype\":\"float32\",\"numel\":16,\"bytes\":64},"
    "{\"name\":\"output:1\",\"dtype\":\"float32\",\"numel\":16,\"bytes\":64,\"output\":false},"
    "{\"name\":\"node:a\",\"dtype\":\"float32\",\"numel\":16,\"bytes\":64,\"output\":true},"
    "{\"name\":\"output:0\",\"dtype\":\"float32\",\"numel\":16,\"bytes\":64}]}";

static const char plan_json[] =
    "{\"buffers\":[{\"name\":\"tmp\",\"bytes\":64}],\"launches\":["
    "{\"kernel\":\"scale\",\"grid\":[1],\"block\":[16],\"args\":[{\"tensor\":\"input:0\"},"
    "{\"tensor\":\"node:a\"},{\"buffer\":\"tmp\"}]},"
    "{\"kernel\":\"add\",\"grid\":[1],\"block\":[16],\"args\":[{\"tensor\":\"node:a\"},"
    "{\"tensor\":\"output:0\"},{\"tensor\":\"output:1\"}]}]}";

/* ---- the fake driver ------------------------------------------------------------- */

#define MAX_LAUNCHES 16

static struct {
  float g_table[4];
  int g_calls;
  int syncs;           /* cuStreamSynchronize calls */
  int poisons;         /* memsets with 0xff */
  int allocs, frees;
  int fail_launch;     /* 1-based index of the launch to fail; 0: none */
  int launches;
  CUfunction funcs[MAX_LAUNCHES];
  CUstream streams[MAX_LAUNCHES];
  uint64_t params[MAX_LAUNCHES][3];
} fake;

static void *host(CUdeviceptr p) {
  return (void *)(uintptr_t)p;
}

static CUresult fake_ctx_set_current(CUcontext ctx) {
  (void)ctx;
  return CUDA_SUCCESS;
}

static CUresult fake_get_error_name(CUresult rc, const char **ret) {
  *ret = rc == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" : "CUDA_ERROR_OTHER";
  return CUDA_SUCCESS;
}

static CUresult fake_get_error_string(CUresult rc, const char **ret) {
  (void)rc;
  *ret = "invalid argument";
  return CUDA_SUCCESS;
}

static CUresult fake_module_load_data(CUmodule *m, const void *image) {
  (void)image;
  *m = (CUmodule)(uintptr_t)0x10;
  return CUDA_SUCCESS;
}

static CUresult fake_module_unload(CUmodule m) {
  (void)m;
  return CUDA_SUCCESS;
}

static CUresult fake_module_get_function(CUfunction *f, CUmodule m, const char *name) {
  (void)m;
  *f = (CUfunction)(uintptr_t)(strcmp(name, "scale") == 0 ? 1 : 2);
  return CUDA_SUCCESS;
}

static CUresult fake_module_get_global(CUdeviceptr *ptr, size_t *size, CUmodule m,
                                       const char *name) {
  (void)m;
  if (strcmp(name, "g_table") == 0) {
    *ptr = (CUdeviceptr)(uintptr_t)fake.g_table;
    *size = sizeof fake.g_table;
  } else if (strcmp(name, "g_calls") == 0) {
    *ptr = (CUdeviceptr)(uintptr_t)&fake.g_calls;
    *size = sizeof fake.g_calls;
  } else {
    return CUDA_ERROR_NOT_FOUND;
  }
  return CUDA_SUCCESS;
}

static CUresult fake_func_get_attribute(int *v, CUfunction_attribute a, CUfunction f) {
  (void)a;
  (void)f;
  *v = 0;
  return CUDA_SUCCESS;
}

static CUresult fake_func_set_attribute(CUfunction f, CUfunction_attribute a, int v) {
  (void)f;
  (void)a;
  (void)v;
  return CUDA_SUCCESS;
}

static CUresult fake_launch_kernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                   unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                   CUstream stream, void **params, void **extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)extra;
  int i = fake.launches++;
  if (fake.fail_launch == i + 1)
    return CUDA_ERROR_INVALID_VALUE;
  assert_true(i < MAX_LAUNCHES);
  fake.funcs[i] = f;
  fake.streams[i] = stream;
  for (int a = 0; a < 3; a++)
    memcpy(&fake.params[i][a], params[a], sizeof(uint64_t));
  assert_null(params[3]);
  return CUDA_SUCCESS;
}

static CUresult fake_mem_alloc(CUdeviceptr *ptr, size_t bytes) {
  fake.allocs++;
  *ptr = (CUdeviceptr)(uintptr_t)malloc(bytes);
  return *ptr ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult fake_mem_free(CUdeviceptr ptr) {
  fake.frees++;
  free(host(ptr));
  return CUDA_SUCCESS;
}

static CUresult fake_memset_d8_async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  (void)s;
  fake.poisons += v == 0xff;
  memset(host(dst), v, n);
  return CUDA_SUCCESS;
}

static CUresult fake_memcpy_htod(CUdeviceptr dst, const void *src, size_t n) {
  memcpy(host(dst), src, n);
  return CUDA_SUCCESS;
}

static CUresult fake_memcpy_htod_async(CUdeviceptr dst, const void *src, size_t n,
                                       CUstream s) {
  (void)s;
  memcpy(host(dst), src, n);
  return CUDA_SUCCESS;
}

static CUresult fake_memcpy_dtod_async(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                       CUstream s) {
  (void)s;
  memcpy(host(dst), host(src), n);
  return CUDA_SUCCESS;
}

static CUresult fake_stream_synchronize(CUstream s) {
  (void)s;
  fake.syncs++;
  return CUDA_SUCCESS;
}

/* ---- fixture ---------------------------------------------------------------------- */

struct fixture {
  struct gpu_session *s;
  int handle;
  float x[16], out1[16], a[16], out0[16];
};

static struct cuda_api *fake_api(void) {
  struct cuda_api *api = calloc(1, sizeof *api);
  assert_non_null(api);
  api->ctx_set_current = fake_ctx_set_current;
  api->get_error_name = fake_get_error_name;
  api->get_error_string = fake_get_error_string;
  api->module_load_data = fake_module_load_data;
  api->module_unload = fake_module_unload;
  api->module_get_function = fake_module_get_function;
  api->module_get_global = fake_module_get_global;
  api->func_get_attribute = fake_func_get_attribute;
  api->func_set_attribute = fake_func_set_attribute;
  api->launch_kernel = fake_launch_kernel;
  api->mem_alloc = fake_mem_alloc;
  api->mem_free = fake_mem_free;
  api->memset_d8_async = fake_memset_d8_async;
  api->memcpy_htod = fake_memcpy_htod;
  api->memcpy_htod_async = fake_memcpy_htod_async;
  api->memcpy_dtod_async = fake_memcpy_dtod_async;
  api->stream_synchronize = fake_stream_synchronize;
  return api;
}

/* Parses a reply of the library (and frees the string). */
static json_t *take(char *text) {
  assert_non_null(text);
  json_t *o = json_loads(text, 0, NULL);
  ofg_string_free(text);
  assert_non_null(o);
  return o;
}

static void expect_failure(char *text, const char *cls, const char *message) {
  json_t *o = take(text);
  json_t *f = json_object_get(o, "failure");
  assert_true(json_is_false(json_object_get(o, "ok")));
  assert_string_equal(json_string_value(json_object_get(f, "class")), cls);
  if (message)
    assert_string_equal(json_string_value(json_object_get(f, "message")), message);
  json_decref(o);
}

/* ofg_candidate_prepare of the fixture's region on session s: the parsed reply. */
static json_t *prepare_region(struct gpu_session *s) {
  json_t *cand = json_pack("{s:s, s:[], s:o}", "source", region_src, "options", "plan",
                           json_loads(plan_json, 0, NULL));
  char *text = json_dumps(cand, JSON_COMPACT);
  json_t *r = take(ofg_candidate_prepare(s, text, tensors_json));
  free(text);
  json_decref(cand);
  return r;
}

static int setup(void **state) {
  struct fixture *fx = calloc(1, sizeof *fx);
  assert_non_null(fx);
  memset(&fake, 0, sizeof fake);
  fx->s = calloc(1, sizeof *fx->s);
  assert_non_null(fx->s);
  fx->s->api = fake_api();
  fx->s->next_handle = 1;
  snprintf(fx->s->arch, sizeof fx->s->arch, "sm_90a");
  gpu_limits_hopper(&fx->s->limits);
  json_t *r = prepare_region(fx->s);
  if (!json_is_true(json_object_get(r, "ok")))
    fail_msg("prepare failed: %s", json_dumps(r, 0));
  fx->handle = (int)json_integer_value(json_object_get(r, "handle"));
  assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "globals"), "reset")),
                   2);
  json_decref(r);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  struct fixture *fx = *state;
  gpu_session_remove(fx->s, fx->handle);
  assert_int_equal(fake.allocs, fake.frees); /* the scratch buffer and g_table's copy */
  free(fx->s->api);
  free(fx->s);
  free(fx);
  return 0;
}

/* {"tensors":[...]} of the fixture's arrays; skip names one to leave out (or NULL). */
static void pointers(struct fixture *fx, const char *skip, char *buf, size_t len) {
  const struct {
    const char *name;
    const float *p;
  } t[] = {{"input:0", fx->x}, {"output:1", fx->out1}, {"node:a", fx->a}, {"output:0", fx->out0}};
  size_t used = (size_t)snprintf(buf, len, "{\"tensors\":[");
  for (size_t i = 0; i < 4; i++)
    if (!skip || strcmp(skip, t[i].name) != 0)
      used += (size_t)snprintf(buf + used, len - used, "%s{\"name\":\"%s\",\"ptr\":%llu}",
                               buf[used - 1] == '[' ? "" : ",", t[i].name,
                               (unsigned long long)(uintptr_t)t[i].p);
  snprintf(buf + used, len - used, "]}");
}

static uint64_t addr(const void *p) {
  return (uint64_t)(uintptr_t)p;
}

/* ---- tests ------------------------------------------------------------------------ */

static void test_prepare_copies_initial_values(void **state) {
  (void)state;
  /* One scratch buffer and one device copy of g_table's initial value; g_calls has none. */
  assert_int_equal(fake.allocs, 2);
}

static void test_enqueue_needs_bind(void **state) {
  struct fixture *fx = *state;
  char buf[1024];
  expect_failure(ofg_candidate_enqueue(fx->s, fx->handle, 0), "protocol/not_bound",
                 "candidate 1 has no bound pointers: call ofg_candidate_bind first");
  pointers(fx, "node:a", buf, sizeof buf);
  expect_failure(ofg_candidate_bind(fx->s, fx->handle, buf), "protocol/bad_pointers",
                 "launch 0 arg 1: no pointer given for tensor 'node:a'");
  expect_failure(ofg_candidate_bind(fx->s, fx->handle, "[1]"), "protocol/bad_json", NULL);
  expect_failure(ofg_candidate_bind(fx->s, 99, buf), "protocol/bad_handle",
                 "no prepared candidate 99");
  expect_failure(ofg_candidate_enqueue(fx->s, 99, 0), "protocol/bad_handle",
                 "no prepared candidate 99");
  expect_failure(ofg_candidate_enqueue(NULL, fx->handle, 0), "protocol/no_session", NULL);
  assert_int_equal(fake.launches, 0);
}

static void test_enqueue_resets_and_launches_without_sync(void **state) {
  struct fixture *fx = *state;
  char buf[1024];
  pointers(fx, NULL, buf, sizeof buf);
  assert_null(ofg_candidate_bind(fx->s, fx->handle, buf));
  /* State a previous run left: a counter and a changed table. */
  fake.g_calls = 41;
  for (int i = 0; i < 4; i++)
    fake.g_table[i] = -9.0f;
  memset(fx->a, 0x11, sizeof fx->a);
  memset(fx->out0, 0x22, sizeof fx->out0);
  CUstream stream = (CUstream)(uintptr_t)0x5eed;
  assert_null(ofg_candidate_enqueue(fx->s, fx->handle, (unsigned long long)(uintptr_t)stream));
  static const float init[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  assert_memory_equal(fake.g_table, init, sizeof init);
  assert_int_equal(fake.g_calls, 0);
  assert_int_equal(fake.syncs, 0);
  assert_int_equal(fake.poisons, 0); /* outputs are left alone: the caller poisons them */
  uint32_t bits;
  memcpy(&bits, &fx->a[0], sizeof bits);
  assert_int_equal(bits, 0x11111111u);
  assert_int_equal(fake.launches, 2);
  assert_ptr_equal(fake.funcs[0], (CUfunction)(uintptr_t)1);
  assert_ptr_equal(fake.funcs[1], (CUfunction)(uintptr_t)2);
  assert_ptr_equal(fake.streams[0], stream);
  assert_ptr_equal(fake.streams[1], stream);
  assert_int_equal(fake.params[0][0], addr(fx->x));
  assert_int_equal(fake.params[0][1], addr(fx->a));
  assert_int_equal(fake.params[1][0], addr(fx->a));
  assert_int_equal(fake.params[1][1], addr(fx->out0));
  assert_int_equal(fake.params[1][2], addr(fx->out1));
  /* The scratch buffer is zeroed before every enqueue. */
  float *tmp = host((CUdeviceptr)fake.params[0][2]);
  tmp[0] = 7.0f;
  assert_null(ofg_candidate_enqueue(fx->s, fx->handle, 0));
  assert_true(tmp[0] == 0.0f);
  assert_int_equal(fake.launches, 4);
  assert_int_equal(fake.syncs, 0);
}

static void test_rebind_replaces_pointers(void **state) {
  struct fixture *fx = *state;
  char buf[1024];
  float other[16];
  pointers(fx, NULL, buf, sizeof buf);
  assert_null(ofg_candidate_bind(fx->s, fx->handle, buf));
  snprintf(buf, sizeof buf,
           "{\"tensors\":[{\"name\":\"input:0\",\"ptr\":%llu},{\"name\":\"output:1\",\"ptr\":1},"
           "{\"name\":\"node:a\",\"ptr\":2},{\"name\":\"output:0\",\"ptr\":3}]}",
           (unsigned long long)addr(other));
  assert_null(ofg_candidate_bind(fx->s, fx->handle, buf));
  assert_null(ofg_candidate_enqueue(fx->s, fx->handle, 0));
  assert_int_equal(fake.params[0][0], addr(other));
  assert_int_equal(fake.params[0][1], 2);
  assert_int_equal(fake.params[1][1], 3);
}

static void test_enqueue_names_the_failed_launch(void **state) {
  struct fixture *fx = *state;
  char buf[1024];
  pointers(fx, NULL, buf, sizeof buf);
  assert_null(ofg_candidate_bind(fx->s, fx->handle, buf));
  fake.fail_launch = 2;
  expect_failure(ofg_candidate_enqueue(fx->s, fx->handle, 0), "cuda/CUDA_ERROR_INVALID_VALUE",
                 "launch 1 (kernel 'add'): CUDA_ERROR_INVALID_VALUE: invalid argument");
}

/* The checked run poisons what the region writes (output: true, and output:0 by its
 * name) but not what it reads (output:1 with output: false), and synchronizes. */
static void test_run_poisons_region_writes(void **state) {
  struct fixture *fx = *state;
  char buf[1024];
  pointers(fx, NULL, buf, sizeof buf);
  memset(fx->out1, 0, sizeof fx->out1);
  memset(fx->x, 0, sizeof fx->x);
  json_t *r = take(ofg_candidate_run(fx->s, fx->handle, buf, 0));
  assert_true(json_is_true(json_object_get(r, "ok")));
  json_decref(r);
  assert_int_equal(fake.poisons, 2);
  uint32_t bits;
  memcpy(&bits, &fx->a[5], sizeof bits);
  assert_int_equal(bits, 0xffffffffu);
  memcpy(&bits, &fx->out0[15], sizeof bits);
  assert_int_equal(bits, 0xffffffffu);
  assert_true(fx->out1[3] == 0.0f && fx->x[3] == 0.0f);
  assert_int_equal(fake.launches, 2);
  assert_true(fake.syncs >= 3); /* after the resets and after each launch */
}

/* A session holds OFG_MAX_PREPARED_CANDIDATES (1024) prepared candidates, enough for the
 * regions of a whole model (ResNet-101 has 107): with the fixture's one and 1023 others
 * held, one more prepare is refused with protocol/too_many_candidates (and leaks
 * nothing: teardown counts the allocations), and once one is freed it succeeds. */
static void test_session_holds_1024_candidates(void **state) {
  struct fixture *fx = *state;
  assert_int_equal(OFG_MAX_PREPARED_CANDIDATES, 1024);
  int held[OFG_MAX_PREPARED_CANDIDATES - 1];
  for (size_t i = 0; i < OFG_MAX_PREPARED_CANDIDATES - 1; i++) {
    struct gpu_candidate *c = calloc(1, sizeof *c);
    assert_non_null(c);
    held[i] = gpu_session_add(fx->s, c);
    assert_true(held[i] > 0);
  }
  json_t *r = prepare_region(fx->s);
  json_t *f = json_object_get(r, "failure");
  assert_string_equal(json_string_value(json_object_get(f, "class")),
                      "protocol/too_many_candidates");
  assert_string_equal(json_string_value(json_object_get(f, "message")),
                      "1024 candidates are prepared; free one first");
  assert_int_equal(json_integer_value(json_object_get(r, "handle")), -1);
  json_decref(r);
  gpu_session_remove(fx->s, held[0]);
  r = prepare_region(fx->s);
  assert_true(json_is_true(json_object_get(r, "ok")));
  gpu_session_remove(fx->s, (int)json_integer_value(json_object_get(r, "handle")));
  json_decref(r);
  for (size_t i = 1; i < OFG_MAX_PREPARED_CANDIDATES - 1; i++)
    gpu_session_remove(fx->s, held[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_prepare_copies_initial_values, setup, teardown),
    cmocka_unit_test_setup_teardown(test_enqueue_needs_bind, setup, teardown),
    cmocka_unit_test_setup_teardown(test_enqueue_resets_and_launches_without_sync, setup,
                                    teardown),
    cmocka_unit_test_setup_teardown(test_rebind_replaces_pointers, setup, teardown),
    cmocka_unit_test_setup_teardown(test_enqueue_names_the_failed_launch, setup, teardown),
    cmocka_unit_test_setup_teardown(test_run_poisons_region_writes, setup, teardown),
    cmocka_unit_test_setup_teardown(test_session_holds_1024_candidates, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
