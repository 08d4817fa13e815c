/* The sandbox's options, shared by `opforge serve`, `profile` and `propose`: one table of
 * names, variables, help texts and setters (see gpu/sandbox.h). */
#include "gpu/sandbox/internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int set_mode(struct sandbox_settings *s, const char *v, char *err, size_t n) {
  if (sandbox_parse_mode(v, &s->mode) == 0)
    return 0;
  snprintf(err, n, "--sandbox: expected auto, bwrap or none, got '%s'", v);
  return -1;
}

static int set_user(struct sandbox_settings *s, const char *v, char *err, size_t n) {
  if (!v[0] || strlen(v) >= sizeof s->user || strpbrk(v, " \t\n/")) {
    snprintf(err, n, "--evaluator-user: expected a user name, UID or UID:GID, got '%s'", v);
    return -1;
  }
  snprintf(s->user, sizeof s->user, "%s", v);
  return 0;
}

/* An unsigned number in [lo, hi] into *out. */
static int set_number(unsigned *out, const char *opt, const char *v, unsigned long lo,
                      unsigned long hi, char *err, size_t n) {
  char *end;
  errno = 0;
  unsigned long x = strtoul(v, &end, 10);
  if (errno || end == v || *end || v[0] == '-' || x < lo || x > hi) {
    snprintf(err, n, "%s: expected an integer in [%lu, %lu], got '%s'", opt, lo, hi, v);
    return -1;
  }
  *out = (unsigned)x;
  return 0;
}

static int set_scratch(struct sandbox_settings *s, const char *v, char *err, size_t n) {
  return set_number(&s->scratch_mb, "--sandbox-scratch-mb", v, 64, 1u << 20, err, n);
}

static int set_procs(struct sandbox_settings *s, const char *v, char *err, size_t n) {
  return set_number(&s->max_procs, "--evaluator-max-procs", v, 64, 1u << 20, err, n);
}

static int set_files(struct sandbox_settings *s, const char *v, char *err, size_t n) {
  return set_number(&s->max_files, "--evaluator-max-files", v, 64, 1u << 20, err, n);
}

/* Appends the entries of v, separated by sep characters, through add. */
static int add_list(struct sandbox_settings *s, const char *v, const char *sep,
                    int (*add)(struct sandbox_settings *, const char *, char *, size_t),
                    char *err, size_t n) {
  char *copy = strdup(v);
  int rc = copy ? 0 : -1;
  for (char *save = NULL, *e = copy ? strtok_r(copy, sep, &save) : NULL; e && rc == 0;
       e = strtok_r(NULL, sep, &save))
    rc = add(s, e, err, n);
  free(copy);
  return rc;
}

static int add_bind(struct sandbox_settings *s, const char *v, char *err, size_t n) {
  if (v[0] != '/' || strlen(v) >= sizeof s->binds[0] || s->n_binds >= SANDBOX_MAX_BINDS ||
      strcmp(v, "/") == 0) {
    snprintf(err, n, "--sandbox-bind: expected at most %d absolute paths other than /, "
             "got '%s'", SANDBOX_MAX_BINDS, v);
    return -1;
  }
  snprintf(s->binds[s->n_binds++], sizeof s->binds[0], "%s", v);
  return 0;
}

static int add_env(struct sandbox_settings *s, const char *v, char *err, size_t n) {
  char why[256];
  if (s->n_env >= SANDBOX_MAX_ENV) {
    snprintf(err, n, "--sandbox-env: at most %d entries", SANDBOX_MAX_ENV);
    return -1;
  }
  if (sandbox_check_env_name(v, why, sizeof why) != 0) {
    snprintf(err, n, "--sandbox-env: %s", why);
    return -1;
  }
  snprintf(s->env[s->n_env++], sizeof s->env[0], "%s", v);
  return 0;
}

static int set_binds(struct sandbox_settings *s, const char *v, char *err, size_t n) {
  return add_list(s, v, ":", add_bind, err, n);
}

static int set_env(struct sandbox_settings *s, const char *v, char *err, size_t n) {
  return add_list(s, v, ", \t", add_env, err, n);
}

static void clear_binds(struct sandbox_settings *s) {
  s->n_binds = 0;
}

static void clear_env(struct sandbox_settings *s) {
  s->n_env = 0;
}

const struct sandbox_option sandbox_options[] = {
  {"--sandbox", "OPFORGE_SANDBOX",
   "how task code runs: auto (bubblewrap, refusing to start evaluators without it), "
   "bwrap, or none (unsandboxed, with a warning) (auto)", set_mode, NULL},
  {"--evaluator-user", "OPFORGE_EVALUATOR_USER",
   "user the sandboxed evaluator runs as: a name, UID or UID:GID, or same (nobody when "
   "started as root, else the server's own user)", set_user, NULL},
  {"--sandbox-scratch-mb", "OPFORGE_SANDBOX_SCRATCH_MB",
   "size of the evaluator's private /tmp, and of its largest file, in MiB (4096)",
   set_scratch, NULL},
  {"--evaluator-max-procs", "OPFORGE_EVALUATOR_MAX_PROCS",
   "processes and threads a sandboxed evaluator may have (4096)", set_procs, NULL},
  {"--evaluator-max-files", "OPFORGE_EVALUATOR_MAX_FILES",
   "open files per sandboxed evaluator process (4096)", set_files, NULL},
  {"--sandbox-bind", "OPFORGE_SANDBOX_BIND",
   "repeatable: an extra path the sandbox shows read-only (the variable: a list "
   "separated by colons)", set_binds, clear_binds},
  {"--sandbox-env", "OPFORGE_SANDBOX_ENV",
   "repeatable: an extra variable NAME (or PREFIX*) passed into the sandbox; never a "
   "secret's name (the variable: a list separated by commas)", set_env, clear_env},
  {NULL, NULL, NULL, NULL, NULL},
};

const struct sandbox_option *sandbox_option_find(const char *name, size_t len) {
  for (const struct sandbox_option *o = sandbox_options; o->name; o++)
    if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
      return o;
  return NULL;
}

void sandbox_options_usage(FILE *out) {
  for (const struct sandbox_option *o = sandbox_options; o->name; o++)
    fprintf(out, "  %-26s %-32s %s\n", o->name, o->env, o->help);
}
