/* Private to gpu/sandbox/: the prepared sandbox and the helpers its files share. Only the
 * files of that folder include it; everyone else uses the public gpu/sandbox.h. */
#ifndef OPFORGE_SANDBOX_INTERNAL_H
#define OPFORGE_SANDBOX_INTERNAL_H

#include "gpu/sandbox.h"

#include <stdbool.h>
#include <stddef.h>

/* A growable NULL-terminated list of owned strings (argv, envp, path lists). */
struct strv {
  char **items;
  size_t n, cap;
  bool failed;  /* an allocation failed; the list is incomplete */
};

void strv_add(struct strv *v, const char *s);
void strv_addf(struct strv *v, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands over the NULL-terminated array (caller frees with strv_free_array); NULL when an
 * allocation failed (everything is then freed). */
char **strv_take(struct strv *v);
void strv_clear(struct strv *v);
void strv_free_array(char **items);

/* The prepared sandbox: everything resolved once at start-up. */
struct sandbox {
  struct sandbox_settings settings;
  char bwrap[PATH_MAX];          /* absolute path of bwrap; "" in mode none */
  bool set_ids;                  /* bwrap runs as root and setpriv switches to uid/gid
                                    inside, once the mounts are made (the user may not
                                    be able to reach the bound paths' parents) */
  uid_t uid;
  gid_t gid;
  char setpriv[PATH_MAX];        /* setpriv (util-linux), when set_ids */
  char user_name[SANDBOX_USER_MAX]; /* for USER/LOGNAME and /healthz */
  struct strv ro_paths;          /* read-only binds besides the system's (realpaths) */
  struct strv hidden;            /* realpaths to mask where a bound tree holds them */
  char lock_dir[PATH_MAX];       /* shared GPU lock files */
};

/* ---- python_paths.c ---- */

/* Adds to out every folder the interpreter reads its modules from (prefixes and
 * sys.path, as it reports them when run with the sandbox's environment outside the
 * sandbox). Returns 0, or -1 with the reason in err. */
int sandbox_python_paths(const char *python, char *const *envp, struct strv *out, char *err,
                         size_t errlen);

/* ---- gpu_nodes.c ---- */

/* The device nodes the evaluator of GPU index needs (nvidiactl, nvidia-uvm, its own
 * /dev/nvidiaN) into nodes, and the GPU's UUID ("GPU-...") into uuid (or "" when the
 * driver cannot say, in which case every /dev/nvidiaN is listed). Nothing is listed for
 * a device that is not a GPU index or a host with no nodes. */
void sandbox_gpu_nodes(const char *device, struct strv *nodes, char *uuid, size_t uuidlen);

/* ---- environment.c ---- */

/* The allowlisted environment of env (normally environ) for an evaluator running as
 * user, plus the sandbox's own HOME, TMPDIR and the given CUDA_VISIBLE_DEVICES (NULL:
 * passed through). NULL when out of memory. */
char **sandbox_environment(const struct sandbox_settings *s, char *const *env,
                           const char *user, const char *visible_devices);

/* True when name (of NAME=VALUE up to '=') is allowed through: the allowlist or the
 * operator's --sandbox-env entries, and no secret rule. */
bool sandbox_env_allowed(const struct sandbox_settings *s, const char *name, size_t len);

/* True when a variable named so is a secret whatever the lists say: OPFORGE_*, or a
 * name holding KEY, TOKEN, SECRET, PASSW, CREDENTIAL or AUTH (any case). */
bool sandbox_env_is_secret(const char *name, size_t len);

/* ---- path helpers (prepare.c) ---- */

/* True when path equals dir or lies below it (both absolute, normalized). */
bool sandbox_path_under(const char *path, const char *dir);

#endif
