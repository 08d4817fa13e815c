/* Helpers over the profile for the builtin families: its FX graph, and the SM count of the
 * device it was taken on. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proposers/builtin/builtin.h"

json_t *graph_node(json_t *profile, const char *name) {
  size_t i;
  json_t *node;
  json_array_foreach(json_object_get(profile, "graph"), i, node) {
    const char *n = json_string_value(json_object_get(node, "name"));
    if (n && name && strcmp(n, name) == 0)
      return node;
  }
  return NULL;
}

json_t *graph_calls(json_t *profile) {
  json_t *calls = json_array();
  size_t i;
  json_t *node;
  json_array_foreach(json_object_get(profile, "graph"), i, node) {
    if (calls && graph_is_call(node))
      json_array_append(calls, node);
  }
  return calls;
}

json_t *graph_ref(json_t *profile, json_t *arg) {
  const char *name = json_string_value(json_object_get(arg, "node"));
  return name ? graph_node(profile, name) : NULL;
}

bool graph_is_call(json_t *node) {
  const char *op = json_string_value(json_object_get(node, "op"));
  return op && strncmp(op, "call_", 5) == 0;
}

bool graph_is_module(json_t *node) {
  const char *op = json_string_value(json_object_get(node, "op"));
  return op && strcmp(op, "call_module") == 0;
}

json_t *graph_arg(json_t *node, size_t pos, const char *kw) {
  json_t *args = json_object_get(node, "args");
  /* json_array_size is 0 for a missing or non-array "args": the keyword is read then. */
  if (pos < json_array_size(args))
    return json_array_get(args, pos);
  return kw ? json_object_get(json_object_get(node, "kwargs"), kw) : NULL;
}

json_t *graph_attr(json_t *node, const char *name) {
  return json_object_get(json_object_get(node, "attrs"), name);
}

json_t *graph_param(json_t *node, size_t pos, const char *name) {
  return graph_is_module(node) ? graph_attr(node, name) : graph_arg(node, pos, name);
}

const char *graph_input_tensor(json_t *node, const char *dtype) {
  const char *op = json_string_value(json_object_get(node, "op"));
  const char *t = json_string_value(json_object_get(node, "tensor"));
  const char *dt = json_string_value(json_object_get(node, "dtype"));
  if (!op || strcmp(op, "placeholder") != 0 || !t || strncmp(t, "input:", 6) != 0 || !dt)
    return NULL;
  return !dtype || strcmp(dt, dtype) == 0 ? t : NULL;
}

/* References to name inside v (args or kwargs, nested). */
static int count_refs(json_t *v, const char *name) {
  int n = 0;
  if (json_is_object(v)) {
    const char *ref = json_string_value(json_object_get(v, "node"));
    if (ref && json_object_size(v) == 1)
      return strcmp(ref, name) == 0;
    const char *key;
    json_t *item;
    json_object_foreach(v, key, item) n += count_refs(item, name);
  } else if (json_is_array(v)) {
    size_t i;
    json_t *item;
    json_array_foreach(v, i, item) n += count_refs(item, name);
  }
  return n;
}

int graph_user_count(json_t *profile, const char *name) {
  int n = 0;
  size_t i;
  json_t *node;
  json_array_foreach(json_object_get(profile, "graph"), i, node) {
    n += count_refs(json_object_get(node, "args"), name);
    n += count_refs(json_object_get(node, "kwargs"), name);
  }
  return n;
}

const char *graph_module_param(json_t *node, const char *suffix) {
  size_t i;
  json_t *p;
  size_t sl = strlen(suffix);
  json_array_foreach(json_object_get(node, "params"), i, p) {
    const char *s = json_string_value(p);
    size_t l = s ? strlen(s) : 0;
    if (l >= sl && strcmp(s + l - sl, suffix) == 0 &&
        (l == sl || s[l - sl - 1] == '.' || s[l - sl - 1] == ':'))
      return s;
  }
  return NULL;
}

const char *graph_arg_param(json_t *profile, json_t *node, size_t pos, const char *kw) {
  const char *t = json_string_value(json_object_get(graph_ref(profile, graph_arg(node, pos, kw)),
                                                    "tensor"));
  return t && strncmp(t, "param:", 6) == 0 ? t : NULL;
}

bool graph_target_is(json_t *node, const char *op) {
  const char *target = json_string_value(json_object_get(node, "target"));
  if (!target || !op)
    return false;
  const char *last = strrchr(target, '.');
  return strcmp(last ? last + 1 : target, op) == 0;
}

int graph_shape(json_t *node, long long dims[8]) {
  json_t *shape = json_object_get(node, "shape");
  if (!json_is_array(shape) || json_array_size(shape) > 8)
    return -1;
  size_t i;
  json_t *d;
  json_array_foreach(shape, i, d) {
    if (!json_is_integer(d))
      return -1;
    dims[i] = json_integer_value(d);
  }
  return (int)json_array_size(shape);
}

long long graph_dims_prod(const long long *dims, int from, int to) {
  long long p = 1;
  for (int i = from; i < to; i++)
    p *= dims[i];
  return p;
}

int builtin_refuse(char *why, size_t whylen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, whylen, fmt, ap);
  va_end(ap);
  return -1;
}

int graph_match_result(json_t *match, json_t **ret_match, char *why, size_t whylen) {
  if (!match) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  *ret_match = match;
  return 1;
}

int builtin_sm_count(const json_t *obj) {
  const json_t *v = json_object_get(obj, "sm_count");
  json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
  return n >= 1 && n <= BUILTIN_MAX_SM_COUNT ? (int)n : BUILTIN_DEFAULT_SM_COUNT;
}

/* See builtin.h. */
const char *builtin_capability(const json_t *profile) {
  return json_string_value(json_object_get(json_object_get(profile, "gpu"), "capability"));
}

/* See builtin.h. */
long long builtin_smem_optin(const json_t *profile) {
  const json_t *v = json_object_get(json_object_get(profile, "gpu"), "max_shared_optin");
  json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
  return n >= 16384 && n <= (1LL << 24) ? (long long)n : 0;
}

/* See builtin.h. */
int builtin_read_tuple(json_t *v, int n, int lo, int hi, int out[3]) {
  if (!v || json_is_null(v) || (json_is_array(v) && json_array_size(v) == 0))
    return 0;
  size_t len = json_is_array(v) ? json_array_size(v) : 1;
  if (len != 1 && len != (size_t)n)
    return -1;
  for (int i = 0; i < n; i++) {
    json_t *e = json_is_array(v) ? json_array_get(v, len == 1 ? 0 : (size_t)i) : v;
    if (!json_is_integer(e) || json_integer_value(e) < lo || json_integer_value(e) > hi)
      return -1;
    out[3 - n + i] = (int)json_integer_value(e);
  }
  return 0;
}
