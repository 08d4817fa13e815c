/* `opforge memory`: export, import, reset and browse the HTAM memory of a server, in one
 * namespace (--memory), and list, create and delete namespaces. */
#include "cli/memory.h"
#include "cli/args.h"
#include "cli/client.h"
#include "cli/document.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct memory_opts {
  const char *command;    /* export, import, reset, show, namespaces, create, delete */
  const char *arg;        /* import: FILE; show: ID (may be NULL); create, delete: NAME */
  const char *output;     /* export: -o FILE, NULL for stdout */
  const char *memory;     /* --memory NAME; NULL: the default namespace */
  const char *from;       /* create: --from seed|empty|NAME; NULL: seed */
  const char *server;
  const char *token_file;
};

static void usage(FILE *out) {
  fputs("usage: opforge memory COMMAND [options]\n"
        "Exports, imports, resets or shows the server's HTAM memory (one namespace).\n"
        "  export [-o FILE]   write the whole memory as JSON (default: standard output)\n"
        "  import FILE        replace the memory with FILE (an export, or a seed document;\n"
        "                     - reads standard input); nothing changes if it is refused\n"
        "  reset              replace the memory with the built-in seed, stats at zero\n"
        "  show [ID]          list the global directions, or show one node (global or local)\n"
        "  namespaces         list the memory namespaces\n"
        "  create NAME        create namespace NAME (--from seed, empty or another name)\n"
        "  delete NAME        delete namespace NAME and all its records\n"
        "options:\n"
        "  -o, --output FILE  export: write to FILE\n"
        "  --memory NAME      the namespace export, import, reset and show work on\n"
        "                     (default: default)\n"
        "  --from ORIGIN      create: seed (default), empty, or a namespace to copy\n"
        "  --server URL       server base URL (default $OPFORGE_SERVER, else "
        CLI_DEFAULT_SERVER ")\n"
        "  --token-file F     bearer token file (default $OPFORGE_TOKEN, "
        "$OPFORGE_TOKEN_FILE)\n"
        "  --help             show this text\n",
        out);
}

enum { OPT_SERVER = 256, OPT_TOKEN_FILE, OPT_MEMORY, OPT_FROM, OPT_HELP };

static const struct option long_opts[] = {
    {"output", required_argument, NULL, 'o'},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"from", required_argument, NULL, OPT_FROM},
    {"server", required_argument, NULL, OPT_SERVER},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Checks the positional arguments of the command. Returns -1 to go on, else the exit
 * status. */
static int check_positional(int argc, char **argv, struct memory_opts *o) {
  int extra = argc - optind;
  bool named = strcmp(o->command, "create") == 0 || strcmp(o->command, "delete") == 0;
  bool needs_arg = named || strcmp(o->command, "import") == 0;
  bool takes_arg = needs_arg || strcmp(o->command, "show") == 0;
  bool known = takes_arg || strcmp(o->command, "export") == 0 ||
               strcmp(o->command, "reset") == 0 || strcmp(o->command, "namespaces") == 0;
  if (!known) {
    fprintf(stderr, "error: unknown memory command '%s'\n", o->command);
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (extra > (takes_arg ? 1 : 0) || (needs_arg && extra != 1)) {
    fprintf(stderr, "error: %s\n", !needs_arg || extra ? "too many arguments"
                                   : named            ? "create and delete need a NAME"
                                                      : "import needs a FILE");
    return CLI_EXIT_USAGE;
  }
  if (o->output && strcmp(o->command, "export") != 0) {
    fprintf(stderr, "error: -o applies to export only\n");
    return CLI_EXIT_USAGE;
  }
  if (o->from && strcmp(o->command, "create") != 0) {
    fprintf(stderr, "error: --from applies to create only\n");
    return CLI_EXIT_USAGE;
  }
  if (o->memory && (named || strcmp(o->command, "namespaces") == 0)) {
    fprintf(stderr, "error: --memory does not apply to %s\n", o->command);
    return CLI_EXIT_USAGE;
  }
  o->arg = extra ? argv[optind] : NULL;
  return -1;
}

/* Stores one parsed option in opts (a struct memory_opts). Returns 0, or -1 for a code
 * it does not know. */
static int apply_opt(void *opts, int c, const char *arg) {
  struct memory_opts *o = opts;
  switch (c) {
  case 'o': o->output = arg; return 0;
  case OPT_MEMORY: o->memory = arg; return 0;
  case OPT_FROM: o->from = arg; return 0;
  case OPT_SERVER: o->server = arg; return 0;
  case OPT_TOKEN_FILE: o->token_file = arg; return 0;
  default: return -1;
  }
}

static const struct cli_options memory_options = {
    .shortopts = ":o:", .longopts = long_opts, .help = OPT_HELP, .usage = usage,
    .apply = apply_opt,
};

/* Parses argv (argv[0] is "memory", argv[1] the command). Returns -1 to go on, else the
 * exit status to return at once. */
static int parse_args(int argc, char **argv, struct memory_opts *o) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
  }
  o->command = argv[1];
  /* The option loop sees the command word as its argv[0]. */
  int rc = cli_parse_options(argc - 1, argv + 1, &memory_options, o);
  if (rc >= 0)
    return rc;
  optind++; /* back to argv's numbering */
  return check_positional(argc, argv, o);
}

/* ---- the namespace of a request ---- */

/* The --memory namespace of this run; NULL for the default. */
static const char *g_memory;

/* path with "?memory=NAME" (or "&memory=...") when a namespace was named, into out
 * (CLI_MAX_URL bytes). Returns out, or NULL after printing why. */
static const char *in_memory(const char *path, char *out) {
  char *esc = g_memory ? cli_escape(g_memory) : NULL;
  int n = g_memory ? (esc ? snprintf(out, CLI_MAX_URL, "%s%cmemory=%s", path,
                                     strchr(path, '?') ? '&' : '?', esc)
                          : -1)
                   : snprintf(out, CLI_MAX_URL, "%s", path);
  free(esc);
  if (n < 0 || n >= CLI_MAX_URL) {
    fprintf(stderr, "error: %s\n", n < 0 ? "out of memory" : "the namespace name is too long");
    return NULL;
  }
  return out;
}

/* ---- export, import, reset ---- */

static int do_export(struct cli_client *client, const struct memory_opts *o) {
  json_t *doc = NULL;
  char path[CLI_MAX_URL];
  if (!in_memory("/v1/memory/export", path) || cli_call(client, "GET", path, NULL, &doc) != 0)
    return CLI_EXIT_FAIL;
  int ret = cli_document_write(doc, o->output) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  json_decref(doc);
  return ret;
}


/* Prints what the memory holds after an import or reset. */
static void print_counts(const char *what, const json_t *counts) {
  printf("%s: %lld global nodes, %lld local nodes, %lld edges, %lld evidence rows\n", what,
         (long long)json_integer_value(json_object_get(counts, "globals")),
         (long long)json_integer_value(json_object_get(counts, "locals")),
         (long long)json_integer_value(json_object_get(counts, "edges")),
         (long long)json_integer_value(json_object_get(counts, "evidence")));
}

static int do_import(struct cli_client *client, const char *path) {
  json_t *doc = NULL, *counts = NULL;
  if (cli_document_read(path, &doc) != 0)
    return CLI_EXIT_USAGE;
  char url[CLI_MAX_URL];
  int rc = in_memory("/v1/memory/import", url) ? cli_call(client, "POST", url, doc, &counts) : -1;
  json_decref(doc);
  if (rc != 0)
    return CLI_EXIT_FAIL;
  print_counts("imported", counts);
  json_decref(counts);
  return CLI_EXIT_OK;
}

static int do_reset(struct cli_client *client) {
  json_t *counts = NULL;
  char path[CLI_MAX_URL];
  if (!in_memory("/v1/memory/reset", path) || cli_call(client, "POST", path, NULL, &counts) != 0)
    return CLI_EXIT_FAIL;
  print_counts("reset to the seed", counts);
  json_decref(counts);
  return CLI_EXIT_OK;
}

/* ---- show ---- */

/* A string member, or "-". */
static const char *str_or_dash(const json_t *obj, const char *key) {
  const char *s = json_string_value(json_object_get(obj, key));
  return s && *s ? s : "-";
}

/* A number member of obj (or of obj.sub) formatted into out, "-" when absent or null. */
static const char *num_text(const json_t *obj, const char *key, char *out, size_t len) {
  const json_t *v = json_object_get(obj, key);
  if (json_is_integer(v))
    snprintf(out, len, "%lld", (long long)json_integer_value(v));
  else if (json_is_number(v))
    snprintf(out, len, "%.4g", json_number_value(v));
  else
    snprintf(out, len, "-");
  return out;
}

/* A list of strings joined with ", " into out. */
static const char *joined(const json_t *list, char *out, size_t len) {
  size_t used = 0, i;
  const json_t *s;
  out[0] = '\0';
  json_array_foreach(list, i, s) {
    int n = snprintf(out + used, len - used, "%s%s", i ? ", " : "", json_string_value(s));
    if (n < 0 || (size_t)n >= len - used)
      break;
    used += (size_t)n;
  }
  return used ? out : "-";
}

static void print_global_table(const json_t *items) {
  printf("%-24s %-36s %7s %6s %8s %8s %6s\n", "ID", "NAME", "PRIOR", "N", "MEAN", "EMA",
         "LOCALS");
  size_t i;
  const json_t *g;
  json_array_foreach(items, i, g) {
    const json_t *st = json_object_get(g, "stats");
    char prior[32], n[32], mean[32], ema[32], locals[32];
    printf("%-24s %-36.36s %7s %6s %8s %8s %6s\n", str_or_dash(g, "id"), str_or_dash(g, "name"),
           num_text(g, "prior", prior, sizeof prior), num_text(st, "n", n, sizeof n),
           num_text(st, "mean", mean, sizeof mean), num_text(st, "ema", ema, sizeof ema),
           num_text(g, "local_count", locals, sizeof locals));
  }
}

/* Fetches path (a list) and returns its items (caller owns), or NULL after printing. */
static json_t *fetch_items(struct cli_client *client, const char *path) {
  json_t *page = NULL;
  char url[CLI_MAX_URL];
  if (!in_memory(path, url) || cli_call(client, "GET", url, NULL, &page) != 0)
    return NULL;
  json_t *items = json_incref(json_object_get(page, "items"));
  json_decref(page);
  if (!json_is_array(items))
    fprintf(stderr, "error: bad_reply: %s has no items array\n", path);
  return items;
}

static int show_global(struct cli_client *client, const json_t *g, const char *esc) {
  const json_t *st = json_object_get(g, "stats");
  char buf[2048], a[32], b[32], c[32], d[32], e[32];
  printf("global %s: %s\n", str_or_dash(g, "id"), str_or_dash(g, "name"));
  printf("  intent:      %s\n", str_or_dash(g, "intent"));
  printf("  objectives:  %s\n", joined(json_object_get(g, "objectives"), buf, sizeof buf));
  printf("  triggers:    %s\n", joined(json_object_get(g, "triggers"), buf, sizeof buf));
  printf("  risks:       %s\n", joined(json_object_get(g, "risks"), buf, sizeof buf));
  printf("  prior %s; tries %s, successes %s, improvements %s, mean %s, ema %s\n",
         num_text(g, "prior", a, sizeof a), num_text(st, "n", b, sizeof b),
         num_text(st, "successes", c, sizeof c), num_text(st, "improvements", d, sizeof d),
         num_text(st, "mean", e, sizeof e), num_text(st, "ema", buf, sizeof buf));
  char path[CLI_MAX_URL];
  snprintf(path, sizeof path, "/v1/memory/global/%s/local", esc);
  json_t *locals = fetch_items(client, path);
  snprintf(path, sizeof path, "/v1/memory/edges?from=%s", esc);
  json_t *edges = locals ? fetch_items(client, path) : NULL;
  size_t i;
  const json_t *x;
  json_array_foreach(locals, i, x) {
    printf("  local %-28s n %-5s mean %-8s %s\n", str_or_dash(x, "id"),
           num_text(json_object_get(x, "stats"), "n", a, sizeof a),
           num_text(json_object_get(x, "stats"), "mean", b, sizeof b), str_or_dash(x, "name"));
  }
  json_array_foreach(edges, i, x) {
    printf("  edge -> %-26s n %-5s mean %-8s %s\n", str_or_dash(x, "to"),
           num_text(json_object_get(x, "stats"), "n", a, sizeof a),
           num_text(json_object_get(x, "stats"), "mean", b, sizeof b), str_or_dash(x, "when"));
  }
  int ret = json_is_array(locals) && json_is_array(edges) ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  json_decref(locals);
  json_decref(edges);
  return ret;
}

static void show_local(const json_t *l) {
  const json_t *st = json_object_get(l, "stats"), *knob = json_object_get(l, "knob_move");
  char buf[2048], a[32], b[32], c[32], v[64];
  printf("local %s (under %s): %s\n", str_or_dash(l, "id"), str_or_dash(l, "global"),
         str_or_dash(l, "name"));
  printf("  edit:      %s\n", str_or_dash(l, "edit_pattern"));
  const json_t *value = json_object_get(knob, "value");
  if (json_is_string(value))
    snprintf(v, sizeof v, "%s", json_string_value(value));
  else
    num_text(knob, "value", v, sizeof v);
  if (json_is_object(knob))
    printf("  knob move: %s %s %s\n", str_or_dash(knob, "knob"), str_or_dash(knob, "op"), v);
  printf("  families:  %s\n", joined(json_object_get(l, "families"), buf, sizeof buf));
  printf("  checks:    %s\n", joined(json_object_get(l, "checks"), buf, sizeof buf));
  printf("  tries %s, successes %s, mean %s\n", num_text(st, "n", a, sizeof a),
         num_text(st, "successes", b, sizeof b), num_text(st, "mean", c, sizeof c));
  size_t i;
  const json_t *ev;
  json_array_foreach(json_object_get(l, "evidence"), i, ev) {
    printf("  %s  reward %-8s %-12s task %s  %s\n", str_or_dash(ev, "created_at"),
           num_text(ev, "reward", a, sizeof a), str_or_dash(ev, "outcome"),
           str_or_dash(ev, "task_id"), str_or_dash(ev, "note"));
  }
}

/* Shows the global node named id, or else the local node. */
static int show_node(struct cli_client *client, const char *id) {
  char *esc = cli_escape(id);
  char path[CLI_MAX_URL];
  if (!esc || snprintf(path, sizeof path, "/v1/memory/global/%s", esc) >= (int)sizeof path) {
    fprintf(stderr, "error: %s\n", esc ? "the id is too long" : "out of memory");
    free(esc);
    return CLI_EXIT_USAGE;
  }
  long status = 0;
  json_t *node = NULL;
  int ret = CLI_EXIT_FAIL;
  char url[CLI_MAX_URL];
  const char *code = NULL;
  if (in_memory(path, url) && cli_request(client, "GET", url, NULL, &status, &node) == 0 &&
      status == 200) {
    ret = show_global(client, node, esc);
  } else if (status == 404 &&
             (code = json_string_value(json_object_get(json_object_get(node, "error"), "code"))) &&
             strcmp(code, "memory_node_not_found") == 0) {
    json_decref(node);
    node = NULL;
    snprintf(path, sizeof path, "/v1/memory/local/%s", esc);
    if (in_memory(path, url) && cli_call(client, "GET", url, NULL, &node) == 0) {
      show_local(node);
      ret = CLI_EXIT_OK;
    }
  } else if (status != 0) {
    cli_print_server_error(status, node);
  }
  json_decref(node);
  free(esc);
  return ret;
}

static int do_show(struct cli_client *client, const char *id) {
  if (id)
    return show_node(client, id);
  json_t *items = fetch_items(client, "/v1/memory/global");
  if (!json_is_array(items)) {
    json_decref(items);
    return CLI_EXIT_FAIL;
  }
  if (json_array_size(items) == 0)
    printf("the memory is empty\n");
  else
    print_global_table(items);
  json_decref(items);
  return CLI_EXIT_OK;
}

/* ---- namespaces ---- */

static int do_namespaces(struct cli_client *client) {
  json_t *page = NULL;
  if (cli_call(client, "GET", "/v1/memory/namespaces", NULL, &page) != 0)
    return CLI_EXIT_FAIL;
  printf("%-32s %-16s %7s %7s %7s  %s\n", "NAME", "ORIGIN", "GLOBALS", "LOCALS", "EDGES",
         "CREATED");
  size_t i;
  const json_t *ns;
  json_array_foreach(json_object_get(page, "items"), i, ns) {
    char g[32], l[32], e[32];
    printf("%-32s %-16s %7s %7s %7s  %s\n", str_or_dash(ns, "name"), str_or_dash(ns, "origin"),
           num_text(ns, "globals", g, sizeof g), num_text(ns, "locals", l, sizeof l),
           num_text(ns, "edges", e, sizeof e), str_or_dash(ns, "created_at"));
  }
  json_decref(page);
  return CLI_EXIT_OK;
}

static int do_create(struct cli_client *client, const char *name, const char *from) {
  json_t *body = json_pack("{s:s, s:s}", "name", name, "from", from ? from : "seed");
  json_t *ns = NULL;
  int rc = body ? cli_call(client, "POST", "/v1/memory/namespaces", body, &ns) : -1;
  json_decref(body);
  if (rc != 0)
    return CLI_EXIT_FAIL;
  printf("created memory namespace %s from %s: %lld global nodes, %lld local nodes, %lld "
         "edges\n", name, from ? from : "seed",
         (long long)json_integer_value(json_object_get(ns, "globals")),
         (long long)json_integer_value(json_object_get(ns, "locals")),
         (long long)json_integer_value(json_object_get(ns, "edges")));
  json_decref(ns);
  return CLI_EXIT_OK;
}

static int do_delete(struct cli_client *client, const char *name) {
  char *esc = cli_escape(name);
  char path[CLI_MAX_URL];
  int n = esc ? snprintf(path, sizeof path, "/v1/memory/namespaces/%s", esc) : -1;
  free(esc);
  if (n < 0 || n >= (int)sizeof path) {
    fprintf(stderr, "error: %s\n", n < 0 ? "out of memory" : "the name is too long");
    return CLI_EXIT_USAGE;
  }
  json_t *none = NULL;
  if (cli_call(client, "DELETE", path, NULL, &none) != 0)
    return CLI_EXIT_FAIL;
  json_decref(none);
  printf("deleted memory namespace %s\n", name);
  return CLI_EXIT_OK;
}

int cli_memory_prepare(struct cli_client *client, const char *name, bool fresh) {
  char *esc = cli_escape(name);
  char path[CLI_MAX_URL];
  int n = esc ? snprintf(path, sizeof path, "/v1/memory/namespaces/%s", esc) : -1;
  free(esc);
  if (n < 0 || n >= (int)sizeof path) {
    fprintf(stderr, "error: %s\n", n < 0 ? "out of memory" : "--memory: the name is too long");
    return -1;
  }
  long status = 0;
  json_t *reply = NULL;
  if (cli_request(client, "GET", path, NULL, &status, &reply) != 0)
    return -1;
  if (status != 200 && status != 404)
    cli_print_server_error(status, reply);
  json_decref(reply);
  reply = NULL;
  if (status != 200 && status != 404)
    return -1;
  bool exists = status == 200, is_default = strcmp(name, "default") == 0;
  if (exists && !fresh)
    return 0;
  if (exists && is_default) {  /* the default namespace cannot be deleted: reset it */
    int rc = cli_call(client, "POST", "/v1/memory/reset?memory=default", NULL, &reply);
    json_decref(reply);
    return rc == 0 ? 0 : -1;
  }
  if (exists && cli_call(client, "DELETE", path, NULL, &reply) != 0)
    return -1;
  json_decref(reply);
  reply = NULL;
  json_t *body = json_pack("{s:s, s:s}", "name", name, "from", "seed");
  int rc = body ? cli_call(client, "POST", "/v1/memory/namespaces", body, &reply) : -1;
  json_decref(body);
  json_decref(reply);
  return rc == 0 ? 0 : -1;
}

int cli_memory_main(int argc, char **argv) {
  struct memory_opts o = {0};
  int ret = parse_args(argc, argv, &o);
  if (ret >= 0)
    return ret;
  struct cli_client *client = NULL;
  if (cli_client_new(o.server, o.token_file, &client) != 0)
    return CLI_EXIT_USAGE;
  g_memory = o.memory;
  if (strcmp(o.command, "namespaces") == 0)
    ret = do_namespaces(client);
  else if (strcmp(o.command, "create") == 0)
    ret = do_create(client, o.arg, o.from);
  else if (strcmp(o.command, "delete") == 0)
    ret = do_delete(client, o.arg);
  else if (strcmp(o.command, "export") == 0)
    ret = do_export(client, &o);
  else if (strcmp(o.command, "import") == 0)
    ret = do_import(client, o.arg);
  else if (strcmp(o.command, "reset") == 0)
    ret = do_reset(client);
  else
    ret = do_show(client, o.arg);
  cli_client_free(client);
  return ret;
}
