/* Preparing the sandbox once per process (see gpu/sandbox.h): bwrap on PATH, the
 * evaluator's user, the read-only folders it needs, the paths to mask, the shared GPU
 * lock folder, and one trial run that proves the host can make the namespaces. */
#include "gpu/sandbox/internal.h"
#include "gpu/gpu_config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define TRIAL_DEADLINE_S 30
#define NOBODY_ID 65534

bool sandbox_path_under(const char *path, const char *dir) {
  size_t n = strlen(dir);
  if (n == 1 && dir[0] == '/')
    return path[0] == '/';
  return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* The absolute path of program on $PATH into out; false when there is none. */
static bool find_program(const char *program, char *out, size_t outlen) {
  const char *path = getenv("PATH");
  char *copy = strdup(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
  bool found = false;
  for (char *save = NULL, *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !found;
       dir = strtok_r(NULL, ":", &save)) {
    int w = snprintf(out, outlen, "%s/%s", dir, program);
    found = dir[0] == '/' && w > 0 && (size_t)w < outlen && access(out, X_OK) == 0;
  }
  free(copy);
  return found;
}

/* Parses "UID" or "UID:GID" (decimal); false for anything else. */
static bool parse_ids(const char *text, uid_t *uid, gid_t *gid) {
  char *end;
  errno = 0;
  unsigned long u = strtoul(text, &end, 10);
  if (errno || end == text || (*end && *end != ':') || text[0] == '-' || u > 0x7fffffffUL)
    return false;
  *uid = (uid_t)u;
  *gid = (gid_t)u;
  if (*end == ':') {
    const char *g = end + 1;
    unsigned long gv = strtoul(g, &end, 10);
    if (errno || end == g || *end || g[0] == '-' || gv > 0x7fffffffUL)
      return false;
    *gid = (gid_t)gv;
  }
  return true;
}

/* Sets sb's user from settings.user: see struct sandbox_settings. Returns 0, or -1 with
 * the reason in err. */
static int resolve_user(struct sandbox *sb, char *err, size_t errlen) {
  const char *want = sb->settings.user;
  uid_t self = geteuid();
  struct passwd *pw = getpwuid(self);
  snprintf(sb->user_name, sizeof sb->user_name, "%s", pw ? pw->pw_name : "opforge");
  if (strcmp(want, "same") == 0 || (want[0] == '\0' && self != 0))
    return 0;
  if (want[0] == '\0')
    want = "nobody";
  uid_t uid;
  gid_t gid;
  if (!parse_ids(want, &uid, &gid)) {
    pw = getpwnam(want);
    if (!pw && strcmp(want, "nobody") != 0) {
      snprintf(err, errlen, "--evaluator-user: no user named '%s'", want);
      return -1;
    }
    uid = pw ? pw->pw_uid : NOBODY_ID;
    gid = pw ? pw->pw_gid : NOBODY_ID;
  }
  if (uid == self)
    return 0;
  if (self != 0) {
    snprintf(err, errlen, "--evaluator-user %s: switching users needs the server to run as "
             "root; run the server as that user, or leave --evaluator-user unset", want);
    return -1;
  }
  sb->set_ids = uid != 0;
  sb->uid = uid;
  sb->gid = gid;
  /* setpriv must be where the sandbox shows /usr. */
  if (sb->set_ids && access("/usr/bin/setpriv", X_OK) == 0) {
    snprintf(sb->setpriv, sizeof sb->setpriv, "/usr/bin/setpriv");
  } else if (sb->set_ids) {
    snprintf(err, errlen, "--evaluator-user %s: switching users needs setpriv "
             "(/usr/bin/setpriv, from util-linux); or pass --evaluator-user same", want);
    return -1;
  }
  pw = getpwuid(uid);
  snprintf(sb->user_name, sizeof sb->user_name, "%s", pw ? pw->pw_name : want);
  return 0;
}

/* Adds path and, when it differs, its real path (so that links into it resolve). */
static void add_with_realpath(struct strv *v, const char *path) {
  strv_add(v, path);
  char *real = realpath(path, NULL);
  if (real && strcmp(real, path) != 0)
    strv_add(v, real);
  free(real);
}

/* Adds the folder holding path (the evaluator package's folder, say). */
static void add_parent(struct strv *v, const char *path) {
  char *real = realpath(path, NULL);
  char *slash = real ? strrchr(real, '/') : NULL;
  if (slash && slash != real) {
    *slash = '\0';
    strv_add(v, real);
  }
  free(real);
}

/* Adds each existing folder of a colon-separated list (LD_LIBRARY_PATH). */
static void add_path_list(struct strv *v, const char *list) {
  char *copy = list ? strdup(list) : NULL;
  struct stat st;
  for (char *save = NULL, *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir;
       dir = strtok_r(NULL, ":", &save))
    if (dir[0] == '/' && strcmp(dir, "/") != 0 && stat(dir, &st) == 0)
      add_with_realpath(v, dir);
  free(copy);
}

/* Drops the entries of v that repeat another or lie under another (a bind shows its
 * whole tree), keeping the order of the rest. */
static void drop_nested(struct strv *v) {
  bool *drop = calloc(v->n ? v->n : 1, sizeof *drop);
  if (!drop) {
    v->failed = true;
    return;
  }
  for (size_t i = 0; i < v->n; i++)
    for (size_t j = 0; j < v->n && !drop[i]; j++)
      drop[i] = j != i && sandbox_path_under(v->items[i], v->items[j]) &&
                (strcmp(v->items[i], v->items[j]) != 0 || j < i);
  size_t kept = 0;
  for (size_t i = 0; i < v->n; i++) {
    if (drop[i])
      free(v->items[i]);
    else
      v->items[kept++] = v->items[i];
  }
  free(drop);
  v->n = kept;
  if (v->items)
    v->items[kept] = NULL;
}

/* Every read-only folder or file the evaluator needs besides the system's: the Python
 * install, the evaluator, libopforge_gpu.so, CUDA and the operator's --sandbox-bind.
 * Returns 0, or -1 with the reason in err. */
static int collect_ro_paths(struct sandbox *sb, const struct sandbox_paths *p, char *err,
                            size_t errlen) {
  char **env = sandbox_environment(&sb->settings, environ, sb->user_name, NULL);
  if (!env) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int rc = 0;
  if (p->python && p->python[0])
    rc = sandbox_python_paths(p->python, env, &sb->ro_paths, err, errlen);
  for (char **e = env; *e; e++)
    if (strncmp(*e, "LD_LIBRARY_PATH=", 16) == 0)
      add_path_list(&sb->ro_paths, *e + 16);
  strv_free_array(env);
  if (p->python && p->python[0] && p->evaluator)
    add_parent(&sb->ro_paths, p->evaluator);  /* the package imports as a folder */
  else if (p->evaluator)
    add_with_realpath(&sb->ro_paths, p->evaluator);
  if (p->gpu_lib)
    add_with_realpath(&sb->ro_paths, p->gpu_lib);
  struct stat st;
  if (stat(OFG_CUDA_ROOT, &st) == 0)
    add_with_realpath(&sb->ro_paths, OFG_CUDA_ROOT);
  for (int i = 0; rc == 0 && i < sb->settings.n_binds; i++) {
    const char *b = sb->settings.binds[i];
    if (b[0] != '/' || stat(b, &st) != 0) {
      snprintf(err, errlen, "--sandbox-bind: '%s' is not an existing absolute path", b);
      rc = -1;
    } else {
      add_with_realpath(&sb->ro_paths, b);
    }
  }
  drop_nested(&sb->ro_paths);
  if (rc == 0 && sb->ro_paths.failed) {
    snprintf(err, errlen, "out of memory");
    rc = -1;
  }
  return rc;
}

/* The paths to mask, as given and as real paths. */
static void collect_hidden(struct sandbox *sb, const char *const *hidden) {
  for (size_t i = 0; hidden && hidden[i]; i++) {
    if (!hidden[i][0])
      continue;
    char *abs = hidden[i][0] == '/' ? strdup(hidden[i]) : NULL;
    if (!abs) {
      char cwd[PATH_MAX];
      if (getcwd(cwd, sizeof cwd))
        strv_addf(&sb->hidden, "%s/%s", cwd, hidden[i]);
    } else {
      strv_add(&sb->hidden, abs);
    }
    free(abs);
    char *real = realpath(hidden[i], NULL);
    if (real)
      strv_add(&sb->hidden, real);
    free(real);
  }
}

/* Creates (or checks) the shared folder of GPU lock files: a real folder, not a link,
 * writable by every user that runs evaluators (sticky, like /tmp). */
static int prepare_lock_dir(struct sandbox *sb, char *err, size_t errlen) {
  const char *tmp = getenv("TMPDIR");
  snprintf(sb->lock_dir, sizeof sb->lock_dir, "%s/opforge-gpu-locks",
           tmp && tmp[0] == '/' ? tmp : "/tmp");
  if (mkdir(sb->lock_dir, 01777) == 0)
    chmod(sb->lock_dir, 01777);  /* mkdir's mode went through the umask */
  struct stat st;
  if (lstat(sb->lock_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "cannot create the GPU lock folder %s: %s", sb->lock_dir,
             errno ? strerror(errno) : "not a folder");
    return -1;
  }
  return 0;
}

/* Runs `true` in the sandbox as evaluators will run; its stderr explains a failure.
 * Returns 0, or -1 with a message naming the kernel feature in err. */
static int trial_run(const struct sandbox *sb, char *err, size_t errlen) {
  struct sandbox_view view;
  struct sandbox_launch *launch = NULL;
  const char *argv[] = {"true", NULL};
  if (sandbox_view(sb, "cpu", &view, err, errlen) != 0 ||
      sandbox_launch_new(sb, &view, argv, environ, &launch, err, errlen) != 0)
    return -1;
  int out[2] = {-1, -1};
  int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
  int rc = pipe2(out, O_CLOEXEC) == 0 && devnull >= 0 ? 0 : -1;
  pid_t pid = -1;
  if (rc == 0) {
    int fds[3] = {devnull, devnull, out[1]};
    rc = sandbox_spawn(launch, fds, &pid, err, errlen) == 0 ? 0 : -1;
  }
  sandbox_launch_free(launch);
  if (out[1] >= 0)
    close(out[1]);
  if (devnull >= 0)
    close(devnull);
  char msg[1024] = "";
  size_t len = 0;
  struct timespec start;
  clock_gettime(CLOCK_MONOTONIC, &start);
  while (rc == 0 && len + 1 < sizeof msg) {
    struct pollfd p = {.fd = out[0], .events = POLLIN};
    if (poll(&p, 1, TRIAL_DEADLINE_S * 1000) <= 0)
      break;
    ssize_t n = read(out[0], msg + len, sizeof msg - 1 - len);
    if (n <= 0)
      break;
    len += (size_t)n;
  }
  msg[len] = '\0';
  if (out[0] >= 0)
    close(out[0]);
  int status = 0;
  if (pid > 0) {
    kill(pid, SIGKILL);  /* a no-op once it has exited */
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (rc == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0)) {
    char *nl;
    while ((nl = strchr(msg, '\n')) != NULL)
      *nl = ' ';
    snprintf(err, errlen, "bubblewrap cannot make the evaluator's sandbox on this host (%s); "
             "it needs user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
             "user.max_user_namespaces > 0, and on Ubuntu an AppArmor profile that lets "
             "bwrap use them); or run with --sandbox none to run task code unsandboxed",
             msg[0] ? msg : "it exited with no message");
    rc = -1;
  }
  return rc;
}

int sandbox_prepare(const struct sandbox_settings *settings, const struct sandbox_paths *paths,
                    struct sandbox **ret_sb, char *err, size_t errlen) {
  struct sandbox *sb = calloc(1, sizeof *sb);
  if (!sb) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  sb->settings = *settings;
  if (settings->mode == SANDBOX_NONE) {
    *ret_sb = sb;
    return 0;
  }
  int rc = 0;
  if (!find_program("bwrap", sb->bwrap, sizeof sb->bwrap)) {
    snprintf(err, errlen, "the evaluator's sandbox needs bubblewrap, and no bwrap is on PATH: "
             "install the bubblewrap package (apt-get install bubblewrap), or run with "
             "--sandbox none to run task code unsandboxed");
    rc = -1;
  }
  if (rc == 0)
    rc = resolve_user(sb, err, errlen);
  if (rc == 0)
    rc = collect_ro_paths(sb, paths, err, errlen);
  if (rc == 0) {
    collect_hidden(sb, paths->hidden);
    rc = prepare_lock_dir(sb, err, errlen);
  }
  if (rc == 0)
    rc = trial_run(sb, err, errlen);
  if (rc != 0) {
    sandbox_free(sb);
    return -1;
  }
  *ret_sb = sb;
  return 0;
}

bool sandbox_enforced(const struct sandbox *sb) {
  return sb && sb->settings.mode != SANDBOX_NONE;
}

const char *sandbox_lock_dir(const struct sandbox *sb) {
  return sandbox_enforced(sb) ? sb->lock_dir : "";
}

json_t *sandbox_describe(const struct sandbox *sb) {
  if (!sandbox_enforced(sb))
    return json_pack("{s:s,s:n,s:b}", "mode", "none", "user", "network", 1);
  return json_pack("{s:s,s:s,s:b,s:I,s:I,s:I}", "mode", "bwrap", "user", sb->user_name,
                   "network", 0, "scratch_mb", (json_int_t)sb->settings.scratch_mb,
                   "max_procs", (json_int_t)sb->settings.max_procs, "max_files",
                   (json_int_t)sb->settings.max_files);
}

void sandbox_free(struct sandbox *sb) {
  if (!sb)
    return;
  strv_clear(&sb->ro_paths);
  strv_clear(&sb->hidden);
  free(sb);
}
