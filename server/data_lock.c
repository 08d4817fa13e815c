/* The data directory's lock file (see data_lock.h). */
#include "server/data_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

struct data_lock {
  bool wrote_pid; /* the file holds our pid (cleared again at release) */
  int fd;     /* DIR/opforge.lock, holding the pid */
  int db_fd;  /* DIR/opforge.db: also locked, so that deleting opforge.lock lets no
                 second server in */
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

/* Locks DIR/opforge.db (created empty when absent, which SQLite takes as a new database)
 * with flock, which SQLite's own fcntl locks do not touch. Returns its descriptor, or -1
 * with the reason in err. */
static int lock_database(const char *dir, pid_t *ret_holder, char *err, size_t errlen) {
  char path[4096];
  if ((size_t)snprintf(path, sizeof path, "%s/opforge.db", dir) >= sizeof path) {
    snprintf(err, errlen, "--data: the path '%s' is too long", dir);
    return -1;
  }
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    snprintf(err, errlen, "--data: cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) == 0)
    return fd;
  int e = errno;
  close(fd);
  if (ret_holder)
    *ret_holder = 0;
  if (e == EWOULDBLOCK)
    snprintf(err, errlen, "--data: %s is in use by another opforge server (its lock file "
             "opforge.lock was removed, but its database is still locked); stop it or "
             "choose another --data", dir);
  else
    snprintf(err, errlen, "--data: cannot lock %s: %s", path, strerror(e));
  return -1;
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
  int db_fd = lock_database(dir, ret_holder, err, errlen);
  if (db_fd < 0) {
    close(fd);
    return -1;
  }
  struct data_lock *lock = malloc(sizeof *lock);
  if (!lock) {
    snprintf(err, errlen, "out of memory");
    close(db_fd);
    close(fd);
    return -1;
  }
  lock->fd = fd;
  lock->db_fd = db_fd;
  lock->wrote_pid = false;
  *ret_lock = lock;
  return 0;
}

int data_lock_write_pid(struct data_lock *lock, char *err, size_t errlen) {
  /* Over the old pid, then cut to length: a failed write leaves the file as it was. */
  char pid[32];
  int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
  if (pwrite(lock->fd, pid, (size_t)len, 0) != len || ftruncate(lock->fd, len) != 0) {
    snprintf(err, errlen, "--data: cannot write the pid into opforge.lock: %s",
             strerror(errno));
    return -1;
  }
  lock->wrote_pid = true;
  return 0;
}

void data_lock_release(struct data_lock *lock) {
  if (!lock)
    return;
  /* Should this fail, only the pid goes stale; the lock itself ends with close. A server
   * that never came up leaves the file as it found it. */
  if (lock->wrote_pid) {
    int ignored = ftruncate(lock->fd, 0);
    (void)ignored;
  }
  close(lock->db_fd);
  close(lock->fd);
  free(lock);
}
