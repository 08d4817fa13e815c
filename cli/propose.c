/* `opforge propose`: the builtin proposer's candidate for a program, without evaluating it. */
#include "cli/propose.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/client.h"
#include "cli/profile.h"
#include "cli/sandbox_opts.h"
#include "proposers/builtin/propose.h"
#include "base/embedded.h"

extern const struct embedded_file opforge_seed_memory[];

struct propose_opts {
  struct profile_opts profile;
  const char *strategy;
  const char *knobs;
};

enum { OPT_HELP = 1000, OPT_STRATEGY, OPT_KNOBS, OPT_DEVICE, OPT_PYTHON, OPT_EVALUATOR };

static const struct option long_opts[] = {
  {"help", no_argument, NULL, OPT_HELP},
  {"strategy", required_argument, NULL, OPT_STRATEGY},
  {"knobs", required_argument, NULL, OPT_KNOBS},
  {"device", required_argument, NULL, OPT_DEVICE},
  {"python", required_argument, NULL, OPT_PYTHON},
  {"evaluator", required_argument, NULL, OPT_EVALUATOR},
  CLI_SANDBOX_LONG_OPTS,
  {NULL, 0, NULL, 0},
};

static void usage(FILE *out) {
  fprintf(out, "usage: opforge propose FILE.py [--strategy NAME] [--knobs K=V,...]\n"
               "                       [--device cpu|meta|N] [--python PATH] [--evaluator PATH]\n"
               "Prints the builtin proposer's candidate (source, options, plan) for the\n"
               "program, after the knob move of seed-memory strategy NAME. --knobs starts\n"
               "from the family defaults with the listed knobs set (for example\n"
               "BM=128,BN=64,MODE=tf32x3), as a parent candidate's options would.\n");
  cli_sandbox_usage(out);
}

static int apply_opt(void *opts, int code, const char *arg) {
  struct propose_opts *o = opts;
  if (cli_sandbox_is_option(code))
    return cli_sandbox_apply(&o->profile.sandbox, code, arg);
  switch (code) {
  case OPT_STRATEGY: o->strategy = arg; return 0;
  case OPT_KNOBS: o->knobs = arg; return 0;
  case OPT_DEVICE: o->profile.device = arg; return 0;
  case OPT_PYTHON: o->profile.python = arg; return 0;
  case OPT_EVALUATOR: o->profile.evaluator = arg; return 0;
  default: return -1;
  }
}

static const struct cli_options propose_options = {
  .shortopts = ":", .longopts = long_opts, .help = OPT_HELP, .usage = usage, .apply = apply_opt,
};

/* The knob move of strategy id in the seed memory (borrowed from seed), or NULL after
 * printing why. */
static json_t *strategy_move(json_t *seed, const char *id) {
  size_t i;
  json_t *local;
  json_array_foreach(json_object_get(seed, "locals"), i, local) {
    if (strcmp(json_string_value(json_object_get(local, "id")), id) == 0)
      return json_object_get(local, "knob_move");
  }
  fprintf(stderr, "error: no strategy '%s' in the seed memory (see GET /v1/memory/export)\n", id);
  return NULL;
}

/* The -D options of a knob list "NAME=INT,MODE=name,..." as a new JSON array (caller owns),
 * or NULL after printing which item is malformed. Values are range-checked later, by the
 * same knob moves a parent candidate's options go through. */
static json_t *knob_list_options(const char *list) {
  json_t *opts = json_array();
  for (const char *p = list; opts && *p;) {
    size_t len = strcspn(p, ",");
    char item[64], name[16], value[32], tail;
    snprintf(item, sizeof item, "%.*s", (int)(len < sizeof item ? len : sizeof item - 1), p);
    if (len >= sizeof item || sscanf(item, "%15[A-Z]=%31[a-z0-9_]%c", name, value, &tail) != 2) {
      fprintf(stderr, "error: --knobs: '%s' is not NAME=VALUE (NAME in capitals)\n", item);
      json_decref(opts);
      return NULL;
    }
    if (strcmp(name, "MODE") == 0) {
      for (char *c = value; *c; c++)
        *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
      json_array_append_new(opts, json_sprintf("-DMODE_%s=1", value));
    } else {
      json_array_append_new(opts, json_sprintf("-D%s=%s", name, value));
    }
    p += len + (p[len] == ',');
  }
  return opts;
}

int cli_propose_main(int argc, char **argv) {
  struct propose_opts o = {.profile = {.precision = "fp32", .seed = 42, .device = "cpu"}};
  if (cli_sandbox_settings(&o.profile.sandbox) != 0)
    return CLI_EXIT_USAGE;
  int rc = cli_parse_file_args(argc, argv, &propose_options, &o, &o.profile.file);
  if (rc >= 0)
    return rc;
  json_t *seed = json_loads(opforge_seed_memory[0].data, 0, NULL);
  json_t *move = o.strategy && seed ? strategy_move(seed, o.strategy) : NULL;
  json_t *profile = NULL;
  json_t *parent_options = o.knobs ? knob_list_options(o.knobs) : NULL;
  if ((o.strategy && !move) || (o.knobs && !parent_options)) {
    json_decref(seed);
    json_decref(parent_options);
    return CLI_EXIT_USAGE;
  }
  rc = cli_profile_run(&o.profile, &profile);
  if (rc != CLI_EXIT_OK) {
    json_decref(seed);
    json_decref(parent_options);
    return rc;
  }
  char why[1024];
  bool unsupported = false;
  json_t *candidate = NULL;
  if (builtin_propose_knobs(profile, move, parent_options, &candidate, why, sizeof why, &unsupported) != 0) {
    fprintf(stderr, "error: %s: %s\n", unsupported ? "unsupported_by_builtin" : "invalid_move",
            why);
    rc = CLI_EXIT_FAIL;
  } else {
    const struct builtin_family *fam = NULL;
    json_t *match = NULL;
    builtin_match(profile, &fam, &match, why, sizeof why);
    json_t *out = json_pack("{s:s, s:o, s:s?, s:o}", "family", fam ? fam->name : "?", "match",
                            match ? match : json_null(), "strategy", o.strategy, "candidate",
                            candidate);
    char *text = out ? json_dumps(out, JSON_INDENT(2)) : NULL;
    rc = text && printf("%s\n", text) > 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    free(text);
    json_decref(out);
  }
  json_decref(profile);
  json_decref(seed);
  json_decref(parent_options);
  return rc;
}
