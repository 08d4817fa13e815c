/* The shape checks of an LLM's launch plan (see answer.h): the rules gpu/plan.c applies
 * when the evaluator loads a plan, checked here before anything is compiled, so that a
 * plan naming unknown tensors or kernels fails as a parse failure with the reason. The
 * limits are gpu/plan.h's; the device limits (threads of a kernel, shared memory) stay
 * the evaluator's to check. */
#include <ctype.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "proposers/llm/answer.h"

#define MAX_LAUNCHES 16
#define MAX_ARGS 64
#define MAX_BUFFERS 16
#define MAX_BUFFER_TOTAL (4ull << 30)
#define MAX_OPTIONS 16
#define MAX_OPTION_LEN 128
#define MAX_BLOCK_THREADS 1024
#define MAX_DYNAMIC_SHARED (227 * 1024)

__attribute__((format(printf, 3, 4))) static int fail(struct answer_error *err, const char *cls,
                                                      const char *fmt, ...) {
  snprintf(err->cls, sizeof err->cls, "%s", cls);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
  return -1;
}

static bool ident_char(char c) {
  return isalnum((unsigned char)c) || c == '_';
}

/* Skips a balanced (...) group that starts at p; returns the position after it. */
static const char *skip_parens(const char *p) {
  int depth = 0;
  for (; *p; p++) {
    if (*p == '(')
      depth++;
    else if (*p == ')' && --depth == 0)
      return p + 1;
  }
  return p;
}

json_t *answer_kernel_names(const char *source) {
  json_t *names = json_array();
  for (const char *g = strstr(source, "__global__"); names && g; g = strstr(g + 10, "__global__")) {
    if ((g > source && ident_char(g[-1])) || ident_char(g[10]))
      continue;
    /* The kernel's name is the identifier before the first '(' that does not open an
     * attribute such as __launch_bounds__(256). */
    const char *p = g + 10;
    for (;;) {
      const char *paren = strchr(p, '(');
      if (!paren)
        break;
      const char *e = paren;
      while (e > p && isspace((unsigned char)e[-1]))
        e--;
      const char *b = e;
      while (b > p && ident_char(b[-1]))
        b--;
      if (e - b >= 2 && b[0] == '_' && b[1] == '_') {
        p = skip_parens(paren);
        continue;
      }
      if (e > b) {
        size_t before = (size_t)(g - source);
        /* extern "C" must come before the kernel (on it or on an enclosing block). */
        const char *ext = strstr(source, "extern \"C\"");
        if (ext && (size_t)(ext - source) < before) {
          json_t *name = json_stringn(b, (size_t)(e - b));
          if (!name || json_array_append_new(names, name) != 0) {
            json_decref(names);
            return NULL;
          }
        }
      }
      break;
    }
  }
  return names;
}

static bool has_name(json_t *names, const char *name) {
  size_t i;
  json_t *v;
  json_array_foreach(names, i, v) if (strcmp(json_string_value(v), name) == 0) return true;
  return false;
}

/* Lists the names of array (strings, or objects' "name"), for a message. */
static void list_names(json_t *array, char *out, size_t len) {
  size_t used = 0, i;
  json_t *v;
  out[0] = '\0';
  json_array_foreach(array, i, v) {
    const char *s = json_is_string(v) ? json_string_value(v)
                                      : json_string_value(json_object_get(v, "name"));
    if (s && used < len)
      used += (size_t)snprintf(out + used, len - used, "%s%s", used ? ", " : "", s);
  }
  if (!used)
    snprintf(out, len, "none");
}

/* The profile's tensor names: inputs, params and outputs (caller owns), and the outputs
 * alone in *ret_outputs (borrowed from profile). */
static json_t *tensor_names(json_t *profile, json_t **ret_outputs) {
  json_t *names = json_array(), *spec;
  static const char *const keys[] = {"inputs", "params", "outputs"};
  for (size_t k = 0; k < 3; k++) {
    size_t i;
    json_array_foreach(json_object_get(profile, keys[k]), i, spec) {
      json_t *n = json_object_get(spec, "name");
      if (json_is_string(n))
        json_array_append(names, n);
    }
  }
  *ret_outputs = json_object_get(profile, "outputs");
  return names;
}

static bool only_keys(json_t *o, const char *const *allowed, const char **ret_bad) {
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    size_t i = 0;
    while (allowed[i] && strcmp(allowed[i], key) != 0)
      i++;
    if (!allowed[i]) {
      *ret_bad = key;
      return false;
    }
  }
  return true;
}

static int check_dims(json_t *dims, const char *what, size_t li, long long *ret_product,
                      struct answer_error *err) {
  if (!json_is_array(dims) || json_array_size(dims) < 1 || json_array_size(dims) > 3)
    return fail(err, "parse/bad_plan", "launch %zu: %s must be an array of 1 to 3 integers", li,
                what);
  long long product = 1;
  for (size_t d = 0; d < json_array_size(dims); d++) {
    json_t *v = json_array_get(dims, d);
    if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 2147483647)
      return fail(err, "parse/bad_plan", "launch %zu: %s[%zu] must be an integer >= 1", li,
                  what, d);
    product *= json_integer_value(v);
    if (product > (1ll << 40))
      product = 1ll << 40;
  }
  *ret_product = product;
  return 0;
}

static int check_buffers(json_t *buffers, struct answer_error *err) {
  if (!buffers)
    return 0;
  if (!json_is_array(buffers) || json_array_size(buffers) > MAX_BUFFERS)
    return fail(err, "parse/bad_plan", "plan: \"buffers\" must be an array of at most %d "
                "{\"name\", \"bytes\"}", MAX_BUFFERS);
  static const char *const keys[] = {"name", "bytes", NULL};
  unsigned long long total = 0;
  size_t i;
  json_t *b;
  json_array_foreach(buffers, i, b) {
    const char *bad = NULL;
    json_t *name = json_object_get(b, "name"), *bytes = json_object_get(b, "bytes");
    const char *s = json_string_value(name);
    size_t len = s ? strlen(s) : 0;
    if (!json_is_object(b) || !only_keys(b, keys, &bad) || !s || len < 1 || len > 64 ||
        strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:.-") != len ||
        !json_is_integer(bytes) || json_integer_value(bytes) <= 0 ||
        (unsigned long long)json_integer_value(bytes) > MAX_BUFFER_TOTAL - total)
      return fail(err, "parse/bad_plan", "buffer %zu: must be {\"name\": 1..64 characters "
                  "[A-Za-z0-9_:.-], \"bytes\": > 0}, all buffers at most %llu bytes", i,
                  MAX_BUFFER_TOTAL);
    total += (unsigned long long)json_integer_value(bytes);
    for (size_t j = 0; j < i; j++)
      if (json_equal(json_object_get(json_array_get(buffers, j), "name"), name))
        return fail(err, "parse/bad_plan", "buffer %zu: duplicate name '%s'", i, s);
  }
  return 0;
}

/* Checks one argument; marks a tensor argument in used (an object of names). */
static int check_arg(json_t *arg, size_t li, size_t ai, json_t *tensors, json_t *buffers,
                     json_t *used, struct answer_error *err) {
  static const char *const kinds[] = {"tensor", "buffer", "i32", "i64", "f32", "f64"};
  if (!json_is_object(arg) || json_object_size(arg) != 1)
    return fail(err, "parse/bad_plan", "launch %zu arg %zu: must be an object with exactly one "
                "of tensor, buffer, i32, i64, f32, f64", li, ai);
  const char *key = json_object_iter_key(json_object_iter(arg));
  json_t *v = json_object_iter_value(json_object_iter(arg));
  size_t k = 0;
  while (k < 6 && strcmp(kinds[k], key) != 0)
    k++;
  char known[400];
  if (k == 6)
    return fail(err, "parse/bad_plan", "launch %zu arg %zu: unknown argument type '%.32s'", li,
                ai, key);
  if (k == 0 || k == 1) {
    const char *name = json_string_value(v);
    bool found = false;
    size_t i;
    json_t *x;
    json_array_foreach(k == 0 ? tensors : buffers, i, x) {
      const char *have = json_is_string(x) ? json_string_value(x)
                                           : json_string_value(json_object_get(x, "name"));
      found = found || (name && have && strcmp(have, name) == 0);
    }
    if (!found) {
      list_names(k == 0 ? tensors : buffers, known, sizeof known);
      return fail(err, k == 0 ? "parse/unknown_tensor" : "parse/unknown_buffer",
                  "launch %zu arg %zu: %s '%.64s' is not one of the region's %s (%s)", li, ai,
                  key, name ? name : "(not a string)", k == 0 ? "tensors" : "declared buffers",
                  known);
    }
    if (k == 0)
      json_object_set_new(used, name, json_true());
    return 0;
  }
  bool integral = k == 2 || k == 3;
  bool ok = integral ? json_is_integer(v) : json_is_number(v);
  if (ok && k == 2)
    ok = json_integer_value(v) >= -2147483648LL && json_integer_value(v) <= 2147483647LL;
  if (!ok)
    return fail(err, "parse/bad_plan", "launch %zu arg %zu: the value is not a valid %s", li, ai,
                key);
  return 0;
}

static int check_launch(json_t *l, size_t li, json_t *kernels, json_t *tensors, json_t *buffers,
                        json_t *used, struct answer_error *err) {
  static const char *const keys[] = {"kernel", "grid", "block", "shared_bytes", "args", NULL};
  const char *bad = NULL;
  char known[400];
  if (!json_is_object(l))
    return fail(err, "parse/bad_plan", "launch %zu: must be an object", li);
  if (!only_keys(l, keys, &bad))
    return fail(err, "parse/bad_plan", "launch %zu: unknown key '%.48s'", li, bad);
  const char *kernel = json_string_value(json_object_get(l, "kernel"));
  if (!kernel || !*kernel)
    return fail(err, "parse/bad_plan", "launch %zu: \"kernel\" must name a kernel", li);
  if (!has_name(kernels, kernel)) {
    list_names(kernels, known, sizeof known);
    return fail(err, "parse/kernel_missing", "launch %zu: kernel '%.64s' is not an extern \"C\" "
                "__global__ function of the source (it has: %s)", li, kernel, known);
  }
  long long grid, block;
  if (check_dims(json_object_get(l, "grid"), "grid", li, &grid, err) != 0 ||
      check_dims(json_object_get(l, "block"), "block", li, &block, err) != 0)
    return -1;
  if (block > MAX_BLOCK_THREADS)
    return fail(err, "parse/bad_plan", "launch %zu: the block has %lld threads; at most %d", li,
                block, MAX_BLOCK_THREADS);
  json_t *shared = json_object_get(l, "shared_bytes");
  if (shared && (!json_is_integer(shared) || json_integer_value(shared) < 0 ||
                 json_integer_value(shared) > MAX_DYNAMIC_SHARED))
    return fail(err, "parse/bad_plan", "launch %zu: shared_bytes must be an integer in [0, %d]",
                li, MAX_DYNAMIC_SHARED);
  json_t *args = json_object_get(l, "args");
  if (args && (!json_is_array(args) || json_array_size(args) > MAX_ARGS))
    return fail(err, "parse/bad_plan", "launch %zu: args must be an array of at most %d", li,
                MAX_ARGS);
  size_t ai;
  json_t *a;
  json_array_foreach(args, ai, a) if (check_arg(a, li, ai, tensors, buffers, used, err) != 0)
      return -1;
  return 0;
}

static int check_options(json_t *options, struct answer_error *err) {
  if (!options)
    return 0;
  if (!json_is_array(options) || json_array_size(options) > MAX_OPTIONS)
    return fail(err, "parse/bad_plan", "\"options\" must be an array of at most %d compiler flags",
                MAX_OPTIONS);
  size_t i;
  json_t *o;
  json_array_foreach(options, i, o) {
    const char *s = json_string_value(o);
    if (!s || s[0] != '-' || strlen(s) > MAX_OPTION_LEN)
      return fail(err, "parse/bad_plan", "option %zu must be a flag such as -DNAME=1 or "
                  "-maxrregcount=64", i);
  }
  return 0;
}

int answer_check_plan(json_t *block, json_t *profile, const char *source, json_t **ret_plan,
                      json_t **ret_options, struct answer_error *err) {
  static const char *const keys[] = {"launches", "buffers", "options", NULL};
  const char *bad = NULL;
  if (!json_is_object(block))
    return fail(err, "parse/bad_plan", "the plan must be a JSON object");
  if (!only_keys(block, keys, &bad))
    return fail(err, "parse/bad_plan", "plan: unknown key '%.48s' (allowed: launches, buffers, "
                "options)", bad);
  json_t *launches = json_object_get(block, "launches"), *buffers = json_object_get(block, "buffers");
  json_t *options = json_object_get(block, "options");
  if (!json_is_array(launches) || json_array_size(launches) < 1 ||
      json_array_size(launches) > MAX_LAUNCHES)
    return fail(err, "parse/bad_plan", "plan: \"launches\" must be an array of 1 to %d launches",
                MAX_LAUNCHES);
  if (check_buffers(buffers, err) != 0 || check_options(options, err) != 0)
    return -1;
  json_t *outputs = NULL, *tensors = tensor_names(profile, &outputs);
  json_t *kernels = answer_kernel_names(source), *used = json_object();
  int rc = tensors && kernels && used ? 0 : fail(err, "parse/bad_plan", "out of memory");
  size_t li, i;
  json_t *l, *spec;
  json_array_foreach(launches, li, l) {
    if (rc == 0)
      rc = check_launch(l, li, kernels, tensors, buffers, used, err);
  }
  json_array_foreach(outputs, i, spec) {
    const char *name = json_string_value(json_object_get(spec, "name"));
    if (rc == 0 && name && !json_object_get(used, name))
      rc = fail(err, "parse/output_not_written", "no launch passes the output tensor '%s'", name);
  }
  json_decref(tensors);
  json_decref(kernels);
  json_decref(used);
  if (rc != 0)
    return -1;
  json_t *bufs = buffers ? json_deep_copy(buffers) : json_array();
  json_t *launch_copy = json_deep_copy(launches);
  json_t *plan = bufs && launch_copy ? json_object() : NULL;
  json_t *opts = options ? json_deep_copy(options) : json_array();
  if (!plan || !opts || json_object_set(plan, "buffers", bufs) != 0 ||
      json_object_set(plan, "launches", launch_copy) != 0) {
    json_decref(plan);
    plan = NULL;
  }
  json_decref(bufs);
  json_decref(launch_copy);
  if (!plan || !opts) {
    json_decref(plan);
    json_decref(opts);
    return fail(err, "parse/bad_plan", "out of memory");
  }
  *ret_plan = plan;
  *ret_options = opts;
  return 0;
}
