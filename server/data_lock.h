/* The data directory's owner: one `opforge serve` per --data, held by a lock file. */
#ifndef OPFORGE_DATA_LOCK_H
#define OPFORGE_DATA_LOCK_H

#include <stddef.h>
#include <sys/types.h>

struct data_lock;

/* Takes DIR/opforge.lock with flock(LOCK_EX | LOCK_NB), then DIR/opforge.db the same way
 * (a second server whose first deleted opforge.lock still finds the database locked). The
 * file is not written here: data_lock_write_pid does that once the server is up, so a
 * start that fails leaves it as it was. The lock lasts until data_lock_release (or the process's end, even by
 * kill -9: the kernel drops it with the descriptor). When another process holds it,
 * returns -1 with a message naming that process's pid in err (the pid it wrote; 0 in
 * *ret_holder when unreadable); other failures also return -1 with the reason in err
 * and *ret_holder 0. On success returns 0 and *ret_lock (caller releases it).
 * ret_holder may be NULL. */
int data_lock_acquire(const char *dir, struct data_lock **ret_lock, pid_t *ret_holder,
                      char *err, size_t errlen);

/* Writes this process's pid into the lock file (over the old one, then cut to length: a
 * failed write leaves the file as it was). Returns 0, or -1 with the reason in err. */
int data_lock_write_pid(struct data_lock *lock, char *err, size_t errlen);

/* Releases the lock and frees it (clearing the pid when data_lock_write_pid wrote it). The file stays (removing it would let two processes
 * lock two different files of the same name). Accepts NULL. */
void data_lock_release(struct data_lock *lock);

#endif
