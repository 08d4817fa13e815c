/* `opforge skills`: list, export and import the skill memory of a server. */
#include "cli/skills.h"
#include "cli/args.h"
#include "cli/client.h"
#include "cli/document.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


struct skills_opts {
  const char *command;  /* list, export, import */
  const char *arg;      /* import: FILE */
  const char *output;   /* export: -o FILE */
  const char *family;   /* list: --family */
  const char *server;
  const char *token_file;
};

static void usage(FILE *out) {
  fputs("usage: opforge skills COMMAND [options]\n"
        "Lists, exports or imports the server's skill memory (rules learned from failures).\n"
        "  list [--family F]  the rules: id, score, enabled, family, refusals, sentence\n"
        "  export [-o FILE]   write every rule with its examples as JSON (default: standard\n"
        "                     output)\n"
        "  import FILE        replace the rules with FILE (an export; - reads standard\n"
        "                     input); nothing changes if it is refused\n"
        "options:\n"
        "  --family F         list: only the rules of op family F (and those of none)\n"
        "  -o, --output FILE  export: write to FILE\n"
        "  --server URL       server base URL (default $OPFORGE_SERVER, else "
        CLI_DEFAULT_SERVER ")\n"
        "  --token-file F     bearer token file (default $OPFORGE_TOKEN, "
        "$OPFORGE_TOKEN_FILE)\n"
        "  --help             show this text\n",
        out);
}

enum { OPT_SERVER = 256, OPT_TOKEN_FILE, OPT_FAMILY, OPT_HELP };

static const struct option long_opts[] = {
    {"output", required_argument, NULL, 'o'},
    {"family", required_argument, NULL, OPT_FAMILY},
    {"server", required_argument, NULL, OPT_SERVER},
    {"token-file", required_argument, NULL, OPT_TOKEN_FILE},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static int apply_opt(void *opts, int c, const char *arg) {
  struct skills_opts *o = opts;
  switch (c) {
  case 'o': o->output = arg; return 0;
  case OPT_FAMILY: o->family = arg; return 0;
  case OPT_SERVER: o->server = arg; return 0;
  case OPT_TOKEN_FILE: o->token_file = arg; return 0;
  default: return -1;
  }
}

static const struct cli_options skills_options = {
    .shortopts = ":o:", .longopts = long_opts, .help = OPT_HELP, .usage = usage,
    .apply = apply_opt,
};

/* Checks the command and its operands. Returns -1 to go on, else the exit status. */
static int check_positional(int argc, char **argv, struct skills_opts *o) {
  int extra = argc - optind;
  bool import = strcmp(o->command, "import") == 0;
  if (!import && strcmp(o->command, "list") != 0 && strcmp(o->command, "export") != 0) {
    fprintf(stderr, "error: unknown skills command '%s'\n", o->command);
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  if (extra != (import ? 1 : 0)) {
    fprintf(stderr, "error: %s\n", import && extra == 0 ? "import needs a FILE" : "too many arguments");
    return CLI_EXIT_USAGE;
  }
  if (o->output && strcmp(o->command, "export") != 0) {
    fprintf(stderr, "error: -o applies to export only\n");
    return CLI_EXIT_USAGE;
  }
  if (o->family && strcmp(o->command, "list") != 0) {
    fprintf(stderr, "error: --family applies to list only\n");
    return CLI_EXIT_USAGE;
  }
  o->arg = extra ? argv[optind] : NULL;
  return -1;
}

static int parse_args(int argc, char **argv, struct skills_opts *o) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
  }
  o->command = argv[1];
  int rc = cli_parse_options(argc - 1, argv + 1, &skills_options, o);
  if (rc >= 0)
    return rc;
  optind++; /* back to argv's numbering */
  return check_positional(argc, argv, o);
}

static int do_list(struct cli_client *client, const char *family) {
  char path[CLI_MAX_URL] = "/v1/skills";
  if (family) {
    char *esc = cli_escape(family);
    if (!esc || snprintf(path, sizeof path, "/v1/skills?family=%s", esc) >= (int)sizeof path) {
      fprintf(stderr, "error: %s\n", esc ? "the family is too long" : "out of memory");
      free(esc);
      return CLI_EXIT_USAGE;
    }
    free(esc);
  }
  json_t *page = NULL;
  if (cli_call(client, "GET", path, NULL, &page) != 0)
    return CLI_EXIT_FAIL;
  json_t *items = json_object_get(page, "items");
  if (json_array_size(items) == 0)
    printf("no skill rules\n");
  else
    printf("%5s %6s %-3s %-10s %8s  %s\n", "ID", "SCORE", "ON", "FAMILY", "REFUSALS", "RULE");
  size_t i;
  json_t *s;
  json_array_foreach(items, i, s) {
    const char *fam = json_string_value(json_object_get(s, "family"));
    printf("%5lld %6lld %-3s %-10s %8lld  %s%s\n",
           (long long)json_integer_value(json_object_get(s, "id")),
           (long long)json_integer_value(json_object_get(s, "score")),
           json_is_true(json_object_get(s, "enabled")) ? "yes" : "no", fam ? fam : "-",
           (long long)json_integer_value(json_object_get(s, "refusals")),
           json_string_value(json_object_get(s, "rule")),
           json_is_object(json_object_get(s, "constraint")) ? " [constraint]" : "");
  }
  json_decref(page);
  return CLI_EXIT_OK;
}

static int do_export(struct cli_client *client, const char *output) {
  json_t *doc = NULL;
  if (cli_call(client, "GET", "/v1/skills/export", NULL, &doc) != 0)
    return CLI_EXIT_FAIL;
  int ret = cli_document_write(doc, output) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
  json_decref(doc);
  return ret;
}


static int do_import(struct cli_client *client, const char *path) {
  json_t *doc = NULL, *counts = NULL;
  if (cli_document_read(path, &doc) != 0)
    return CLI_EXIT_USAGE;
  int rc = cli_call(client, "POST", "/v1/skills/import", doc, &counts);
  json_decref(doc);
  if (rc != 0)
    return CLI_EXIT_FAIL;
  printf("imported: %lld skill rules, %lld examples\n",
         (long long)json_integer_value(json_object_get(counts, "skills")),
         (long long)json_integer_value(json_object_get(counts, "examples")));
  json_decref(counts);
  return CLI_EXIT_OK;
}

int cli_skills_main(int argc, char **argv) {
  struct skills_opts o = {0};
  int ret = parse_args(argc, argv, &o);
  if (ret >= 0)
    return ret;
  struct cli_client *client = NULL;
  if (cli_client_new(o.server, o.token_file, &client) != 0)
    return CLI_EXIT_USAGE;
  if (strcmp(o.command, "list") == 0)
    ret = do_list(client, o.family);
  else if (strcmp(o.command, "export") == 0)
    ret = do_export(client, o.output);
  else
    ret = do_import(client, o.arg);
  cli_client_free(client);
  return ret;
}
