/* Launch-plan validation: every malformed plan gets its exact class and a message that
 * names the launch and the argument. Needs no GPU: the module is a hand-made kernel list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gpu/plan.h"

struct fixture {
  struct cubin_info info;
  struct cubin_kernel kernels[5];
  struct plan_tensors *tensors;
  struct device_limits limits;
};

static void set_kernel(struct cubin_kernel *k, const char *name, int regs, int n_params,
                       const uint16_t *sizes) {
  memset(k, 0, sizeof *k);
  k->name = (char *)name;
  k->registers = regs;
  k->n_params = n_params;
  for (int i = 0; i < n_params; i++)
    k->param_size[i] = sizes[i];
  k->static_shared = 0;
}

static int setup(void **state) {
  static const uint16_t ptr3[] = {8, 8, 8}, ptr2_i32[] = {8, 8, 4}, one[] = {8};
  struct fixture *fx = calloc(1, sizeof *fx);
  assert_non_null(fx);
  set_kernel(&fx->kernels[0], "k", 32, 3, ptr3);
  set_kernel(&fx->kernels[1], "k4", 32, 3, ptr2_i32);
  set_kernel(&fx->kernels[2], "bounded", 16, 1, one);
  fx->kernels[2].max_threads[0] = 256;
  fx->kernels[2].max_threads[1] = fx->kernels[2].max_threads[2] = 1;
  set_kernel(&fx->kernels[3], "heavy", 128, 1, one);
  set_kernel(&fx->kernels[4], "shared_user", 32, 1, one);
  fx->kernels[4].static_shared = 200000;
  fx->info.kernels = fx->kernels;
  fx->info.n_kernels = 5;
  gpu_limits_hopper(&fx->limits);
  json_t *spec = json_loads("{\"tensors\":["
                            "{\"name\":\"input:0\",\"dtype\":\"float32\",\"numel\":1024,\"bytes\":4096},"
                            "{\"name\":\"param:weight\",\"dtype\":\"float32\",\"numel\":4,\"bytes\":16},"
                            "{\"name\":\"output:0\",\"dtype\":\"float32\",\"numel\":1024,\"bytes\":4096}],"
                            "\"precision\":\"fp32\"}",
                            0, NULL);
  struct gpu_failure f = {0};
  assert_int_equal(plan_tensors_parse(spec, &fx->tensors, &f), 0);
  json_decref(spec);
  *state = fx;
  return 0;
}

static int teardown(void **state) {
  struct fixture *fx = *state;
  plan_tensors_free(fx->tensors);
  free(fx);
  return 0;
}

/* Parses text as a plan; returns the plan (caller frees) or NULL with *f filled. */
static struct gpu_plan *parse(struct fixture *fx, const char *text, struct gpu_failure *f) {
  json_error_t e;
  json_t *o = json_loads(text, 0, &e);
  if (!o)
    fail_msg("test JSON does not parse: %s: %s", e.text, text);
  struct gpu_plan *p = NULL;
  memset(f, 0, sizeof *f);
  int rc = gpu_plan_parse(o, fx->tensors, &fx->info, &fx->limits, &p, f);
  json_decref(o);
  if (rc == 0) {
    assert_non_null(p);
    assert_false(f->set);
    return p;
  }
  assert_null(p);
  assert_true(f->set);
  assert_string_equal(f->stage, "launch");
  return NULL;
}

static void expect_error(struct fixture *fx, const char *text, const char *cls,
                         const char *message) {
  struct gpu_failure f;
  struct gpu_plan *p = parse(fx, text, &f);
  if (p) {
    gpu_plan_free(p);
    fail_msg("plan was accepted, expected %s: %s", cls, text);
  }
  assert_string_equal(f.cls, cls);
  assert_string_equal(f.message, message);
}

/* A valid launch of kernel k, for building plans around one faulty part. */
#define ARGS_OK "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"i64\":1024}]"
#define LAUNCH_OK "{\"kernel\":\"k\",\"grid\":[4],\"block\":[256],\"args\":" ARGS_OK "}"

static void append(char *buf, size_t len, const char *s) {
  size_t used = strlen(buf);
  snprintf(buf + used, len - used, "%s", s);
}

/* {"launches":[LAUNCH_OK x n]} into buf. */
static void repeated_launches(char *buf, size_t len, int n) {
  snprintf(buf, len, "{\"launches\":[");
  for (int i = 0; i < n; i++) {
    append(buf, len, LAUNCH_OK);
    append(buf, len, i < n - 1 ? "," : "]}");
  }
}

static void test_valid_plan(void **state) {
  struct fixture *fx = *state;
  struct gpu_failure f;
  struct gpu_plan *p = parse(
      fx,
      "{\"buffers\":[{\"name\":\"partials\",\"bytes\":1048576}],\"launches\":["
      "{\"kernel\":\"k\",\"grid\":[65536,2],\"block\":[256,1,1],\"shared_bytes\":49152,"
      "\"args\":[{\"tensor\":\"input:0\"},{\"buffer\":\"partials\"},{\"f64\":0.5}]},"
      "{\"kernel\":\"k4\",\"grid\":[1],\"block\":[32],"
      "\"args\":[{\"tensor\":\"param:weight\"},{\"tensor\":\"output:0\"},{\"f32\":2}]}]}",
      &f);
  assert_non_null(p);
  assert_int_equal(p->n_buffers, 1);
  assert_string_equal(p->buffers[0].name, "partials");
  assert_int_equal(p->buffers[0].bytes, 1048576);
  assert_int_equal(p->n_launches, 2);
  const struct plan_launch *l = &p->launches[0];
  assert_string_equal(l->kernel, "k");
  assert_int_equal(l->grid[0], 65536);
  assert_int_equal(l->grid[1], 2);
  assert_int_equal(l->grid[2], 1);
  assert_int_equal(l->block[0], 256);
  assert_int_equal(l->shared_bytes, 49152);
  assert_int_equal(l->n_args, 3);
  assert_int_equal(l->args[0].kind, PLAN_ARG_TENSOR);
  assert_int_equal(l->args[0].ref, 0);
  assert_int_equal(l->args[1].kind, PLAN_ARG_BUFFER);
  assert_int_equal(l->args[1].ref, 0);
  assert_int_equal(l->args[2].kind, PLAN_ARG_F64);
  assert_true(l->args[2].v.f64 == 0.5);
  l = &p->launches[1];
  assert_int_equal(l->args[0].ref, 1);
  assert_int_equal(l->args[1].ref, 2);
  assert_int_equal(l->args[2].kind, PLAN_ARG_F32);
  assert_true(l->args[2].v.f32 == 2.0f);
  assert_int_equal(l->shared_bytes, 0);
  gpu_plan_free(p);
}

static void test_scalar_values(void **state) {
  struct fixture *fx = *state;
  struct gpu_failure f;
  struct gpu_plan *p = parse(
      fx,
      "{\"launches\":[{\"kernel\":\"k4\",\"grid\":[1],\"block\":[1],\"args\":"
      "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"i32\":-2147483648}]},"
      "{\"kernel\":\"k\",\"grid\":[1],\"block\":[1],\"args\":"
      "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"i64\":9007199254740993}]}]}",
      &f);
  assert_non_null(p);
  assert_int_equal(p->launches[0].args[2].kind, PLAN_ARG_I32);
  assert_int_equal(p->launches[0].args[2].v.i32, INT32_MIN);
  assert_int_equal(p->launches[1].args[2].v.i64, 9007199254740993LL);
  gpu_plan_free(p);
}

static void test_plan_structure(void **state) {
  struct fixture *fx = *state;
  expect_error(fx, "[]", "plan/malformed", "plan: must be a JSON object");
  expect_error(fx, "{\"launches\":[" LAUNCH_OK "],\"extra\":1}", "plan/malformed",
               "plan: unknown key 'extra'");
  expect_error(fx, "{}", "plan/malformed", "plan: 'launches' is required");
  expect_error(fx, "{\"launches\":\"k\"}", "plan/malformed", "plan: 'launches' must be an array");
  expect_error(fx, "{\"launches\":[]}", "plan/malformed", "plan: 'launches' is empty");
  expect_error(fx, "{\"launches\":[" LAUNCH_OK ",7]}", "plan/malformed",
               "launch 1: must be an object");
  expect_error(fx,
               "{\"launches\":[{\"kernel\":\"k\",\"grid\":[1],\"block\":[1],\"stream\":1,"
               "\"args\":" ARGS_OK "}]}",
               "plan/malformed", "launch 0: unknown key 'stream'");
}

/* "channels_last" lists tensors of the plan, each once; the library only checks it. */
static void test_channels_last_list(void **state) {
  struct fixture *fx = *state;
  struct gpu_failure f;
  struct gpu_plan *p = parse(fx, "{\"launches\":[" LAUNCH_OK "],\"channels_last\":[\"input:0\","
                                 "\"output:0\"]}", &f);
  assert_non_null(p);
  assert_int_equal(p->n_launches, 1);
  gpu_plan_free(p);
  expect_error(fx, "{\"launches\":[" LAUNCH_OK "],\"channels_last\":\"input:0\"}",
               "plan/malformed", "plan: 'channels_last' must be an array");
  expect_error(fx, "{\"launches\":[" LAUNCH_OK "],\"channels_last\":[\"input:7\"]}",
               "plan/unknown_tensor", "plan: channels_last entry 0 must name a tensor of the "
               "plan once");
  expect_error(fx, "{\"launches\":[" LAUNCH_OK "],\"channels_last\":[\"output:0\",3]}",
               "plan/unknown_tensor", "plan: channels_last entry 1 must name a tensor of the "
               "plan once");
  expect_error(fx, "{\"launches\":[" LAUNCH_OK "],\"channels_last\":[\"input:0\","
                   "\"input:0\"]}",
               "plan/unknown_tensor", "plan: channels_last entry 1 must name a tensor of the "
               "plan once");
}

static void test_too_many_launches(void **state) {
  struct fixture *fx = *state;
  char text[8192], ok[8192];
  repeated_launches(text, sizeof text, 17);
  expect_error(fx, text, "plan/too_many_launches", "plan has 17 launches; at most 16");
  /* Exactly 16 is allowed. */
  repeated_launches(ok, sizeof ok, 16);
  struct gpu_failure f;
  struct gpu_plan *p = parse(fx, ok, &f);
  assert_non_null(p);
  assert_int_equal(p->n_launches, 16);
  gpu_plan_free(p);
}

static void test_kernel_names(void **state) {
  struct fixture *fx = *state;
  expect_error(fx, "{\"launches\":[{\"grid\":[1],\"block\":[1],\"args\":" ARGS_OK "}]}",
               "plan/malformed", "launch 0: 'kernel' must be a non-empty string");
  expect_error(fx, "{\"launches\":[{\"kernel\":5,\"grid\":[1],\"block\":[1]}]}",
               "plan/malformed", "launch 0: 'kernel' must be a non-empty string");
  expect_error(fx,
               "{\"launches\":[" LAUNCH_OK ",{\"kernel\":\"nope\",\"grid\":[1],\"block\":[1],"
               "\"args\":" ARGS_OK "}]}",
               "plan/unknown_kernel",
               "launch 1: unknown kernel 'nope' (the module has: k, k4, bounded, heavy, "
               "shared_user; kernels need extern \"C\")");
}

/* One launch of kernel `kernel` with the given grid/block/shared JSON fragments. */
static void geometry(char *buf, size_t len, const char *kernel, const char *grid,
                     const char *block, const char *extra, const char *args) {
  snprintf(buf, len,
           "{\"launches\":[" LAUNCH_OK ",{\"kernel\":\"%s\",\"grid\":%s,\"block\":%s%s,"
           "\"args\":%s}]}",
           kernel, grid, block, extra, args);
}

static void expect_geometry(struct fixture *fx, const char *kernel, const char *grid,
                            const char *block, const char *extra, const char *cls,
                            const char *message) {
  char text[2048];
  const char *args = strcmp(kernel, "k") == 0 ? ARGS_OK : "[{\"tensor\":\"input:0\"}]";
  geometry(text, sizeof text, kernel, grid, block, extra, args);
  expect_error(fx, text, cls, message);
}

static void test_grid(void **state) {
  struct fixture *fx = *state;
  expect_geometry(fx, "k", "[1,70000]", "[32]", "", "plan/grid_too_large",
                  "launch 1: grid[1] = 70000 exceeds 65535");
  expect_geometry(fx, "k", "[1,1,65536]", "[32]", "", "plan/grid_too_large",
                  "launch 1: grid[2] = 65536 exceeds 65535");
  expect_geometry(fx, "k", "[2147483648]", "[32]", "", "plan/grid_too_large",
                  "launch 1: grid[0] = 2147483648 exceeds 2147483647");
  expect_geometry(fx, "k", "[99999999999]", "[32]", "", "plan/grid_too_large",
                  "launch 1: grid[0] = 4294967295 exceeds 2147483647");
  expect_geometry(fx, "k", "[0]", "[32]", "", "plan/malformed",
                  "launch 1: grid[0] must be an integer >= 1");
  expect_geometry(fx, "k", "[4,-1]", "[32]", "", "plan/malformed",
                  "launch 1: grid[1] must be an integer >= 1");
  expect_geometry(fx, "k", "[\"4\"]", "[32]", "", "plan/malformed",
                  "launch 1: grid[0] must be an integer >= 1");
  expect_geometry(fx, "k", "[4.5]", "[32]", "", "plan/malformed",
                  "launch 1: grid[0] must be an integer >= 1");
  expect_geometry(fx, "k", "[]", "[32]", "", "plan/malformed",
                  "launch 1: grid must be an array of 1 to 3 integers");
  expect_geometry(fx, "k", "[1,1,1,1]", "[32]", "", "plan/malformed",
                  "launch 1: grid must be an array of 1 to 3 integers");
  expect_geometry(fx, "k", "64", "[32]", "", "plan/malformed",
                  "launch 1: grid must be an array of 1 to 3 integers");
  expect_error(fx, "{\"launches\":[{\"kernel\":\"k\",\"block\":[1],\"args\":" ARGS_OK "}]}",
               "plan/malformed", "launch 0: grid must be an array of 1 to 3 integers");
}

static void test_block(void **state) {
  struct fixture *fx = *state;
  expect_geometry(fx, "k", "[1]", "[2048]", "", "plan/block_too_large",
                  "launch 1: block[0] = 2048 exceeds 1024");
  expect_geometry(fx, "k", "[1]", "[64,32]", "", "plan/block_too_large",
                  "launch 1: block has 2048 threads; the device allows 1024");
  expect_geometry(fx, "k", "[1]", "[1,1,128]", "", "plan/block_too_large",
                  "launch 1: block[2] = 128 exceeds 64");
  expect_geometry(fx, "k", "[1]", "[1,1025]", "", "plan/block_too_large",
                  "launch 1: block[1] = 1025 exceeds 1024");
  expect_geometry(fx, "k", "[1]", "[0]", "", "plan/malformed",
                  "launch 1: block[0] must be an integer >= 1");
  expect_error(fx, "{\"launches\":[{\"kernel\":\"k\",\"grid\":[1],\"args\":" ARGS_OK "}]}",
               "plan/malformed", "launch 0: block must be an array of 1 to 3 integers");
  /* __launch_bounds__(256) and the register file. */
  expect_geometry(fx, "bounded", "[1]", "[512]", "", "plan/block_too_large",
                  "launch 1: block has 512 threads; kernel 'bounded' was compiled for at most "
                  "256 (__launch_bounds__)");
  expect_geometry(fx, "heavy", "[1]", "[1024]", "", "plan/block_too_large",
                  "launch 1: a block of 1024 threads needs 131072 registers (128 per thread); "
                  "the device has 65536 per block");
  /* 512 threads of 128 registers fit exactly. */
  char text[2048];
  struct gpu_failure f;
  geometry(text, sizeof text, "heavy", "[1]", "[512]", "", "[{\"tensor\":\"input:0\"}]");
  struct gpu_plan *p = parse(fx, text, &f);
  assert_non_null(p);
  gpu_plan_free(p);
  geometry(text, sizeof text, "bounded", "[1]", "[16,16]", "", "[{\"tensor\":\"input:0\"}]");
  p = parse(fx, text, &f);
  assert_non_null(p);
  gpu_plan_free(p);
}

static void test_shared(void **state) {
  struct fixture *fx = *state;
  expect_geometry(fx, "k", "[1]", "[32]", ",\"shared_bytes\":307200", "plan/shared_too_large",
                  "launch 1: shared_bytes 307200 + static 0 exceeds the device's 232448 per "
                  "block");
  expect_geometry(fx, "shared_user", "[1]", "[32]", ",\"shared_bytes\":40000",
                  "plan/shared_too_large",
                  "launch 1: shared_bytes 40000 + static 200000 exceeds the device's 232448 "
                  "per block");
  expect_geometry(fx, "k", "[1]", "[32]", ",\"shared_bytes\":-1", "plan/malformed",
                  "launch 1: shared_bytes must be an integer >= 0");
  expect_geometry(fx, "k", "[1]", "[32]", ",\"shared_bytes\":\"48K\"", "plan/malformed",
                  "launch 1: shared_bytes must be an integer >= 0");
  /* The whole opt-in limit is allowed. */
  char text[2048];
  struct gpu_failure f;
  geometry(text, sizeof text, "k", "[1]", "[32]", ",\"shared_bytes\":232448", ARGS_OK);
  struct gpu_plan *p = parse(fx, text, &f);
  assert_non_null(p);
  assert_int_equal(p->launches[1].shared_bytes, 232448);
  /* Once the module is loaded, static shared memory counts too. */
  assert_int_equal(gpu_plan_check_shared(p, 1, 0, &fx->limits, &f), 0);
  assert_int_equal(gpu_plan_check_shared(p, 1, 1, &fx->limits, &f), -1);
  assert_string_equal(f.cls, "plan/shared_too_large");
  assert_string_equal(f.message, "launch 1: shared_bytes 232448 + static 1 exceeds the "
                                 "device's 232448 per block");
  gpu_plan_free(p);
}

/* A plan whose second launch calls kernel with args (a JSON array). */
static void expect_args(struct fixture *fx, const char *kernel, const char *args,
                        const char *cls, const char *message) {
  char text[8192];
  snprintf(text, sizeof text,
           "{\"buffers\":[{\"name\":\"scratch\",\"bytes\":64}],\"launches\":[" LAUNCH_OK
           ",{\"kernel\":\"%s\",\"grid\":[1],\"block\":[1],\"args\":%s}]}",
           kernel, args);
  expect_error(fx, text, cls, message);
}

static void test_arg_references(void **state) {
  struct fixture *fx = *state;
  expect_args(fx, "k", "[{\"tensor\":\"input:7\"},{\"tensor\":\"output:0\"},{\"i64\":1}]",
              "plan/unknown_tensor",
              "launch 1 arg 0: unknown tensor 'input:7' (known: input:0, param:weight, "
              "output:0)");
  expect_args(fx, "k", "[{\"tensor\":\"input:0\"},{\"buffer\":\"tmp\"},{\"i64\":1}]",
              "plan/unknown_buffer",
              "launch 1 arg 1: unknown buffer 'tmp' (declared: scratch)");
  expect_error(fx,
               "{\"launches\":[{\"kernel\":\"k\",\"grid\":[1],\"block\":[1],\"args\":"
               "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"buffer\":\"tmp\"}]}]}",
               "plan/unknown_buffer", "launch 0 arg 2: unknown buffer 'tmp' (declared: none)");
  expect_args(fx, "k", "[{\"tensor\":3},{\"tensor\":\"output:0\"},{\"i64\":1}]",
              "plan/bad_arg", "launch 1 arg 0: tensor must name a string");
  expect_args(fx, "k", "[{\"tensor\":\"input:0\"},{\"buffer\":null},{\"i64\":1}]",
              "plan/bad_arg", "launch 1 arg 1: buffer must name a string");
}

static void test_arg_shapes(void **state) {
  struct fixture *fx = *state;
  const char *one_of = "must be an object with exactly one of tensor, buffer, i32, i64, f32, "
                       "f64";
  char msg[256];
  snprintf(msg, sizeof msg, "launch 1 arg 1: %s", one_of);
  expect_args(fx, "k", "[{\"tensor\":\"input:0\"},\"output:0\",{\"i64\":1}]", "plan/bad_arg",
              msg);
  expect_args(fx, "k", "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\",\"i64\":1},{\"i64\":1}]",
              "plan/bad_arg", msg);
  expect_args(fx, "k", "[{\"tensor\":\"input:0\"},{},{\"i64\":1}]", "plan/bad_arg", msg);
  expect_args(fx, "k", "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"ptr\":5}]",
              "plan/bad_arg", "launch 1 arg 2: unknown argument type 'ptr'");
  expect_args(fx, "k", "{\"a\":1}", "plan/malformed", "launch 1: args must be an array");
}

static void test_arg_values(void **state) {
  struct fixture *fx = *state;
  expect_args(fx, "k4", "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"i32\":3000000000}]",
              "plan/bad_arg", "launch 1 arg 2: value is not a valid i32");
  expect_args(fx, "k4", "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"i32\":1.5}]",
              "plan/bad_arg", "launch 1 arg 2: value is not a valid i32");
  expect_args(fx, "k", "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"i64\":\"1024\"}]",
              "plan/bad_arg", "launch 1 arg 2: value is not a valid i64");
  expect_args(fx, "k4", "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"f32\":1e39}]",
              "plan/bad_arg", "launch 1 arg 2: value is not a valid f32");
  expect_args(fx, "k", "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"f64\":true}]",
              "plan/bad_arg", "launch 1 arg 2: value is not a valid f64");
}

static void test_arg_signature(void **state) {
  struct fixture *fx = *state;
  expect_args(fx, "k", "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"}]", "plan/bad_arg",
              "launch 1 arg 2: missing; kernel 'k' takes 3 parameters, the plan gives 2");
  expect_args(fx, "k",
              "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"i64\":1},{\"i64\":2}]",
              "plan/bad_arg",
              "launch 1 arg 3: extra; kernel 'k' takes 3 parameters, the plan gives 4");
  expect_args(fx, "k4", "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"i64\":1}]",
              "plan/bad_arg", "launch 1 arg 2: kernel 'k4' parameter 2 is 4 bytes; an i64 is 8");
  expect_args(fx, "k", "[{\"tensor\":\"input:0\"},{\"f32\":1},{\"i64\":1}]", "plan/bad_arg",
              "launch 1 arg 1: kernel 'k' parameter 1 is 8 bytes; an f32 is 4");
  expect_args(fx, "k4", "[{\"tensor\":\"input:0\"},{\"tensor\":\"output:0\"},{\"buffer\":\"scratch\"}]",
              "plan/bad_arg", "launch 1 arg 2: kernel 'k4' parameter 2 is 4 bytes; a buffer is 8");
  /* 65 arguments: over the cap before the kernel's own count is even considered. */
  char args[4096] = "[";
  for (int i = 0; i < 65; i++)
    append(args, sizeof args, i < 64 ? "{\"i32\":1}," : "{\"i32\":1}]");
  expect_args(fx, "k", args, "plan/bad_arg", "launch 1 arg 64: too many args (65; at most 64)");
}

static void test_outputs_named(void **state) {
  struct fixture *fx = *state;
  expect_error(fx,
               "{\"launches\":[{\"kernel\":\"k\",\"grid\":[1],\"block\":[1],\"args\":"
               "[{\"tensor\":\"input:0\"},{\"tensor\":\"param:weight\"},{\"i64\":1}]}]}",
               "plan/output_not_named", "plan: no launch passes tensor 'output:0'");
}

/* A plan with the given buffers array and one launch that uses none of them. */
static void expect_buffers(struct fixture *fx, const char *buffers, const char *cls,
                           const char *message) {
  char text[8192];
  snprintf(text, sizeof text, "{\"buffers\":%s,\"launches\":[" LAUNCH_OK "]}", buffers);
  expect_error(fx, text, cls, message);
}

static void test_buffers(void **state) {
  struct fixture *fx = *state;
  const char *bytes_msg = "bytes must be an integer > 0, all buffers together at most 4294967296";
  char msg[256];
  expect_buffers(fx, "{}", "plan/malformed", "plan: 'buffers' must be an array");
  expect_buffers(fx, "[5]", "plan/bad_buffer", "buffer 0: must be an object {name, bytes}");
  expect_buffers(fx, "[{\"name\":\"a\",\"bytes\":4,\"size\":4}]", "plan/bad_buffer",
                 "buffer 0: unknown key 'size'");
  expect_buffers(fx, "[{\"bytes\":4}]", "plan/bad_buffer",
                 "buffer 0: name must be a string of 1..64 characters [A-Za-z0-9_:.-]");
  expect_buffers(fx, "[{\"name\":\"a b\",\"bytes\":4}]", "plan/bad_buffer",
                 "buffer 0: name must be a string of 1..64 characters [A-Za-z0-9_:.-]");
  expect_buffers(fx, "[{\"name\":\"\",\"bytes\":4}]", "plan/bad_buffer",
                 "buffer 0: name must be a string of 1..64 characters [A-Za-z0-9_:.-]");
  snprintf(msg, sizeof msg, "buffer 0 ('tmp'): %s", bytes_msg);
  expect_buffers(fx, "[{\"name\":\"tmp\",\"bytes\":0}]", "plan/bad_buffer", msg);
  expect_buffers(fx, "[{\"name\":\"tmp\",\"bytes\":-8}]", "plan/bad_buffer", msg);
  expect_buffers(fx, "[{\"name\":\"tmp\",\"bytes\":\"8\"}]", "plan/bad_buffer", msg);
  expect_buffers(fx, "[{\"name\":\"tmp\"}]", "plan/bad_buffer", msg);
  snprintf(msg, sizeof msg, "buffer 1 ('b'): %s", bytes_msg);
  expect_buffers(fx, "[{\"name\":\"a\",\"bytes\":4294967295},{\"name\":\"b\",\"bytes\":2}]",
                 "plan/bad_buffer", msg);
  expect_buffers(fx, "[{\"name\":\"tmp\",\"bytes\":8},{\"name\":\"tmp\",\"bytes\":8}]",
                 "plan/bad_buffer", "buffer 1: duplicate name 'tmp' (also buffer 0)");
  char many[4096] = "[";
  for (int i = 0; i < 17; i++) {
    char one[64];
    snprintf(one, sizeof one, "{\"name\":\"b%d\",\"bytes\":8}%s", i, i < 16 ? "," : "]");
    append(many, sizeof many, one);
  }
  expect_buffers(fx, many, "plan/bad_buffer", "plan declares 17 buffers; at most 16");
  /* 4 GiB in all is the limit, and allowed. */
  struct gpu_failure f;
  struct gpu_plan *p = parse(fx, "{\"buffers\":[{\"name\":\"a\",\"bytes\":4294967295},"
                                 "{\"name\":\"b\",\"bytes\":1}],\"launches\":[" LAUNCH_OK "]}",
                             &f);
  assert_non_null(p);
  gpu_plan_free(p);
}

static void test_tensor_spec(void **state) {
  (void)state;
  static const char *const bad[] = {
    "{}",
    "{\"tensors\":{}}",
    "{\"tensors\":[{\"name\":\"input:0\"}]}",
    "{\"tensors\":[{\"name\":\"\",\"bytes\":4}]}",
    "{\"tensors\":[{\"name\":\"input:0\",\"bytes\":-4}]}",
    "{\"tensors\":[{\"name\":\"input:0\",\"bytes\":4}],\"precision\":\"fp16\"}",
    "{\"tensors\":[{\"name\":\"input:0\",\"bytes\":4},{\"name\":\"input:0\",\"bytes\":4}]}",
    "{\"tensors\":[{\"name\":\"node:a\",\"bytes\":4,\"output\":\"yes\"}]}",
    "{\"tensors\":[{\"name\":\"node:a\",\"bytes\":4,\"output\":1}]}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *o = json_loads(bad[i], 0, NULL);
    struct plan_tensors *t = NULL;
    struct gpu_failure f = {0};
    assert_non_null(o);
    assert_int_equal(plan_tensors_parse(o, &t, &f), -1);
    assert_null(t);
    assert_string_equal(f.stage, "protocol");
    assert_string_equal(f.cls, "protocol/bad_tensors");
    json_decref(o);
  }
  json_t *o = json_loads("{\"tensors\":[{\"name\":\"output:1\",\"bytes\":8,\"numel\":2,"
                         "\"dtype\":\"float32\"}],\"precision\":\"bf16\"}",
                         0, NULL);
  struct plan_tensors *t = NULL;
  struct gpu_failure f = {0};
  assert_int_equal(plan_tensors_parse(o, &t, &f), 0);
  assert_int_equal(t->n, 1);
  assert_true(t->items[0].is_output);
  assert_int_equal(t->items[0].bytes, 8);
  assert_int_equal(t->items[0].numel, 2);
  assert_string_equal(t->items[0].dtype, "float32");
  assert_int_equal(t->precision, GPU_PREC_BF16);
  plan_tensors_free(t);
  json_decref(o);
}

/* A program's region names node values: "output" true makes one an output (poisoned, and
 * it must be written), and "output" false keeps a task output it only reads an input. */
static void test_tensor_output_flag(void **state) {
  struct fixture *fx = *state;
  json_t *o = json_loads("{\"tensors\":["
                         "{\"name\":\"node:a\",\"bytes\":8,\"output\":true},"
                         "{\"name\":\"output:0\",\"bytes\":8,\"output\":false},"
                         "{\"name\":\"output:1\",\"bytes\":8},"
                         "{\"name\":\"node:b\",\"bytes\":8,\"output\":false},"
                         "{\"name\":\"input:0\",\"bytes\":8}]}",
                         0, NULL);
  struct plan_tensors *t = NULL;
  struct gpu_failure f = {0};
  assert_int_equal(plan_tensors_parse(o, &t, &f), 0);
  json_decref(o);
  static const bool want[] = {true, false, true, false, false};
  for (size_t i = 0; i < 5; i++)
    assert_int_equal(t->items[i].is_output, want[i]);
  /* node:a is an output now: a plan that never passes it is refused. */
  plan_tensors_free(fx->tensors);
  fx->tensors = t;
  expect_error(fx,
               "{\"launches\":[{\"kernel\":\"k\",\"grid\":[1],\"block\":[1],\"args\":"
               "[{\"tensor\":\"output:0\"},{\"tensor\":\"output:1\"},{\"i64\":1}]}]}",
               "plan/output_not_named", "plan: no launch passes tensor 'node:a'");
  struct gpu_plan *p = parse(fx,
                             "{\"launches\":[{\"kernel\":\"k\",\"grid\":[1],\"block\":[1],"
                             "\"args\":[{\"tensor\":\"output:0\"},{\"tensor\":\"node:a\"},"
                             "{\"tensor\":\"output:1\"}]}]}",
                             &f);
  assert_non_null(p);
  gpu_plan_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(test_valid_plan, setup, teardown),
    cmocka_unit_test_setup_teardown(test_scalar_values, setup, teardown),
    cmocka_unit_test_setup_teardown(test_plan_structure, setup, teardown),
    cmocka_unit_test_setup_teardown(test_channels_last_list, setup, teardown),
    cmocka_unit_test_setup_teardown(test_too_many_launches, setup, teardown),
    cmocka_unit_test_setup_teardown(test_kernel_names, setup, teardown),
    cmocka_unit_test_setup_teardown(test_grid, setup, teardown),
    cmocka_unit_test_setup_teardown(test_block, setup, teardown),
    cmocka_unit_test_setup_teardown(test_shared, setup, teardown),
    cmocka_unit_test_setup_teardown(test_arg_references, setup, teardown),
    cmocka_unit_test_setup_teardown(test_arg_shapes, setup, teardown),
    cmocka_unit_test_setup_teardown(test_arg_values, setup, teardown),
    cmocka_unit_test_setup_teardown(test_arg_signature, setup, teardown),
    cmocka_unit_test_setup_teardown(test_outputs_named, setup, teardown),
    cmocka_unit_test_setup_teardown(test_buffers, setup, teardown),
    cmocka_unit_test(test_tensor_spec),
    cmocka_unit_test_setup_teardown(test_tensor_output_flag, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
