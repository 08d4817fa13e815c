/* Starting a sandboxed process (see gpu/sandbox.h): fork, then in the child only
 * async-signal-safe calls (the parent has other threads): its descriptors, its own
 * process group, default signals, its limits, and exec. A failure
 * before the exec comes back to the parent through a close-on-exec pipe. */
#include "gpu/sandbox/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Signals a server ignores or blocks, put back to their defaults for the child. */
static const int RESET_SIGNALS[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD,
                                    SIGUSR1, SIGUSR2, SIGALRM, SIGXFSZ};

/* Which step of the child's set-up failed, for the parent's message. */
enum child_step { STEP_FDS, STEP_PGID, STEP_LIMITS, STEP_EXEC };

static const char *const STEP_NAMES[] = {"its descriptors", "its process group",
                                         "its limits", "exec"};

/* Closes every descriptor from lowest up (close_range, else one by one). */
static void close_from(int lowest) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, (unsigned)lowest, ~0U, 0) == 0)
    return;
#endif
  long max = sysconf(_SC_OPEN_MAX);
  for (long fd = lowest; fd < (max > 0 && max < 65536 ? max : 65536); fd++)
    close((int)fd);
}

/* Puts fds[0..2] on 0..2 (fds may themselves be any of 0..2) and closes the rest. */
static int child_fds(const int fds[3], int report_fd) {
  int moved[3];
  for (int i = 0; i < 3; i++) {  /* above 2 first, so no dup2 clobbers another */
    moved[i] = fcntl(fds[i], F_DUPFD, 3);
    if (moved[i] < 0)
      return -1;
  }
  for (int i = 0; i < 3; i++)
    if (dup2(moved[i], i) < 0)
      return -1;
  int keep = fcntl(report_fd, F_DUPFD_CLOEXEC, 3);
  if (keep < 0 || dup2(keep, 3) < 0 || fcntl(3, F_SETFD, FD_CLOEXEC) < 0)
    return -1;
  close_from(4);
  return 0;
}

/* Default signal dispositions and an empty mask. */
static void child_signals(void) {
  struct sigaction dfl;
  memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (size_t i = 0; i < sizeof RESET_SIGNALS / sizeof RESET_SIGNALS[0]; i++)
    sigaction(RESET_SIGNALS[i], &dfl, NULL);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
}

/* Reports (step, errno) on fd 3 and ends the child. */
static void child_fail(enum child_step step) {
  int report[2] = {(int)step, errno};
  ssize_t ignored = write(3, report, sizeof report);
  (void)ignored;
  _exit(127);
}

/* The child's side: never returns. */
static void run_child(const struct sandbox_launch *l, const int fds[3], int report_fd) {
  if (child_fds(fds, report_fd) != 0) {
    int report[2] = {STEP_FDS, errno};
    ssize_t ignored = write(report_fd, report, sizeof report);
    (void)ignored;
    _exit(127);
  }
  if (setpgid(0, 0) != 0)
    child_fail(STEP_PGID);
  child_signals();
  for (int i = 0; i < l->n_limits; i++) {
    struct rlimit r = {.rlim_cur = l->limits[i].value, .rlim_max = l->limits[i].value};
    if (setrlimit(l->limits[i].resource, &r) != 0)
      child_fail(STEP_LIMITS);
  }
  execve(l->argv[0], l->argv, l->envp);
  child_fail(STEP_EXEC);
}

int sandbox_spawn(const struct sandbox_launch *launch, const int fds[3], pid_t *ret_pid,
                  char *err, size_t errlen) {
  int report[2];
  if (pipe2(report, O_CLOEXEC) < 0) {
    int e = errno;
    snprintf(err, errlen, "cannot create a pipe: %s", strerror(e));
    return e;
  }
  pid_t pid = fork();
  if (pid == 0)
    run_child(launch, fds, report[1]);
  int fork_errno = errno;
  close(report[1]);
  if (pid < 0) {
    close(report[0]);
    snprintf(err, errlen, "cannot fork: %s", strerror(fork_errno));
    return fork_errno;
  }
  int failure[2];
  ssize_t n;
  while ((n = read(report[0], failure, sizeof failure)) < 0 && errno == EINTR) {
  }
  close(report[0]);
  if (n != (ssize_t)sizeof failure) {  /* EOF: the exec succeeded */
    *ret_pid = pid;
    return 0;
  }
  while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
  }
  int step = failure[0] >= 0 && failure[0] <= STEP_EXEC ? failure[0] : STEP_EXEC;
  if (step == STEP_EXEC)
    snprintf(err, errlen, "cannot start %s: %s", launch->argv[0], strerror(failure[1]));
  else
    snprintf(err, errlen, "cannot start %s: setting %s failed: %s", launch->argv[0],
             STEP_NAMES[step], strerror(failure[1]));
  return failure[1] ? failure[1] : EINVAL;
}

int sandbox_signal_of_status(int status) {
  return status > 128 && status < 128 + 65 ? status - 128 : 0;
}
