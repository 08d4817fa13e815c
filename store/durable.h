/* Private to store/: group commit. A committed transaction is made durable by one
 * fdatasync of the WAL file that starts after its COMMIT; transactions that wait at the
 * same time share it. */
#ifndef OPFORGE_STORE_DURABLE_H
#define OPFORGE_STORE_DURABLE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "store/status.h"

/* The group-commit state of one store; embedded in struct store. */
struct store_durable {
  pthread_mutex_t lock;
  pthread_cond_t done;
  uint64_t next_ticket; /* tickets handed to committed transactions */
  uint64_t synced;      /* every ticket up to this one is durable */
  bool syncing;         /* a thread is in fdatasync now */
  uint64_t syncs;       /* fdatasync calls that succeeded (for tests and logs) */
  int fd;               /* the WAL file, opened on first use; -1 before */
  dev_t dev;
  ino_t ino;
};

/* Initializes d (fd closed). */
void store_durable_init(struct store_durable *d);

/* Closes the file and destroys d. */
void store_durable_clear(struct store_durable *d);

/* Call after a COMMIT returned: returns once an fdatasync of db_path's WAL file (or of
 * db_path itself when no WAL file exists) that began after the call has finished.
 * STORE_OK, or STORE_ERROR when the sync failed (logged): the transaction is then
 * committed but maybe not durable. */
int store_durable_wait(struct store_durable *d, const char *db_path);

#endif
