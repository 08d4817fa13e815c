/* Build tool: converts one YAML document (block or flow style, no anchors) to JSON. */
#include <errno.h>
#include <jansson.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* Parsing state: the libyaml parser, the input path for messages, and whether the
 * YAML 1.2 core-schema regexes are compiled. */
struct conv {
  yaml_parser_t parser;
  const char *path;
  regex_t re_int, re_hex, re_oct, re_float, re_special;
};

static void report(const struct conv *c, const yaml_mark_t *mark, const char *what) {
  fprintf(stderr, "%s:%zu:%zu: %s\n", c->path, mark->line + 1, mark->column + 1, what);
}

/* Reads the next event into *ret_ev (caller deletes it); reports libyaml's own error. */
static int next_event(struct conv *c, yaml_event_t *ret_ev) {
  if (yaml_parser_parse(&c->parser, ret_ev))
    return 0;
  const char *problem = c->parser.problem ? c->parser.problem : "unknown error";
  fprintf(stderr, "%s:%zu:%zu: YAML error: %s", c->path, c->parser.problem_mark.line + 1,
          c->parser.problem_mark.column + 1, problem);
  if (c->parser.context)
    fprintf(stderr, " (%s at line %zu)", c->parser.context, c->parser.context_mark.line + 1);
  fputc('\n', stderr);
  return -1;
}

static bool matches(const regex_t *re, const char *s) {
  return regexec(re, s, 0, NULL, 0) == 0;
}

/* An integer in base; NULL (reported) when it does not fit in json_int_t. */
static json_t *make_int(struct conv *c, const yaml_mark_t *mark, const char *text, int base) {
  errno = 0;
  char *end = NULL;
  long long v = strtoll(text, &end, base);
  if (errno != 0 || *end != '\0') {
    report(c, mark, "integer out of range");
    return NULL;
  }
  return json_integer((json_int_t)v);
}

/* Applies the YAML 1.2 core schema to a plain scalar: null, booleans, integers and
 * finite floats become JSON values; anything else stays a string. Infinity and NaN
 * have no JSON form, so they are rejected rather than silently turned into strings.
 * Returns a new reference, or NULL after reporting. */
static json_t *plain_scalar(struct conv *c, const yaml_event_t *ev) {
  const char *s = (const char *)ev->data.scalar.value;
  const yaml_mark_t *mark = &ev->start_mark;
  if (*s == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
      strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0)
    return json_null();
  if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0)
    return json_true();
  if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0)
    return json_false();
  if (matches(&c->re_int, s))
    return make_int(c, mark, s, 10);
  if (matches(&c->re_hex, s))
    return make_int(c, mark, s + 2, 16);
  if (matches(&c->re_oct, s))
    return make_int(c, mark, s + 2, 8);
  if (matches(&c->re_float, s)) {
    errno = 0;
    char *end = NULL;
    double d = strtod(s, &end);
    if (errno != 0 || *end != '\0') {
      report(c, mark, "float out of range");
      return NULL;
    }
    return json_real(d);
  }
  if (matches(&c->re_special, s)) {
    report(c, mark, "infinity and NaN cannot be written as JSON");
    return NULL;
  }
  return json_string(s);
}

static json_t *parse_node(struct conv *c, yaml_event_t *ev);

/* Parses mapping entries up to MAPPING-END into a new object; keys must be scalars and
 * unique (JSON consumers keep only one of two equal keys, so a duplicate is a bug). */
static json_t *parse_mapping(struct conv *c) {
  json_t *obj = json_object();
  for (;;) {
    yaml_event_t key_ev;
    if (next_event(c, &key_ev) != 0)
      goto fail;
    if (key_ev.type == YAML_MAPPING_END_EVENT) {
      yaml_event_delete(&key_ev);
      return obj;
    }
    if (key_ev.type != YAML_SCALAR_EVENT) {
      report(c, &key_ev.start_mark, "mapping keys must be scalars");
      yaml_event_delete(&key_ev);
      goto fail;
    }
    const char *key = (const char *)key_ev.data.scalar.value;
    if (json_object_get(obj, key)) {
      char msg[300];
      snprintf(msg, sizeof msg, "duplicate key '%.200s'", key);
      report(c, &key_ev.start_mark, msg);
      yaml_event_delete(&key_ev);
      goto fail;
    }
    yaml_event_t val_ev;
    if (next_event(c, &val_ev) != 0) {
      yaml_event_delete(&key_ev);
      goto fail;
    }
    json_t *val = parse_node(c, &val_ev);
    yaml_event_delete(&val_ev);
    int rc = val ? json_object_set_new(obj, key, val) : -1;
    yaml_event_delete(&key_ev);
    if (rc != 0)
      goto fail;
  }
fail:
  json_decref(obj);
  return NULL;
}

/* Parses sequence items up to SEQUENCE-END into a new array. */
static json_t *parse_sequence(struct conv *c) {
  json_t *arr = json_array();
  for (;;) {
    yaml_event_t ev;
    if (next_event(c, &ev) != 0)
      break;
    if (ev.type == YAML_SEQUENCE_END_EVENT) {
      yaml_event_delete(&ev);
      return arr;
    }
    json_t *item = parse_node(c, &ev);
    yaml_event_delete(&ev);
    if (!item || json_array_append_new(arr, item) != 0)
      break;
  }
  json_decref(arr);
  return NULL;
}

/* Converts the node that starts with ev (borrowed; the caller deletes it). Returns a new
 * reference, or NULL after reporting. */
static json_t *parse_node(struct conv *c, yaml_event_t *ev) {
  switch (ev->type) {
  case YAML_SCALAR_EVENT:
    if (ev->data.scalar.anchor) {
      report(c, &ev->start_mark, "anchors are not supported");
      return NULL;
    }
    /* Only an untagged plain scalar is resolved; quoted and block scalars are strings. */
    if (ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag)
      return plain_scalar(c, ev);
    return json_stringn((const char *)ev->data.scalar.value, ev->data.scalar.length);
  case YAML_MAPPING_START_EVENT:
    if (ev->data.mapping_start.anchor) {
      report(c, &ev->start_mark, "anchors are not supported");
      return NULL;
    }
    return parse_mapping(c);
  case YAML_SEQUENCE_START_EVENT:
    if (ev->data.sequence_start.anchor) {
      report(c, &ev->start_mark, "anchors are not supported");
      return NULL;
    }
    return parse_sequence(c);
  case YAML_ALIAS_EVENT:
    report(c, &ev->start_mark, "aliases are not supported");
    return NULL;
  default:
    report(c, &ev->start_mark, "unexpected YAML event");
    return NULL;
  }
}

/* Expects `want` as the next event; reports `what` otherwise. */
static int expect(struct conv *c, yaml_event_type_t want, const char *what) {
  yaml_event_t ev;
  if (next_event(c, &ev) != 0)
    return -1;
  int rc = ev.type == want ? 0 : -1;
  if (rc != 0)
    report(c, &ev.start_mark, what);
  yaml_event_delete(&ev);
  return rc;
}

/* Parses the whole stream, which must hold exactly one document. Returns a new reference
 * or NULL after reporting. */
static json_t *parse_stream(struct conv *c) {
  if (expect(c, YAML_STREAM_START_EVENT, "expected start of stream") != 0 ||
      expect(c, YAML_DOCUMENT_START_EVENT, "expected one YAML document") != 0)
    return NULL;
  yaml_event_t ev;
  if (next_event(c, &ev) != 0)
    return NULL;
  json_t *root = parse_node(c, &ev);
  yaml_event_delete(&ev);
  if (root && (expect(c, YAML_DOCUMENT_END_EVENT, "expected end of document") != 0 ||
               expect(c, YAML_STREAM_END_EVENT, "expected exactly one YAML document") != 0)) {
    json_decref(root);
    return NULL;
  }
  return root;
}

/* The YAML 1.2 core schema (spec section 10.3.2) as anchored POSIX regexes. */
static int compile_regexes(struct conv *c) {
  struct {
    regex_t *re;
    const char *pattern;
  } table[] = {
    {&c->re_int, "^[-+]?[0-9]+$"},
    {&c->re_hex, "^0x[0-9a-fA-F]+$"},
    {&c->re_oct, "^0o[0-7]+$"},
    {&c->re_float, "^[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?$"},
    {&c->re_special, "^([-+]?\\.(inf|Inf|INF)|\\.(nan|NaN|NAN))$"},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (regcomp(table[i].re, table[i].pattern, REG_EXTENDED | REG_NOSUB) != 0)
      return -1;
  return 0;
}

static void free_regexes(struct conv *c) {
  regfree(&c->re_int);
  regfree(&c->re_hex);
  regfree(&c->re_oct);
  regfree(&c->re_float);
  regfree(&c->re_special);
}

/* Usage: yaml2json IN.yaml OUT.json. Exit 0 on success, 1 on bad input or I/O error,
 * 2 on bad usage; a partial output file is removed. */
int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: yaml2json IN.yaml OUT.json\n");
    return 2;
  }
  struct conv c = {.path = argv[1]};
  FILE *in = fopen(argv[1], "rb");
  if (!in) {
    perror(argv[1]);
    return 1;
  }
  if (compile_regexes(&c) != 0 || !yaml_parser_initialize(&c.parser)) {
    fprintf(stderr, "yaml2json: out of memory\n");
    fclose(in);
    return 1;
  }
  yaml_parser_set_input_file(&c.parser, in);
  json_t *root = parse_stream(&c);
  yaml_parser_delete(&c.parser);
  fclose(in);
  free_regexes(&c);
  if (!root)
    return 1;
  int rc = json_dump_file(root, argv[2], JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  json_decref(root);
  if (rc != 0) {
    fprintf(stderr, "yaml2json: cannot write %s\n", argv[2]);
    remove(argv[2]);
    return 1;
  }
  return 0;
}
