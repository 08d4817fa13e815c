/* The data directory's lock file (see data_lock.h). */
#include "server/data_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

struct data_lock {
  int fd;
};

/* The pid written in the lock file fd, 0 when there is none (the holder may be between
 * taking the lock and writing it). */
static pid_t read_holder(int fd) {
  char buf[32] = "";
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  char *end = NULL;
  long pid = strtol(buf, &end, 10);
  return end != buf && pid > 0 && pid <= 0x3fffffff ? (pid_t)pid : 0;
}

int data_lock_acquire(const char *dir, struct data_lock **ret_lock, pid_t *ret_holder,
                      char *err, size_t errlen) {
  if (ret_holder)
    *ret_holder = 0;
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/opforge.lock", dir) >= sizeof path) {
    snprintf(err, errlen, "--data: the path '%s' is too long", dir);
    return -1;
  }
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(err, errlen, "--data: cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    if (e == EWOULDBLOCK) {
      pid_t holder = read_holder(fd);
      if (ret_holder)
        *ret_holder = holder;
      if (holder)
        snprintf(err, errlen,
                 "--data: %s is in use by another opforge server (pid %ld); stop it or "
                 "choose another --data", dir, (long)holder);
      else
        snprintf(err, errlen,
                 "--data: %s is in use by another opforge server (pid unknown); stop it or "
                 "choose another --data", dir);
    } else {
      snprintf(err, errlen, "--data: cannot lock %s: %s", path, strerror(e));
    }
    close(fd);
    return -1;
  }
  char pid[32];
  int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len) {
    snprintf(err, errlen, "--data: cannot write %s: %s", path, strerror(errno));
    close(fd);
    return -1;
  }
  struct data_lock *lock = malloc(sizeof *lock);
  if (!lock) {
    snprintf(err, errlen, "out of memory");
    close(fd);
    return -1;
  }
  lock->fd = fd;
  *ret_lock = lock;
  return 0;
}

void data_lock_release(struct data_lock *lock) {
  if (!lock)
    return;
  /* Should this fail, only the pid goes stale; the lock itself ends with close. */
  int ignored = ftruncate(lock->fd, 0);
  (void)ignored;
  close(lock->fd);
  free(lock);
}
