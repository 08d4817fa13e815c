/* The evaluator's sandbox (docs/architecture.md, "Sandbox"): a submitted reference program
 * is Python that the evaluator imports, so the evaluator runs under bubblewrap with an
 * empty view of the host to which only what it needs is added, read-only where possible:
 * the system's libraries, the Python install, the evaluator package, libopforge_gpu.so,
 * its own GPU's device nodes and a private size-limited /tmp. It gets no network, its own
 * PID namespace, an allowlisted environment, an unprivileged user where the host allows,
 * and limits on processes, open files and file size. Implemented in gpu/sandbox/
 * (settings.c, prepare.c, python_paths.c, gpu_nodes.c, environment.c, command.c,
 * child.c). */
#ifndef OPFORGE_SANDBOX_H
#define OPFORGE_SANDBOX_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/types.h>

/* What --sandbox asks for. AUTO takes the best mechanism the host has (bubblewrap
 * today) and refuses to start evaluators when there is none; BWRAP insists on
 * bubblewrap; NONE runs the evaluator unsandboxed (with a warning). */
enum sandbox_mode { SANDBOX_AUTO, SANDBOX_BWRAP, SANDBOX_NONE };

#define SANDBOX_MAX_BINDS 16
#define SANDBOX_MAX_ENV 16
#define SANDBOX_ENV_NAME_MAX 128
#define SANDBOX_USER_MAX 64

/* Inside the sandbox: the private scratch (a tmpfs of scratch_mb), HOME within it, and
 * the evaluator's cubin cache within it. All are gone when the evaluator restarts. */
#define SANDBOX_SCRATCH "/tmp"
#define SANDBOX_HOME "/tmp/home"
#define SANDBOX_CACHE_DIR "/tmp/cubin-cache"

/* The operator's choices (options of serve, profile and propose). Plain data. */
struct sandbox_settings {
  enum sandbox_mode mode;
  char user[SANDBOX_USER_MAX];  /* --evaluator-user: a name, UID or UID:GID; "" means
                                 * nobody when the server runs as root, else its own
                                 * user; "same" keeps the server's user */
  unsigned scratch_mb;          /* size of the private /tmp and of the largest file (4096) */
  unsigned max_procs;           /* processes and threads of the evaluator's user (4096) */
  unsigned max_files;           /* open files per process (4096) */
  char binds[SANDBOX_MAX_BINDS][PATH_MAX]; /* --sandbox-bind: extra read-only paths */
  int n_binds;
  char env[SANDBOX_MAX_ENV][SANDBOX_ENV_NAME_MAX]; /* --sandbox-env: extra variable
                                 * names (NAME, or PREFIX* for every name starting so) */
  int n_env;
};

/* Sets every field to its default (mode AUTO). */
void sandbox_settings_defaults(struct sandbox_settings *s);

/* Parses "auto", "bwrap" or "none" into *ret_mode; -1 for anything else. */
int sandbox_parse_mode(const char *text, enum sandbox_mode *ret_mode);

/* "auto", "bwrap" or "none" (static storage). */
const char *sandbox_mode_name(enum sandbox_mode mode);

/* One option of the sandbox (--sandbox, --evaluator-user, ...) with its variable. A
 * repeatable option has clear: its first use on a command line replaces the entries the
 * variable gave. */
struct sandbox_option {
  const char *name;
  const char *env;
  const char *help;
  int (*set)(struct sandbox_settings *s, const char *value, char *err, size_t errlen);
  void (*clear)(struct sandbox_settings *s);
};

/* The options, ended by an entry whose name is NULL. */
extern const struct sandbox_option sandbox_options[];

/* The option called name (len bytes of it; "--sandbox"), or NULL. */
const struct sandbox_option *sandbox_option_find(const char *name, size_t len);

/* Prints the options with their variables, as `opforge serve --help` lists its own. */
void sandbox_options_usage(FILE *out);

/* Checks one --sandbox-env entry: a variable name (letters, digits, '_'), optionally
 * ending in '*', that no secret rule would drop anyway (OPFORGE_*, *KEY*, *TOKEN*, ...).
 * Returns 0, or -1 with the reason in why. */
int sandbox_check_env_name(const char *name, char *why, size_t whylen);

/* What the evaluator runs, and what it must never see even where a bound tree holds it
 * (the data directory, the token file, the LLM key file): those are masked, a file by
 * an empty one and a directory by an empty tmpfs. Strings are borrowed. */
struct sandbox_paths {
  const char *python;          /* the interpreter; NULL when the evaluator is a program */
  const char *evaluator;       /* gpu/evaluator/main.py, or a program speaking the protocol */
  const char *gpu_lib;         /* libopforge_gpu.so; NULL when none */
  const char *const *hidden;   /* NULL-terminated list, or NULL */
};

struct sandbox;

/* Resolves a sandbox once for every evaluator a process starts: finds bwrap on PATH,
 * the evaluator's user, the Python install's folders (asking the interpreter), the GPU
 * lock folder, and runs one trial sandbox. With mode NONE nothing is checked.
 * Returns 0 and *ret_sb (caller owns, sandbox_free), or -1 with a message in err that
 * names the missing package or kernel feature (and the way out, --sandbox none). */
int sandbox_prepare(const struct sandbox_settings *settings, const struct sandbox_paths *paths,
                    struct sandbox **ret_sb, char *err, size_t errlen);

/* True when evaluators run in bubblewrap (false for mode none). */
bool sandbox_enforced(const struct sandbox *sb);

/* {"mode": "bwrap"|"none", "user": name or null, "network": bool, "scratch_mb",
 * "max_procs", "max_files"} for /healthz and logs. Caller owns; NULL when out of memory. */
json_t *sandbox_describe(const struct sandbox *sb);

/* The shared folder of GPU lock files (one per physical GPU, named by its UUID) that
 * the evaluators flock to take turns on a GPU, bound read-only into each sandbox.
 * Borrowed; "" when there is none (mode none: the evaluator uses its default). */
const char *sandbox_lock_dir(const struct sandbox *sb);

/* Frees sb (NULL is fine). */
void sandbox_free(struct sandbox *sb);

/* ---- one evaluator start ---- */

#define SANDBOX_MAX_LIMITS 4

/* The command to exec for one evaluator and the limits its process sets on itself
 * between fork and exec (sandbox_spawn). Owned by the caller (sandbox_launch_free). */
struct sandbox_launch {
  char **argv;                  /* NULL-terminated: bwrap ... -- [setpriv ... --] <evaluator> */
  char **envp;                  /* NULL-terminated, the allowlisted environment */
  struct {
    int resource;
    rlim_t value;
  } limits[SANDBOX_MAX_LIMITS]; /* soft and hard alike */
  int n_limits;
};

#define SANDBOX_MAX_NODES 8

/* How one evaluator sees its device from inside: what the supervisor passes it and what
 * the sandbox binds. Filled by sandbox_view. */
struct sandbox_view {
  char device[16];             /* --device inside: "0" when only its own GPU is shown */
  char visible_devices[64];    /* CUDA_VISIBLE_DEVICES inside ("GPU-<uuid>"), or "" */
  char lock_file[PATH_MAX];    /* --lock-file: its GPU's lock in the shared folder, or "" */
  char cache_dir[PATH_MAX];    /* --cache-dir inside (SANDBOX_CACHE_DIR) */
  char workdir[PATH_MAX];      /* where the process starts: SANDBOX_SCRATCH, or a
                                * folder the caller set that the sandbox shows */
  char nodes[SANDBOX_MAX_NODES][64]; /* device nodes bound into the sandbox */
  int n_nodes;
};

/* Works out the view of an evaluator of device (the server's name: a GPU index, "cpu" or
 * "meta"), creating its GPU's lock file in the shared folder. Returns 0, or -1 with the
 * reason in err. */
int sandbox_view(const struct sandbox *sb, const char *device, struct sandbox_view *ret_view,
                 char *err, size_t errlen);

/* Builds the launch of an evaluator with view (from sandbox_view) whose own command line,
 * as it runs inside, is evaluator_argv (NULL-terminated, borrowed). env is the server's
 * environment (normally environ), filtered here. Returns 0 and *ret_launch (caller owns),
 * or -1 with the reason in err. */
int sandbox_launch_new(const struct sandbox *sb, const struct sandbox_view *view,
                       const char *const *evaluator_argv, char *const *env,
                       struct sandbox_launch **ret_launch, char *err, size_t errlen);

/* Frees a launch (NULL is fine). */
void sandbox_launch_free(struct sandbox_launch *launch);

/* Starts launch as a child in its own process group with stdin, stdout and stderr on
 * fds[0..2] and no other descriptor; the child sets its limits before it execs. Returns 0 and *ret_pid, or a positive errno (the exec's own failure included)
 * with the reason in err. */
int sandbox_spawn(const struct sandbox_launch *launch, const int fds[3], pid_t *ret_pid,
                  char *err, size_t errlen);

/* The exit status that bwrap gives a sandboxed process killed by a signal (128 + the
 * signal) read back as that signal, or 0 when status is an ordinary exit. */
int sandbox_signal_of_status(int status);

#endif
