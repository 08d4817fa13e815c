/* The folders a Python install reads its modules from, as the interpreter itself reports
 * them (prefixes and sys.path), so that the sandbox can bind exactly those: a venv, its
 * base install (pyenv, conda, /usr) and any path a .pth file adds. */
#include "gpu/sandbox/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PROBE_DEADLINE_S 60
#define PROBE_MAX_BYTES (256u << 10)

static const char PROBE[] =
    "import json, sys\n"
    "print(json.dumps([sys.executable, sys.prefix, sys.base_prefix, sys.exec_prefix,\n"
    "                  sys.base_exec_prefix] + [p for p in sys.path if p]))\n";

/* Seconds on the monotonic clock. */
static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Reads fd to EOF into buf (NUL-terminated) before the deadline. Returns the byte count,
 * or -1 on a timeout, an error or more than PROBE_MAX_BYTES. */
static long read_all(int fd, char *buf, size_t cap, double deadline) {
  size_t len = 0;
  for (;;) {
    double left = deadline - mono_s();
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (left <= 0 || poll(&p, 1, (int)(left * 1000) + 1) < 0) {
      if (left > 0 && errno == EINTR)
        continue;
      return -1;
    }
    if (p.revents == 0)
      continue;
    ssize_t n = read(fd, buf + len, cap - 1 - len);
    if (n == 0)
      break;
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 || len + (size_t)n >= cap - 1)
      return -1;
    len += (size_t)n;
  }
  buf[len] = '\0';
  return (long)len;
}

/* Runs the probe; its stdout into buf. Returns 0, or -1 with the reason in err. */
static int run_probe(const char *python, char *const *envp, char *buf, size_t cap, char *err,
                     size_t errlen) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) < 0) {
    snprintf(err, errlen, "cannot create a pipe: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addchdir_np(&fa, "/");
  const char *argv[] = {python, "-s", "-c", PROBE, NULL};
  pid_t pid;
  int rc = posix_spawnp(&pid, python, &fa, NULL, (char *const *)argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(out[1]);
  if (rc != 0) {
    close(out[0]);
    snprintf(err, errlen, "cannot run the evaluator's interpreter %s: %s", python,
             strerror(rc));
    return -1;
  }
  long n = read_all(out[0], buf, cap, mono_s() + PROBE_DEADLINE_S);
  close(out[0]);
  if (n < 0)
    kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    snprintf(err, errlen, "the evaluator's interpreter %s could not report its folders "
             "(is it a Python 3 with PyTorch?)", python);
    return -1;
  }
  return 0;
}

/* Adds path when it is absolute, not "/", and exists. */
static void add_existing(struct strv *out, const char *path) {
  struct stat st;
  if (path[0] != '/' || strcmp(path, "/") == 0 || stat(path, &st) != 0)
    return;
  strv_add(out, path);
}

int sandbox_python_paths(const char *python, char *const *envp, struct strv *out, char *err,
                         size_t errlen) {
  char *buf = malloc(PROBE_MAX_BYTES);
  if (!buf) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  int rc = run_probe(python, envp, buf, PROBE_MAX_BYTES, err, errlen);
  json_t *list = rc == 0 ? json_loads(buf, 0, NULL) : NULL;
  free(buf);
  if (rc == 0 && !json_is_array(list)) {
    snprintf(err, errlen, "the evaluator's interpreter %s printed no folder list", python);
    rc = -1;
  }
  size_t i;
  json_t *v;
  json_array_foreach(list, i, v) {
    if (json_is_string(v))
      add_existing(out, json_string_value(v));
  }
  json_decref(list);
  return rc;
}
