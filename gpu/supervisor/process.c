/* The evaluator's process (see supervisor.h): spawning it in its own process group with
 * the protocol pipes, and killing, reaping and explaining the death of that group. */
#include "gpu/supervisor/internal.h"
#include "gpu/sandbox.h"
#include "base/log.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define REAP_WAIT_S 10.0   /* a SIGKILLed process stuck in the driver gets this long */
#define EOF_EXIT_WAIT_S 2.0 /* after EOF, how long the process may take to exit */

/* ---- starting it ---- */

/* Moves fd above 2 so that dup2 onto 0/1 in the child cannot clobber another pipe end. */
static int fd_above_2(int fd) {
  if (fd > 2)
    return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int saved = errno;
  close(fd);
  errno = saved;
  return moved;
}

/* What the evaluator is told on its command line: its device, cubin cache and GPU lock
 * file as it sees them (the sandbox's view, else the configured ones). */
struct evaluator_args {
  const char *device;
  const char *cache_dir;  /* NULL: not passed */
  const char *lock_file;  /* NULL: not passed (the evaluator names its own) */
  char mem[32];           /* --mem-fraction's text */
};

/* argv for the evaluator (pointers into sv and a; at most 15 entries and the NULL). */
static void build_argv(struct supervisor *sv, struct evaluator_args *a, const char **argv) {
  size_t n = 0;
  if (sv->python)
    argv[n++] = sv->python;
  argv[n++] = sv->evaluator_path;
  argv[n++] = "--device";
  argv[n++] = a->device;
  if (sv->gpu_lib_path) {
    argv[n++] = "--lib";
    argv[n++] = sv->gpu_lib_path;
  }
  if (a->cache_dir) {
    argv[n++] = "--cache-dir";
    argv[n++] = a->cache_dir;
  }
  if (sv->cfg.mem_fraction > 0) {
    snprintf(a->mem, sizeof a->mem, "%g", sv->cfg.mem_fraction);
    argv[n++] = "--mem-fraction";
    argv[n++] = a->mem;
  }
  if (a->lock_file && a->lock_file[0]) {
    argv[n++] = "--lock-file";
    argv[n++] = a->lock_file;
  }
  argv[n] = NULL;
}

/* Spawn attributes: own process group, empty signal mask, and default dispositions for
 * signals a server commonly ignores (ignored ones survive exec). */
static int spawn_attrs(posix_spawnattr_t *attr) {
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  const int sigs[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD,
                      SIGUSR1, SIGUSR2, SIGALRM, SIGXFSZ};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaddset(&defaults, sigs[i]);
  int rc = posix_spawnattr_init(attr);
  if (rc == 0)
    rc = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                            POSIX_SPAWN_SETSIGDEF);
  if (rc == 0)
    rc = posix_spawnattr_setpgroup(attr, 0);
  if (rc == 0)
    rc = posix_spawnattr_setsigmask(attr, &none);
  if (rc == 0)
    rc = posix_spawnattr_setsigdefault(attr, &defaults);
  return rc;
}

/* File actions: stdin/stdout onto the pipes, stderr to the log if any, nothing else
 * inherited (another slot's pipe end held open would hide that slot's EOF). */
static int spawn_files(struct supervisor *sv, posix_spawn_file_actions_t *fa, int in_fd,
                       int out_fd) {
  int rc = posix_spawn_file_actions_init(fa);
  if (rc == 0)
    rc = posix_spawn_file_actions_adddup2(fa, in_fd, 0);
  if (rc == 0)
    rc = posix_spawn_file_actions_adddup2(fa, out_fd, 1);
  if (rc == 0 && sv->stderr_path)
    rc = posix_spawn_file_actions_addopen(fa, 2, sv->stderr_path,
                                          O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (rc == 0)
    rc = posix_spawn_file_actions_addclosefrom_np(fa, 3);
  return rc;
}

/* Creates the two pipes (all four ends close-on-exec and above fd 2). */
static int make_pipes(int in_pipe[2], int out_pipe[2]) {
  in_pipe[0] = in_pipe[1] = out_pipe[0] = out_pipe[1] = -1;
  if (pipe2(in_pipe, O_CLOEXEC) < 0)
    return -errno;
  if (pipe2(out_pipe, O_CLOEXEC) < 0) {
    int e = errno;
    close(in_pipe[0]);
    close(in_pipe[1]);
    in_pipe[0] = in_pipe[1] = -1;
    return -e;
  }
  int *all[4] = {&in_pipe[0], &in_pipe[1], &out_pipe[0], &out_pipe[1]};
  int rc = 0;
  for (int i = 0; i < 4; i++) {
    *all[i] = fd_above_2(*all[i]);
    if (*all[i] < 0 && rc == 0)
      rc = -errno;
  }
  if (rc < 0)
    for (int i = 0; i < 4; i++)
      sv_close_fd(all[i]);
  return rc;
}

/* Starts the evaluator directly (no sandbox): posix_spawn with the server's environment
 * and stderr appended to the log. Returns 0 and *ret_pid, or a positive errno. */
static int spawn_direct(struct supervisor *sv, int in_fd, int out_fd, pid_t *ret_pid) {
  struct evaluator_args a = {.device = sv->device, .cache_dir = sv->cache_dir};
  const char *argv[16];
  build_argv(sv, &a, argv);
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t fa;
  int rc = spawn_attrs(&attr);
  if (rc == 0) {
    rc = spawn_files(sv, &fa, in_fd, out_fd);
    if (rc == 0)
      rc = posix_spawnp(ret_pid, argv[0], &fa, &attr, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
  }
  posix_spawnattr_destroy(&attr);
  return rc;
}

/* Starts the evaluator in its sandbox, its stderr pumped to the log (sv->pump). Returns 0
 * and *ret_pid, or a positive errno with the reason in err. */
static int spawn_sandboxed(struct supervisor *sv, int in_fd, int out_fd, pid_t *ret_pid,
                           char *err, size_t errlen) {
  struct sandbox_view view;
  if (sandbox_view(sv->cfg.sandbox, sv->device, &view, err, errlen) != 0)
    return EIO;
  struct evaluator_args a = {.device = view.device, .cache_dir = view.cache_dir,
                             .lock_file = view.lock_file};
  const char *argv[16];
  build_argv(sv, &a, argv);
  struct sandbox_launch *launch = NULL;
  if (sandbox_launch_new(sv->cfg.sandbox, &view, argv, environ, &launch, err, errlen) != 0)
    return ENOMEM;
  int err_pipe[2];
  int rc = pipe2(err_pipe, O_CLOEXEC) == 0 ? 0 : errno;
  if (rc == 0) {
    int fds[3] = {in_fd, out_fd, err_pipe[1]};
    rc = sandbox_spawn(launch, fds, ret_pid, err, errlen);
    close(err_pipe[1]);
    if (rc == 0)
      rc = -stderr_pump_start(err_pipe[0], sv->stderr_path, &sv->pump);
    else
      close(err_pipe[0]);
  } else {
    set_err(err, errlen, "cannot create a pipe: %s", strerror(rc));
  }
  sandbox_launch_free(launch);
  return rc;
}

/* Spawns the evaluator (python evaluator_path ARGS, or evaluator_path ARGS when no python
 * is configured), in the sandbox where one is enforced; on success sv->pid and both
 * stream fds are set (owned by sv, closed by sv_kill_and_reap), else returns a negative
 * errno with the reason in err. */
int sv_spawn(struct supervisor *sv, char *err, size_t errlen) {
  int in_pipe[2], out_pipe[2];
  int rc = make_pipes(in_pipe, out_pipe);
  if (rc < 0) {
    set_err(err, errlen, "cannot create pipes: %s", strerror(-rc));
    return rc;
  }
  pid_t pid = -1;
  char why[512] = "";
  bool sandboxed = sandbox_enforced(sv->cfg.sandbox);
  if (sandboxed)
    rc = spawn_sandboxed(sv, in_pipe[0], out_pipe[1], &pid, why, sizeof why);
  else
    rc = spawn_direct(sv, in_pipe[0], out_pipe[1], &pid);
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    if (why[0])
      set_err(err, errlen, "%s", why);
    else
      set_err(err, errlen, "cannot start %s: %s", sv->python ? sv->python : sv->evaluator_path,
              strerror(rc));
    return -rc;
  }
  fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  sv->to_child = in_pipe[1];
  sv->from_child = out_pipe[0];
  /* A helper process that inherited the pipes would hide the evaluator's death from
   * EOF; the pidfd reports it anyway. */
  /* The raw syscall: glibc's pidfd_open wrapper would require glibc 2.36 at run time. */
  sv->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);  /* close-on-exec by default */
  sv->len = sv->scanned = sv->line_end = 0;
  sv_set_pid(sv, pid);
  return 0;
}

/* ---- ending it ---- */

/* Waits up to grace_s for pid to exit, without reaping it (WNOWAIT): a zombie keeps its
 * pid, and with it the process group id, reserved while we signal the group. */
bool sv_wait_exit(pid_t pid, double grace_s, siginfo_t *ret_info) {
  double deadline = now_s() + grace_s;
  for (;;) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    int rc = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT);
    if (rc == 0 && info.si_pid == pid) {
      if (ret_info)
        *ret_info = info;
      return true;
    }
    if (rc < 0 && errno != EINTR)
      return false;
    if (now_s() >= deadline)
      return false;
    sleep_s(0.005);
  }
}

/* Reaps pid, waiting at most wait_s. True when reaped (or not our child any more). */
static bool reap_bounded(pid_t pid, double wait_s) {
  double deadline = now_s() + wait_s;
  for (;;) {
    int status;
    pid_t rc = waitpid(pid, &status, WNOHANG);
    if (rc == pid || (rc < 0 && errno == ECHILD))
      return true;
    if (rc < 0 && errno != EINTR)
      return true;
    if (now_s() >= deadline)
      return false;
    sleep_s(0.005);
  }
}

/* Retries reaping processes that outlived REAP_WAIT_S earlier. */
void sv_reap_pending(struct supervisor *sv, double wait_s) {
  size_t kept = 0;
  for (size_t i = 0; i < sv->n_pending; i++) {
    if (!reap_bounded(sv->pending[i], wait_s))
      sv->pending[kept++] = sv->pending[i];
  }
  sv->n_pending = kept;
}

/* Closes *fd unless it is -1, and sets it to -1. */
void sv_close_fd(int *fd) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

/* SIGKILLs the whole process group (task code may have spawned helpers), reaps the
 * leader, and drops the stream. The leader is not reaped before the kill, so the group
 * id cannot have been reused. */
void sv_kill_and_reap(struct supervisor *sv) {
  if (sv->pid > 0) {
    pid_t pid = sv->pid;
    sv_set_pid(sv, -1);  /* before the reap: supervisor_abort never signals a reused id */
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    if (!reap_bounded(pid, REAP_WAIT_S)) {
      sv_log(sv, "pid %ld did not die within %.0f s of SIGKILL; reaping later",
             (long)pid, REAP_WAIT_S);
      if (sv->n_pending < MAX_PENDING_REAPS)
        sv->pending[sv->n_pending++] = pid;
      else
        reap_bounded(pid, 1e9);
    }
  }
  sv_set_pid(sv, -1);
  stderr_pump_stop(sv->pump);
  sv->pump = NULL;
  sv_close_fd(&sv->to_child);
  sv_close_fd(&sv->from_child);
  sv_close_fd(&sv->pidfd);
  sv->len = sv->scanned = sv->line_end = 0;
  sv_reap_pending(sv, 0);
}

/* ---- why it ended ---- */

/* "crash/signal_N" or "crash/exit_N" from a waitid() result. bwrap passes on a signal
 * that killed the sandboxed evaluator as the exit status 128 + N, read back here. */
static void class_from_siginfo(const siginfo_t *info, bool sandboxed, char *out,
                               size_t outlen) {
  int sig = sandboxed && info->si_code == CLD_EXITED ? sandbox_signal_of_status(info->si_status)
                                                     : 0;
  if (info->si_code == CLD_EXITED && sig == 0)
    snprintf(out, outlen, "crash/exit_%d", info->si_status);
  else
    snprintf(out, outlen, "crash/signal_%d", sig ? sig : info->si_status);
}

/* Why a process that closed its stream died: its exit class, or that it still runs. */
void sv_explain_eof(struct supervisor *sv, char *cls, size_t clslen) {
  siginfo_t info;
  if (sv->pid > 0 && sv_wait_exit(sv->pid, EOF_EXIT_WAIT_S, &info))
    class_from_siginfo(&info, sandbox_enforced(sv->cfg.sandbox), cls, clslen);
  else
    snprintf(cls, clslen, "crash/garbage_output");
}
