/* The bwrap command of one evaluator (see gpu/sandbox.h): an empty root to which the
 * system's libraries, the prepared read-only paths, the GPU's device nodes and a private
 * /tmp are added, with the secret paths masked and every namespace unshared. */
#include "gpu/sandbox/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Top-level system folders: bound read-only when they are folders, recreated as the same
 * links when they are links (merged /usr). */
static const char *const SYSTEM_DIRS[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32",
                                          "/lib64", "/libx32"};

/* The few files of /etc that the loader, the C library and Python read; nothing else of
 * /etc (it may hold the operator's secrets). */
static const char *const ETC_FILES[] = {
    "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives",
    "/etc/localtime", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group",
};

/* Sets the GPU's lock file in the shared folder from its UUID ("GPU-xxxxxxxx-..."), named
 * as the evaluator names it (gpu/evaluator/device_lock.py, path_for), and creates it
 * readable and writable by all so that evaluators of any user can flock it. */
static int make_lock_file(const struct sandbox *sb, const char *uuid,
                          struct sandbox_view *view, char *err, size_t errlen) {
  int w = snprintf(view->lock_file, sizeof view->lock_file, "%s/opforge-gpu-%s.lock",
                   sb->lock_dir, uuid);
  if (w < 0 || (size_t)w >= sizeof view->lock_file) {
    snprintf(err, errlen, "the GPU lock folder's path is too long");
    return -1;
  }
  int fd = open(view->lock_file, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) {
    snprintf(err, errlen, "cannot create the GPU lock file %s: %s", view->lock_file,
             strerror(errno));
    return -1;
  }
  fchmod(fd, 0666);  /* past the umask; fails harmlessly on another user's file */
  close(fd);
  return 0;
}

int sandbox_view(const struct sandbox *sb, const char *device, struct sandbox_view *ret_view,
                 char *err, size_t errlen) {
  struct sandbox_view v;
  memset(&v, 0, sizeof v);
  snprintf(v.device, sizeof v.device, "%s", device);
  snprintf(v.cache_dir, sizeof v.cache_dir, "%s", SANDBOX_CACHE_DIR);
  snprintf(v.workdir, sizeof v.workdir, "%s", SANDBOX_SCRATCH);
  struct strv nodes = {0};
  char uuid[64];
  sandbox_gpu_nodes(device, &nodes, uuid, sizeof uuid);
  for (size_t i = 0; i < nodes.n && v.n_nodes < SANDBOX_MAX_NODES; i++)
    snprintf(v.nodes[v.n_nodes++], sizeof v.nodes[0], "%s", nodes.items[i]);
  strv_clear(&nodes);
  if (uuid[0]) {
    /* Only its own GPU is shown: it is device 0 inside, named by UUID for CUDA. */
    snprintf(v.device, sizeof v.device, "0");
    snprintf(v.visible_devices, sizeof v.visible_devices, "%s", uuid);
    if (make_lock_file(sb, uuid, &v, err, errlen) != 0)
      return -1;
  }
  *ret_view = v;
  return 0;
}

/* Adds the system folders and the /etc files. */
static void add_system(struct strv *a) {
  for (size_t i = 0; i < sizeof SYSTEM_DIRS / sizeof SYSTEM_DIRS[0]; i++) {
    const char *d = SYSTEM_DIRS[i];
    char target[PATH_MAX];
    ssize_t n = readlink(d, target, sizeof target - 1);
    struct stat st;
    if (n > 0) {
      target[n] = '\0';
      strv_add(a, "--symlink");
      strv_add(a, target);
      strv_add(a, d);
    } else if (stat(d, &st) == 0 && S_ISDIR(st.st_mode)) {
      strv_add(a, "--ro-bind");
      strv_add(a, d);
      strv_add(a, d);
    }
  }
  strv_add(a, "--perms");  /* bwrap would make it 0700, closed to a user that is not root */
  strv_add(a, "0755");
  strv_add(a, "--dir");
  strv_add(a, "/etc");
  for (size_t i = 0; i < sizeof ETC_FILES / sizeof ETC_FILES[0]; i++) {
    strv_add(a, "--ro-bind-try");
    strv_add(a, ETC_FILES[i]);
    strv_add(a, ETC_FILES[i]);
  }
}

/* True when path lies in a system folder or a /etc file the sandbox binds. */
static bool under_system(const char *path) {
  for (size_t i = 0; i < sizeof SYSTEM_DIRS / sizeof SYSTEM_DIRS[0]; i++)
    if (sandbox_path_under(path, SYSTEM_DIRS[i]))
      return true;
  for (size_t i = 0; i < sizeof ETC_FILES / sizeof ETC_FILES[0]; i++)
    if (sandbox_path_under(path, ETC_FILES[i]))
      return true;
  return false;
}

/* True when path lies under one of the hidden paths. */
static bool under_hidden(const struct sandbox *sb, const char *path) {
  for (size_t i = 0; i < sb->hidden.n; i++)
    if (sandbox_path_under(path, sb->hidden.items[i]))
      return true;
  return false;
}

/* True when list holds s. */
static bool holds(const struct strv *list, const char *s) {
  for (size_t i = 0; i < list->n; i++)
    if (strcmp(list->items[i], s) == 0)
      return true;
  return false;
}

/* Creates each folder above path that the sandbox's root does not have yet, traversable
 * by every user (bwrap would make them 0700, closed to an evaluator that is not root).
 * made lists those already made. */
static void add_parents(struct strv *a, const char *path, struct strv *made) {
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s", path);
  for (char *slash = strchr(dir + 1, '/'); slash; slash = strchr(slash + 1, '/')) {
    *slash = '\0';
    if (strcmp(dir, SANDBOX_SCRATCH) != 0 && !under_system(dir) && !holds(made, dir)) {
      strv_add(a, "--perms");
      strv_add(a, "0755");
      strv_add(a, "--dir");
      strv_add(a, dir);
      strv_add(made, dir);
    }
    *slash = '/';
  }
}

/* Binds path read-only at the same place, with its parents made first. */
static void add_ro_bind(struct strv *a, const char *path, struct strv *made) {
  add_parents(a, path, made);
  strv_add(a, "--ro-bind");
  strv_add(a, path);
  strv_add(a, path);
}

/* Adds the prepared read-only paths that are (inside_hidden) or are not under a hidden
 * path, skipping those already visible through the system folders. */
static void add_ro_paths(const struct sandbox *sb, struct strv *a, bool inside_hidden,
                         struct strv *made) {
  for (size_t i = 0; i < sb->ro_paths.n; i++) {
    const char *p = sb->ro_paths.items[i];
    if (!under_system(p) && under_hidden(sb, p) == inside_hidden)
      add_ro_bind(a, p, made);
  }
}

/* True when path lies where the sandbox shows something of the host. */
static bool visible_inside(const struct sandbox *sb, const char *path) {
  if (under_system(path))
    return true;
  for (size_t i = 0; i < sb->ro_paths.n; i++)
    if (sandbox_path_under(path, sb->ro_paths.items[i]))
      return true;
  return false;
}

/* Masks each hidden path the bound trees would show: a folder by an empty tmpfs, a file
 * by /dev/null. */
static void add_masks(const struct sandbox *sb, struct strv *a) {
  for (size_t i = 0; i < sb->hidden.n; i++) {
    const char *h = sb->hidden.items[i];
    struct stat st;
    if (!visible_inside(sb, h) || stat(h, &st) != 0)
      continue;
    if (S_ISDIR(st.st_mode)) {
      strv_add(a, "--tmpfs");
      strv_add(a, h);
    } else {
      strv_add(a, "--ro-bind");
      strv_add(a, "/dev/null");
      strv_add(a, h);
    }
  }
}

/* The bwrap arguments before "--": namespaces, the view, and the scratch. */
static void add_bwrap_options(const struct sandbox *sb, const struct sandbox_view *view,
                              struct strv *a) {
  strv_add(a, sb->bwrap);
  /* Every namespace but the user one, which bwrap adds itself when it runs unprivileged;
   * run as root it needs none, and setpriv must reach the host's uids. */
  static const char *const unshare[] = {"--unshare-ipc", "--unshare-pid", "--unshare-net",
                                        "--unshare-uts", "--unshare-cgroup-try"};
  for (size_t i = 0; i < sizeof unshare / sizeof unshare[0]; i++)
    strv_add(a, unshare[i]);
  if (sb->set_ids) {  /* only setpriv's switch needs them; gone with the switch */
    strv_add(a, "--cap-add");
    strv_add(a, "CAP_SETUID");
    strv_add(a, "--cap-add");
    strv_add(a, "CAP_SETGID");
  }
  strv_add(a, "--die-with-parent");
  strv_add(a, "--new-session");      /* no controlling terminal to push input into */
  strv_add(a, "--hostname");
  strv_add(a, "opforge-sandbox");
  add_system(a);
  strv_add(a, "--proc");
  strv_add(a, "/proc");                /* its own PID namespace's processes only */
  strv_add(a, "--dev");
  strv_add(a, "/dev");
  for (int i = 0; i < view->n_nodes; i++) {
    strv_add(a, "--dev-bind");
    strv_add(a, view->nodes[i]);
    strv_add(a, view->nodes[i]);
  }
  if (view->n_nodes > 0) {
    strv_add(a, "--ro-bind-try");   /* PCI and NUMA facts the driver reads */
    strv_add(a, "/sys");
    strv_add(a, "/sys");
  }
  /* The scratch belongs to the evaluator's user alone: nothing else runs in it. */
  strv_add(a, "--perms");
  strv_add(a, "1777");
  strv_add(a, "--size");
  strv_addf(a, "%llu", (unsigned long long)sb->settings.scratch_mb << 20);
  strv_add(a, "--tmpfs");
  strv_add(a, SANDBOX_SCRATCH);
  static const char *const own_dirs[] = {SANDBOX_HOME, SANDBOX_CACHE_DIR};
  for (size_t i = 0; i < sizeof own_dirs / sizeof own_dirs[0]; i++) {
    strv_add(a, "--perms");
    strv_add(a, "0777");
    strv_add(a, "--dir");
    strv_add(a, own_dirs[i]);
  }
  struct strv made = {0};
  if (view->lock_file[0])
    add_ro_bind(a, view->lock_file, &made);
  add_ro_paths(sb, a, false, &made);
  add_masks(sb, a);
  add_ro_paths(sb, a, true, &made);  /* over a mask: only what the evaluator needs of it */
  strv_clear(&made);
  strv_add(a, "--chdir");
  strv_add(a, view->workdir[0] ? view->workdir : SANDBOX_SCRATCH);
  strv_add(a, "--");
}

/* setpriv's command that switches to the evaluator's user (with the groups that open the
 * device nodes it does not own) and forbids regaining privileges. */
static void add_user_switch(const struct sandbox *sb, const struct sandbox_view *view,
                            struct strv *a) {
  gid_t groups[SANDBOX_MAX_NODES];
  int n = 0;
  for (int i = 0; i < view->n_nodes; i++) {
    struct stat st;
    if (stat(view->nodes[i], &st) != 0 || (st.st_mode & 0006) == 0006)
      continue;
    bool seen = st.st_gid == sb->gid;
    for (int g = 0; g < n; g++)
      seen = seen || groups[g] == st.st_gid;
    if (!seen)
      groups[n++] = st.st_gid;
  }
  strv_add(a, sb->setpriv);
  strv_addf(a, "--reuid=%lu", (unsigned long)sb->uid);
  strv_addf(a, "--regid=%lu", (unsigned long)sb->gid);
  if (n == 0) {
    strv_add(a, "--clear-groups");
  } else {
    char list[SANDBOX_MAX_NODES * 12] = "";
    size_t len = 0;
    for (int g = 0; g < n && len < sizeof list; g++)
      len += (size_t)snprintf(list + len, sizeof list - len, "%s%lu", g ? "," : "",
                              (unsigned long)groups[g]);
    strv_addf(a, "--groups=%s", list);
  }
  strv_add(a, "--no-new-privs");
  strv_add(a, "--");
}

/* Sets the limits every sandboxed evaluator runs under. */
static void set_limits(const struct sandbox *sb, struct sandbox_launch *l) {
  const struct sandbox_settings *s = &sb->settings;
  l->limits[0].resource = RLIMIT_NPROC;
  l->limits[0].value = s->max_procs;
  l->limits[1].resource = RLIMIT_NOFILE;
  l->limits[1].value = s->max_files;
  l->limits[2].resource = RLIMIT_FSIZE;
  l->limits[2].value = (rlim_t)s->scratch_mb << 20;
  l->limits[3].resource = RLIMIT_CORE;
  l->limits[3].value = 0;
  l->n_limits = 4;
}

int sandbox_launch_new(const struct sandbox *sb, const struct sandbox_view *view,
                       const char *const *evaluator_argv, char *const *env,
                       struct sandbox_launch **ret_launch, char *err, size_t errlen) {
  struct sandbox_launch *l = calloc(1, sizeof *l);
  if (!l) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  struct strv a = {0};
  add_bwrap_options(sb, view, &a);
  if (sb->set_ids)
    add_user_switch(sb, view, &a);
  for (size_t i = 0; evaluator_argv[i]; i++)
    strv_add(&a, evaluator_argv[i]);
  l->argv = strv_take(&a);
  l->envp = sandbox_environment(&sb->settings, env, sb->user_name,
                                view->visible_devices[0] ? view->visible_devices : NULL);
  set_limits(sb, l);
  if (!l->argv || !l->envp) {
    sandbox_launch_free(l);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  *ret_launch = l;
  return 0;
}

void sandbox_launch_free(struct sandbox_launch *launch) {
  if (!launch)
    return;
  strv_free_array(launch->argv);
  strv_free_array(launch->envp);
  free(launch);
}
