/* `opforge profile`: runs load_task and profile in one supervised evaluator process and
 * prints the profile (docs/architecture.md, "Profile") as JSON. */
#include "cli/profile.h"
#include "cli/args.h"
#include "cli/client.h"
#include "cli/sandbox_opts.h"
#include "gpu/sandbox.h"
#include "gpu/supervisor.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SOURCE_MAX (4u << 20) /* a KernelBench program is a few KiB */
#define NAME_MAX_LEN 128


static void usage(FILE *out) {
  fputs("usage: opforge profile FILE.py [options]\n"
        "Loads a KernelBench program in an evaluator process and prints its profile as JSON.\n"
        "  --device D        cpu, meta or a GPU index (default: 0 when a GPU is present,\n"
        "                    else cpu)\n"
        "  --python PATH     interpreter (default $OPFORGE_PYTHON, else\n"
        "                    ~/.cache/opforge/venv/bin/python when it exists, else python3)\n"
        "  --evaluator PATH  evaluator script (default $OPFORGE_EVALUATOR, else found next\n"
        "                    to the opforge binary or in its source tree)\n"
        "  --lib PATH        libopforge_gpu.so (default $OPFORGE_GPU_LIB, else found next to\n"
        "                    the opforge binary; not passed when none is found)\n"
        "  --seed N          seed of the model and inputs (default 42)\n"
        "  --precision P     fp32|tf32|bf16 (default fp32)\n"
        "  --timeout S       deadline of each stage in seconds (default: 120 for\n"
        "                    load_task, 600 for profile)\n"
        "  --help            show this text\n",
        out);
  cli_sandbox_usage(out);
}

enum { OPT_DEVICE = 256, OPT_PYTHON, OPT_EVALUATOR, OPT_LIB, OPT_SEED, OPT_PRECISION,
       OPT_TIMEOUT, OPT_HELP };

static const struct option long_opts[] = {
    {"device", required_argument, NULL, OPT_DEVICE},
    {"python", required_argument, NULL, OPT_PYTHON},
    {"evaluator", required_argument, NULL, OPT_EVALUATOR},
    {"lib", required_argument, NULL, OPT_LIB},
    {"seed", required_argument, NULL, OPT_SEED},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {"help", no_argument, NULL, OPT_HELP},
    CLI_SANDBOX_LONG_OPTS,
    {NULL, 0, NULL, 0},
};

/* True for "cpu", "meta" or a decimal GPU index. */
static bool device_ok(const char *d) {
  if (strcmp(d, "cpu") == 0 || strcmp(d, "meta") == 0)
    return true;
  char *end;
  errno = 0;
  long n = strtol(d, &end, 10);
  return errno == 0 && end != d && *end == '\0' && n >= 0 && n < 1024 && d[0] != '-' &&
         d[0] != '+';
}

/* Stores one parsed option in opts (a struct profile_opts). Returns 0, or -1 after
 * printing why. */
static int apply_opt(void *opts, int c, const char *arg) {
  struct profile_opts *o = opts;
  if (cli_sandbox_is_option(c))
    return cli_sandbox_apply(&o->sandbox, c, arg);
  switch (c) {
  case OPT_DEVICE:
    o->device = arg;
    if (device_ok(arg))
      return 0;
    fprintf(stderr, "error: --device expects cpu, meta or a GPU index, got '%s'\n", arg);
    return -1;
  case OPT_PYTHON: o->python = arg; return 0;
  case OPT_EVALUATOR: o->evaluator = arg; return 0;
  case OPT_LIB: o->lib = arg; return 0;
  case OPT_PRECISION:
    o->precision = arg;
    if (strcmp(arg, "fp32") == 0 || strcmp(arg, "tf32") == 0 || strcmp(arg, "bf16") == 0)
      return 0;
    fprintf(stderr, "error: --precision expects fp32, tf32 or bf16, got '%s'\n", arg);
    return -1;
  case OPT_SEED: return cli_parse_int("--seed", arg, &o->seed);
  case OPT_TIMEOUT:
    if (cli_parse_int("--timeout", arg, &o->timeout_s) != 0)
      return -1;
    if (o->timeout_s > 0 && o->timeout_s <= 86400)
      return 0;
    fprintf(stderr, "error: --timeout expects 1..86400 seconds, got '%s'\n", arg);
    return -1;
  default: return -1;
  }
}

static const struct cli_options profile_options = {
    .shortopts = ":", .longopts = long_opts, .help = OPT_HELP, .usage = usage,
    .apply = apply_opt,
};

/* The task name: the file's base name without ".py". */
static void task_name(const char *path, char *out, size_t outlen) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t len = strlen(base);
  if (len >= 3 && strcmp(base + len - 3, ".py") == 0)
    len -= 3;
  if (len > NAME_MAX_LEN)
    len = NAME_MAX_LEN;
  snprintf(out, outlen, "%.*s", (int)len, base);
}

/* Prints a failure reply: `error: <stage>/<class>: <message>` (the class alone when it
 * already starts with its stage, as "timeout/profile" does), then the traceback. */
static void print_failure(json_t *reply) {
  json_t *e = json_object_get(reply, "error");
  const char *stage = json_string_value(json_object_get(e, "stage"));
  const char *cls = json_string_value(json_object_get(e, "class"));
  const char *msg = json_string_value(json_object_get(e, "message"));
  const char *tb = json_string_value(json_object_get(e, "traceback"));
  stage = stage ? stage : "unknown";
  cls = cls ? cls : "unknown";
  size_t sl = strlen(stage);
  if (strncmp(cls, stage, sl) == 0 && cls[sl] == '/')
    fprintf(stderr, "error: %s: %s\n", cls, msg ? msg : "");
  else
    fprintf(stderr, "error: %s/%s: %s\n", stage, cls, msg ? msg : "");
  if (tb && tb[0])
    fprintf(stderr, "%s%s", tb, tb[strlen(tb) - 1] == '\n' ? "" : "\n");
}

/* The evaluator runs in its own process group, so a terminal's Ctrl-C does not reach
 * it: the handler kills the group before the CLI dies. */
static volatile sig_atomic_t evaluator_pgid;

static void on_interrupt(int sig) {
  if (evaluator_pgid > 0)
    kill(-(pid_t)evaluator_pgid, SIGKILL);
  signal(sig, SIG_DFL);
  raise(sig);
}

static const int interrupt_signals[] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction saved_actions[3];
static bool handlers_installed;

/* Points the handler at sv's current process group (installing it the first time), or
 * with NULL puts the previous handlers back. */
static void watch_interrupts(struct supervisor *sv) {
  long pid = sv ? supervisor_pid(sv) : -1;
  evaluator_pgid = pid > 0 ? (sig_atomic_t)pid : 0;
  if (sv && !handlers_installed) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++)
      sigaction(interrupt_signals[i], &sa, &saved_actions[i]);
    handlers_installed = true;
  } else if (!sv && handlers_installed) {
    for (int i = 0; i < 3; i++)
      sigaction(interrupt_signals[i], &saved_actions[i], NULL);
    handlers_installed = false;
  }
}

/* Sends one request; returns the result object (new reference) or NULL after printing
 * the failure. */
static json_t *run_stage(struct supervisor *sv, const char *op, json_t *args,
                         double deadline_s) {
  json_t *reply = NULL;
  if (supervisor_request(sv, op, args, deadline_s, &reply) != 0) {
    fprintf(stderr, "error: %s: out of memory\n", op);
    return NULL;
  }
  watch_interrupts(sv);  /* a restart changes the pid */
  json_t *result = json_object_get(reply, "result");
  if (!json_is_true(json_object_get(reply, "ok")) || !json_is_object(result)) {
    print_failure(reply);
    json_decref(reply);
    return NULL;
  }
  json_incref(result);
  json_decref(reply);
  return result;
}

/* load_task arguments for the options (the tolerance as in docs/architecture.md, "Formats":
 * 1e-4 for fp32, else 1e-2). */
static json_t *load_args(const struct profile_opts *o, json_t *source) {
  char name[NAME_MAX_LEN + 1];
  task_name(o->file, name, sizeof name);
  double tol = strcmp(o->precision, "fp32") == 0 ? 1e-4 : 1e-2;
  return json_pack("{s:o,s:I,s:s,s:{s:f,s:f},s:i,s:s}", "source", source, "seed",
                   (json_int_t)o->seed, "precision", o->precision, "tolerance", "atol", tol,
                   "rtol", tol, "trials", 5, "name", name);
}

/* Fills cfg from the options, resolving defaults; the strings in *owned are the
 * caller's to free. Returns 0, or -1 after printing why. */
static int make_config(const struct profile_opts *o, struct supervisor_config *cfg,
                       char *owned[3]) {
  supervisor_config_defaults(cfg);
  owned[0] = o->python ? NULL : supervisor_default_python();
  owned[1] = o->evaluator ? NULL : supervisor_default_evaluator();
  owned[2] = o->lib ? NULL : supervisor_default_gpu_lib();
  cfg->python = o->python ? o->python : owned[0];
  cfg->evaluator_path = o->evaluator ? o->evaluator : owned[1];
  cfg->gpu_lib_path = o->lib ? o->lib : owned[2];
  cfg->device = o->device ? o->device : (supervisor_count_gpus() > 0 ? "0" : "cpu");
  cfg->no_restart = true;  /* one request after a failure would be all it served */
  if (o->timeout_s > 0) {
    cfg->profile_deadline_s = (double)o->timeout_s;
    cfg->load_deadline_s = (double)o->timeout_s;
  }
  if (!cfg->evaluator_path) {
    fprintf(stderr, "error: no evaluator found: pass --evaluator or set OPFORGE_EVALUATOR "
                    "(looked for share/opforge/evaluator/main.py and gpu/evaluator/main.py near the "
                    "opforge binary and in its meson source tree)\n");
    return -1;
  }
  return 0;
}

int cli_profile_main(int argc, char **argv) {
  struct profile_opts o = {.precision = "fp32", .seed = 42};
  if (cli_sandbox_settings(&o.sandbox) != 0)
    return CLI_EXIT_USAGE;
  int rc = cli_parse_file_args(argc, argv, &profile_options, &o, &o.file);
  if (rc >= 0)
    return rc;
  json_t *profile = NULL;
  rc = cli_profile_run(&o, &profile);
  if (profile) {
    char *text = json_dumps(profile, JSON_INDENT(2));
    rc = text && printf("%s\n", text) > 0 && fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    free(text);
    json_decref(profile);
  }
  return rc;
}

int cli_profile_run(const struct profile_opts *opts, json_t **ret_profile) {
  struct profile_opts o = *opts;
  int rc;
  json_t *source = NULL;
  if (cli_read_program(o.file, SOURCE_MAX, NULL, &source) != 0)
    return CLI_EXIT_USAGE;
  json_t *args = load_args(&o, source);
  struct supervisor_config cfg;
  char *owned[3] = {NULL, NULL, NULL};
  struct supervisor *sv = NULL;
  struct sandbox *sandbox = NULL;
  char err[1024];
  rc = CLI_EXIT_FAIL;
  if (!args)
    fprintf(stderr, "error: out of memory\n");
  else if (make_config(&o, &cfg, owned) == 0 &&
           cli_sandbox_prepare(&o.sandbox, cfg.python, cfg.evaluator_path, cfg.gpu_lib_path,
                               &sandbox) == 0) {
    cfg.sandbox = sandbox;
    if (supervisor_start(&cfg, &sv, err, sizeof err) != 0)
      fprintf(stderr, "error: start: the evaluator did not start: %s\n", err);
  }
  json_t *profile = NULL;
  if (sv) {
    watch_interrupts(sv);
    json_t *loaded = run_stage(sv, "load_task", args, 0);
    profile = loaded ? run_stage(sv, "profile", NULL, 0) : NULL;
    json_decref(loaded);
  }
  if (profile) {
    *ret_profile = profile;
    rc = CLI_EXIT_OK;
  }
  supervisor_free(sv);
  sandbox_free(sandbox);  /* after the supervisor, which borrows it */
  watch_interrupts(NULL);
  json_decref(args);
  for (int i = 0; i < 3; i++)
    free(owned[i]);
  return rc;
}
