/* What every part of the KernelBench export uses: the dtype table, the profile's tensors,
 * text buffers, Python literals, the candidate's options and the file's head. */
#include "handlers/export_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NESTING 8
#define DEFINE_VALUE_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.+-"

static const struct export_dtype dtypes[] = {
  {"float32", "float", "float", "torch.float32"},
  {"float64", "double", "double", "torch.float64"},
  {"float16", "at::Half", "at::Half", "torch.float16"},
  {"bfloat16", "at::BFloat16", "at::BFloat16", "torch.bfloat16"},
  {"int64", "long long", "int64_t", "torch.int64"},
  {"int32", "int", "int", "torch.int32"},
  {"int16", "int16_t", "int16_t", "torch.int16"},
  {"int8", "int8_t", "int8_t", "torch.int8"},
  {"uint8", "uint8_t", "uint8_t", "torch.uint8"},
  {"bool", "bool", "bool", "torch.bool"},
};

int export_fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
  return -1;
}

const struct export_dtype *export_dtype_find(const char *name) {
  for (size_t i = 0; name && i < sizeof dtypes / sizeof dtypes[0]; i++)
    if (strcmp(dtypes[i].name, name) == 0)
      return &dtypes[i];
  return NULL;
}

bool export_is_identifier(const char *s) {
  if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
    return false;
  for (const char *c = s + 1; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '_')
      return false;
  return true;
}

long export_input_position(const char *name) {
  if (strncmp(name, "input:", 6) != 0 || !isdigit((unsigned char)name[6]))
    return -1;
  errno = 0;
  char *end = NULL;
  long v = strtol(name + 6, &end, 10);
  return errno || *end || v > 100000 ? -1 : v;
}

bool export_shape_ok(const json_t *shape) {
  size_t i;
  const json_t *d;
  if (!json_is_array(shape) || json_array_size(shape) > 16)
    return false;
  json_array_foreach(shape, i, d) if (!json_is_integer(d) || json_integer_value(d) < 0) return false;
  return true;
}

/* ---- the profile's tensors ------------------------------------------------------------ */

/* Appends the entries of profile[key] to ts, checking each one's name for its kind. */
static int add_tensors(struct xtensors *ts, const json_t *profile, const char *key,
                       enum export_tensor_kind kind, char *err, size_t errlen) {
  static const char *const prefix[] = {"input:", "param:", "output:"};
  const json_t *list = json_object_get(profile, key), *t;
  size_t i;
  if (!json_is_array(list))
    return export_fail(err, errlen, "profile: '%s' must be an array", key);
  json_array_foreach(list, i, t) {
    const char *name = json_string_value(json_object_get(t, "name"));
    const char *dtype = json_string_value(json_object_get(t, "dtype"));
    const json_t *shape = json_object_get(t, "shape");
    if (!name || strncmp(name, prefix[kind], strlen(prefix[kind])) != 0 ||
        !name[strlen(prefix[kind])])
      return export_fail(err, errlen, "profile: %s[%zu] needs a name starting with '%s'", key,
                         i, prefix[kind]);
    if (!export_dtype_find(dtype))
      return export_fail(err, errlen,
                         "profile: %s has dtype '%s', which the export does not support", name,
                         dtype ? dtype : "(none)");
    if (!export_shape_ok(shape))
      return export_fail(err, errlen, "profile: %s needs a shape of non-negative integers",
                         name);
    long position = kind == TENSOR_INPUT ? export_input_position(name) : 0;
    if (position < 0)
      return export_fail(err, errlen, "profile: input name '%s' is not input:<index>", name);
    if (export_tensor_index(ts, name) >= 0)
      return export_fail(err, errlen, "profile: tensor '%s' appears twice", name);
    if (ts->n == EXPORT_MAX_TENSORS)
      return export_fail(err, errlen, "profile: more than %d tensors", EXPORT_MAX_TENSORS);
    ts->items[ts->n++] =
        (struct xtensor){name, export_dtype_find(dtype), shape, kind, position, false, false};
  }
  return 0;
}

int export_collect_tensors(struct xtensors *ts, const json_t *profile, char *err,
                           size_t errlen) {
  ts->n = 0;
  ts->n_outputs = 0;
  if (!json_is_object(profile))
    return export_fail(err, errlen, "profile: must be an object");
  if (add_tensors(ts, profile, "inputs", TENSOR_INPUT, err, errlen) != 0 ||
      add_tensors(ts, profile, "params", TENSOR_PARAM, err, errlen) != 0)
    return -1;
  size_t before = ts->n;
  if (add_tensors(ts, profile, "outputs", TENSOR_OUTPUT, err, errlen) != 0)
    return -1;
  ts->n_outputs = ts->n - before;
  if (ts->n_outputs == 0)
    return export_fail(err, errlen, "profile: the task has no output tensor");
  return 0;
}

long export_tensor_index(const struct xtensors *ts, const char *name) {
  for (size_t i = 0; name && i < ts->n; i++)
    if (strcmp(ts->items[i].name, name) == 0)
      return (long)i;
  return -1;
}

/* ---- text buffers ---------------------------------------------------------------------- */

int export_text_open(struct export_text *t, char *err, size_t errlen) {
  t->data = NULL;
  t->len = 0;
  t->f = open_memstream(&t->data, &t->len);
  return t->f ? 0 : export_fail(err, errlen, "out of memory");
}

int export_text_close(struct export_text *t, bool ok, char **ret_text, char *err,
                      size_t errlen) {
  bool write_failed = ferror(t->f) != 0;
  bool close_failed = fclose(t->f) != 0;
  if (!ok || write_failed || close_failed || !t->data) {
    free(t->data);
    return ok ? export_fail(err, errlen, "out of memory") : -1;
  }
  *ret_text = t->data;
  return 0;
}

/* ---- Python literals -------------------------------------------------------------------- */

void export_put_py_string(FILE *f, const char *s, bool triple) {
  fputs(triple ? "\"\"\"" : "\"", f);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '\\')
      fputs("\\\\", f);
    else if (*c == '"' && (!triple || c[1] == '"' || c[1] == '\0'))
      fputs("\\\"", f);
    else if (*c == '\n' && triple)
      fputc('\n', f);
    else if (*c == '\t' && triple)
      fputc('\t', f);
    else if (*c < 0x20 || *c == 0x7f)
      fprintf(f, "\\x%02x", *c);
    else
      fputc(*c, f);
  }
  fputs(triple ? "\"\"\"" : "\"", f);
}

void export_put_safe(FILE *f, const char *s) {
  for (const char *c = s ? s : "?"; *c; c++)
    fputc(isalnum((unsigned char)*c) || strchr("_.:-", *c) ? *c : '?', f);
}

void export_put_py_shape(FILE *f, const json_t *shape) {
  size_t i;
  const json_t *d;
  fputc('(', f);
  json_array_foreach(shape, i, d) fprintf(f, "%s%lld", i ? ", " : "", (long long)json_integer_value(d));
  fputs(json_array_size(shape) == 1 ? ",)" : ")", f);
}

void export_put_real(FILE *f, double x, bool single) {
  char text[64];
  snprintf(text, sizeof text, single ? "%.9g" : "%.17g", x);
  fputs(text, f);
  if (!strpbrk(text, ".e"))
    fputs(".0", f);
  if (single)
    fputc('f', f);
}

/* ---- the candidate's options ----------------------------------------------------------- */

/* Writes option i, -DNAME[=VALUE], as a #define (and its #undef); 0 or -1. */
static int put_define(const char *s, size_t i, FILE *defines, FILE *undefs, char *err,
                      size_t errlen) {
  const char *eq = strchr(s, '=');
  size_t name_len = eq ? (size_t)(eq - s - 2) : strlen(s + 2);
  char name[65];
  if (name_len == 0 || name_len >= sizeof name ||
      (eq && (strlen(eq + 1) > 64 || strspn(eq + 1, DEFINE_VALUE_CHARS) != strlen(eq + 1))))
    return export_fail(err, errlen, "candidate: option %zu ('%.80s') is not -DNAME[=VALUE]", i,
                       s);
  memcpy(name, s + 2, name_len);
  name[name_len] = '\0';
  if (!export_is_identifier(name))
    return export_fail(err, errlen, "candidate: option %zu ('%.80s') is not -DNAME[=VALUE]", i,
                       s);
  /* -DNAME means 1, as for any C compiler. */
  fprintf(defines, "#define %s %s\n", name, eq ? eq + 1 : "1");
  fprintf(undefs, "#undef %s\n", name);
  return 0;
}

/* Splits the options: -D macros become #define lines (in defines, with their #undef in
 * undefs) and the rest nvcc flags (in flags, as Python list items). Only what the
 * evaluator accepts. The macros stay out of nvcc's command line because there they would
 * also reach the PyTorch and CUDA headers included first (a knob named N or BLOCK can
 * break those); under NVRTC they reached only the candidate. */
static int split_options(const json_t *options, FILE *defines, FILE *undefs, FILE *flags,
                         char *err, size_t errlen) {
  const json_t *o;
  size_t i;
  if (options && !json_is_null(options) && !json_is_array(options))
    return export_fail(err, errlen, "candidate: options must be an array of strings");
  json_array_foreach(options, i, o) {
    const char *s = json_string_value(o);
    if (!s)
      return export_fail(err, errlen, "candidate: option %zu is not a string", i);
    if (strncmp(s, "-D", 2) == 0) {
      if (put_define(s, i, defines, undefs, err, errlen) != 0)
        return -1;
    } else if (strncmp(s, "-maxrregcount=", 14) == 0 || strncmp(s, "--maxrregcount=", 15) == 0) {
      const char *v = strchr(s, '=') + 1;
      if (!*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 3)
        return export_fail(err, errlen, "candidate: option %zu ('%.80s') is malformed", i, s);
      fprintf(flags, ", \"-maxrregcount=%s\"", v);
    } else if (strcmp(s, "--use_fast_math") == 0 || strcmp(s, "-use_fast_math") == 0) {
      fputs(", \"--use_fast_math\"", flags);
    } else {
      return export_fail(err, errlen,
                         "candidate: option %zu ('%.80s') is not one the evaluator accepts", i, s);
    }
  }
  return 0;
}

void export_options_clear(struct export_options *o) {
  free(o->defines);
  free(o->undefs);
  free(o->flags);
  o->defines = o->undefs = o->flags = NULL;
}

int export_options_build(const json_t *options, struct export_options *ret, char *err,
                         size_t errlen) {
  struct export_text d, u, fl;
  if (export_text_open(&d, err, errlen) != 0)
    return -1;
  if (export_text_open(&u, err, errlen) != 0)
    return export_text_close(&d, false, NULL, err, errlen);
  if (export_text_open(&fl, err, errlen) != 0) {
    export_text_close(&d, false, NULL, err, errlen);
    return export_text_close(&u, false, NULL, err, errlen);
  }
  bool ok = split_options(options, d.f, u.f, fl.f, err, errlen) == 0;
  struct export_options o = {NULL, NULL, NULL};
  int rd = export_text_close(&d, ok, &o.defines, err, errlen);
  int ru = export_text_close(&u, ok && rd == 0, &o.undefs, err, errlen);
  int rf = export_text_close(&fl, ok && rd == 0 && ru == 0, &o.flags, err, errlen);
  if (rd || ru || rf) {
    export_options_clear(&o);
    return -1;
  }
  *ret = o;
  return 0;
}

/* ---- the head of the file --------------------------------------------------------------- */

/* Writes note as comment lines: each line after "# ", any byte but printable ASCII as
 * '?'. */
static void put_note(FILE *f, const char *note) {
  fputs("# ", f);
  for (const char *c = note; *c; c++) {
    if (*c == '\n')
      fputs("\n# ", f);
    else
      fputc(*c >= 0x20 && *c < 0x7f ? *c : '?', f);
  }
  fputc('\n', f);
}

void export_put_head(FILE *f, const json_t *candidate, const char *what, bool program) {
  const char *note = json_string_value(json_object_get(candidate, "export_note"));
  fputs("# ---- opforge export ", f);
  fputs("-------------------------------------------------------------\n# Candidate ", f);
  export_put_safe(f, json_string_value(json_object_get(candidate, "id")));
  fputs(" of task ", f);
  export_put_safe(f, json_string_value(json_object_get(candidate, "task_id")));
  fputs(".\n", f);
  if (note)
    put_note(f, note);
  fputs("# This file goes with the task's reference program, which it does not repeat: exec\n"
        "# the reference first and this file after it, in the same namespace, as\n"
        "# KernelBench's eval does (exec(reference, context); exec(this file, context)).\n"
        "# ModelNew is then a drop-in for Model: it builds Model(*init_inputs) as self.ref,\n"
        "# so that its parameters are Model's under the same seed.\n", f);
  fputs(what, f);
  fputs(program ? "import hashlib\nimport os\n\nimport torch\nimport torch.fx\n"
                : "import hashlib\n\nimport torch\n",
        f);
  fputs("import torch.utils.cpp_extension\n\n"
        "if \"Model\" not in globals():\n"
        "    raise NameError(\"ModelNew needs the task's Model: exec the task's reference "
        "program first and \"\n"
        "                    \"this file after it in the same namespace, as KernelBench's "
        "eval does \"\n"
        "                    \"(exec(reference, context); exec(this file, context))\")\n\n",
        f);
}

void export_put_scalars(FILE *f, const json_t *profile, const struct xtensors *ts) {
  const json_t *scalars = json_object_get(profile, "scalar_inputs"), *s;
  long nargs = 0;
  size_t i;
  for (i = 0; i < ts->n; i++)
    if (ts->items[i].kind == TENSOR_INPUT && ts->items[i].position + 1 > nargs)
      nargs = ts->items[i].position + 1;
  fputs("# (position, value) of the non-tensor arguments that the plan has built in.\n"
        "_OFG_SCALARS = [\n", f);
  json_array_foreach(scalars, i, s) {
    const char *name = json_string_value(json_object_get(s, "name"));
    long position = name ? export_input_position(name) : -1;
    const json_t *v = json_object_get(s, "value");
    if (position < 0)
      continue;
    if (position + 1 > nargs)
      nargs = position + 1;
    if (json_is_integer(v))
      fprintf(f, "    (%ld, %lld),\n", position, (long long)json_integer_value(v));
    else if (json_is_real(v) && isfinite(json_real_value(v))) {
      fprintf(f, "    (%ld, ", position);
      export_put_real(f, json_real_value(v), false);
      fputs("),\n", f);
    } else if (json_is_boolean(v))
      fprintf(f, "    (%ld, %s),\n", position, json_is_true(v) ? "True" : "False");
  }
  fprintf(f, "]\n_OFG_NARGS = %ld\n", nargs);
}

/* ---- the return value --------------------------------------------------------------------- */

/* Counts the graph nodes in v, a return value as encode_arg wrote it (a node or nested
 * lists of nodes); false for anything else. */
static bool count_leaves(const json_t *v, size_t *n, int depth) {
  if (json_is_object(v) && json_is_string(json_object_get(v, "node")) && json_object_size(v) == 1) {
    (*n)++;
    return true;
  }
  if (!json_is_array(v) || depth > MAX_NESTING)
    return false;
  size_t i;
  const json_t *item;
  json_array_foreach(v, i, item) if (!count_leaves(item, n, depth + 1)) return false;
  return true;
}

static void put_nested(FILE *f, const json_t *v, size_t *next) {
  if (json_is_object(v)) {
    fprintf(f, "outputs[%zu]", (*next)++);
    return;
  }
  size_t i;
  const json_t *item;
  fputc('(', f);
  json_array_foreach(v, i, item) {
    fputs(i ? ", " : "", f);
    put_nested(f, item, next);
  }
  fputs(json_array_size(v) == 1 ? ",)" : ")", f);
}

/* torch.export graphs always return a flat tuple, so only FX graphs ("fx", "fx_meta")
 * are read. */
void export_put_structure(FILE *f, const json_t *profile, size_t n_outputs) {
  const json_t *graph = json_object_get(profile, "graph"), *node, *ret = NULL;
  const char *source = json_string_value(json_object_get(profile, "graph_source"));
  size_t i, leaves = 0;
  if (source && (strcmp(source, "fx") == 0 || strcmp(source, "fx_meta") == 0)) {
    json_array_foreach(graph, i, node) {
      const char *op = json_string_value(json_object_get(node, "op"));
      if (op && strcmp(op, "output") == 0)
        ret = json_array_get(json_object_get(node, "args"), 0);
    }
  }
  if (ret && count_leaves(ret, &leaves, 0) && leaves == n_outputs) {
    size_t next = 0;
    put_nested(f, ret, &next);
  } else if (n_outputs == 1) {
    fputs("outputs[0]", f);
  } else {
    fputs("tuple(outputs)", f);
  }
}
