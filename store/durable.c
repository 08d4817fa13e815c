/* Group commit (see durable.h). Connections run synchronous=NORMAL, so a COMMIT writes
 * the WAL without syncing it; store_transaction then waits here. The first waiter syncs
 * the WAL file for everybody who committed before it started; the others wait for it or
 * for the next one. One fdatasync per batch instead of one per transaction is what makes
 * durable acceptance affordable: docs/bench-results.md. */
#include "store/durable.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/util.h"

void store_durable_init(struct store_durable *d) {
  memset(d, 0, sizeof *d);
  d->fd = -1;
  pthread_mutex_init(&d->lock, NULL);
  pthread_cond_init(&d->done, NULL);
}

void store_durable_clear(struct store_durable *d) {
  if (d->fd >= 0)
    close(d->fd);
  d->fd = -1;
  pthread_cond_destroy(&d->done);
  pthread_mutex_destroy(&d->lock);
}

/* fdatasync of one file by path (the database itself, when there is no WAL file). */
static bool sync_path(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  bool ok = fd >= 0 && fdatasync(fd) == 0;
  if (!ok)
    store_log("cannot sync %s: %s", path, strerror(errno));
  if (fd >= 0)
    close(fd);
  return ok;
}

/* Syncs the WAL file. SQLite keeps one WAL file while any connection is open (and this
 * process keeps its connections), but the descriptor is checked against the path each
 * time, so a WAL file made anew is never missed. Only the thread that set syncing calls
 * this, so d->fd needs no lock. */
static bool sync_wal(struct store_durable *d, const char *db_path) {
  char wal[4096];
  if ((size_t)snprintf(wal, sizeof wal, "%s-wal", db_path) >= sizeof wal)
    return false;
  struct stat st;
  if (stat(wal, &st) != 0) {
    if (errno != ENOENT) {
      store_log("cannot stat %s: %s", wal, strerror(errno));
      return false;
    }
    return sync_path(db_path); /* checkpointed and removed: the pages are in the database */
  }
  if (d->fd < 0 || d->dev != st.st_dev || d->ino != st.st_ino) {
    if (d->fd >= 0)
      close(d->fd);
    d->fd = open(wal, O_RDONLY | O_CLOEXEC);
    if (d->fd < 0) {
      store_log("cannot open %s: %s", wal, strerror(errno));
      return false;
    }
    d->dev = st.st_dev;
    d->ino = st.st_ino;
  }
  if (fdatasync(d->fd) != 0) {
    store_log("cannot sync %s: %s", wal, strerror(errno));
    return false;
  }
  return true;
}

int store_durable_wait(struct store_durable *d, const char *db_path) {
  pthread_mutex_lock(&d->lock);
  uint64_t ticket = ++d->next_ticket;
  int result = STORE_OK;
  while (d->synced < ticket) {
    if (d->syncing) {
      pthread_cond_wait(&d->done, &d->lock);
      continue;
    }
    /* Everything committed before now holds a ticket up to batch: one sync covers it. */
    uint64_t batch = d->next_ticket;
    d->syncing = true;
    pthread_mutex_unlock(&d->lock);
    bool ok = sync_wal(d, db_path);
    pthread_mutex_lock(&d->lock);
    d->syncing = false;
    if (ok && batch > d->synced)
      d->synced = batch;
    d->syncs += ok;
    pthread_cond_broadcast(&d->done);
    if (!ok) {
      result = STORE_ERROR; /* the others of this batch try again themselves */
      break;
    }
  }
  pthread_mutex_unlock(&d->lock);
  return result;
}
