/* A sandboxed evaluator's stderr reaches its log through the server: a thread copies the
 * pipe into the log file (appended, rotated past a size), so the sandbox holds no
 * descriptor of a file in --data that it could reopen, read or grow without bound. */
#include "gpu/supervisor/internal.h"

#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#define PUMP_CHUNK (64u << 10)
#define PUMP_TICK_MS 200
#define LOG_ROTATE_BYTES (64ll << 20) /* past it the log moves to LOG.1 (replacing it) */

struct stderr_pump {
  pthread_t thread;
  int fd;            /* the pipe's read end (owned) */
  char *path;        /* the log, or NULL for our own stderr */
  atomic_bool stop;  /* the process is gone: drain what is left and end */
};

/* Opens the log for appending, first moving it to PATH.1 when it has grown past the
 * rotation size. Returns the descriptor, or -1 (the output is then dropped). */
static int open_log(const char *path) {
  struct stat st;
  if (stat(path, &st) == 0 && st.st_size > LOG_ROTATE_BYTES) {
    char old[PATH_MAX + 8];
    snprintf(old, sizeof old, "%s.1", path);
    rename(path, old);
  }
  return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

/* Writes all of data to fd, ignoring failures (a full disk loses log lines, nothing else). */
static void write_out(int fd, const char *data, size_t len) {
  while (fd >= 0 && len > 0) {
    ssize_t n = write(fd, data, len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    data += n;
    len -= (size_t)n;
  }
}

/* Copies the pipe until EOF, or until stop is set and nothing more is readable. */
static void *pump_main(void *arg) {
  struct stderr_pump *p = arg;
  char *buf = malloc(PUMP_CHUNK);
  int out = p->path ? open_log(p->path) : STDERR_FILENO;
  for (bool done = !buf; !done;) {
    struct pollfd pfd = {.fd = p->fd, .events = POLLIN};
    bool stopping = atomic_load(&p->stop);
    int rc = poll(&pfd, 1, stopping ? 0 : PUMP_TICK_MS);
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc <= 0) {
      done = stopping || rc < 0;
      continue;
    }
    ssize_t n = read(p->fd, buf, PUMP_CHUNK);
    if (n > 0)
      write_out(out, buf, (size_t)n);
    else if (n == 0 || errno != EINTR)
      done = true;
  }
  if (p->path && out >= 0)
    close(out);
  free(buf);
  return NULL;
}

int stderr_pump_start(int fd, const char *path, struct stderr_pump **ret_pump) {
  struct stderr_pump *p = calloc(1, sizeof *p);
  if (!p) {
    close(fd);
    return -ENOMEM;
  }
  p->fd = fd;
  p->path = dup_or_null(path);
  atomic_init(&p->stop, false);
  int rc = pthread_create(&p->thread, NULL, pump_main, p);
  if (rc != 0) {
    close(fd);
    free(p->path);
    free(p);
    return -rc;
  }
  *ret_pump = p;
  return 0;
}

void stderr_pump_stop(struct stderr_pump *pump) {
  if (!pump)
    return;
  atomic_store(&pump->stop, true);
  pthread_join(pump->thread, NULL);
  close(pump->fd);
  free(pump->path);
  free(pump);
}
