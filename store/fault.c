/* Fault injection: a one-shot countdown over the store's allocations and SQLite calls, and a
 * persistent failure of the statements that contain an SQL fragment. */
#include "store/fault.h"

#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>

/* The countdown is shared by all threads; the test drives it from one thread. -1 means
 * off. */
static atomic_int fail_countdown = -1;
static atomic_bool fault_fired = false;

void store_fail_after(int n) {
  atomic_store(&fault_fired, false);
  atomic_store(&fail_countdown, n < 0 ? -1 : n);
}

bool store_fault_injected(void) {
  return atomic_load(&fault_fired);
}

/* One-shot: the failing call also switches injection off, so cleanup after the fault
 * and the caller's next call run normally. */
bool store_fault(void) {
  int n = atomic_load(&fail_countdown);
  while (n >= 0) {
    if (atomic_compare_exchange_weak(&fail_countdown, &n, n - 1)) {
      if (n > 0)
        return false;
      atomic_store(&fault_fired, true);
      return true;
    }
  }
  return false;
}

/* The persistent statement fault: off while statement_rc is 0. The fragment is read
 * under the mutex because a test sets it while store threads step statements. */
static pthread_mutex_t statement_lock = PTHREAD_MUTEX_INITIALIZER;
static char statement_fragment[128];
static atomic_int statement_rc = 0;

void store_fail_statement(const char *sql_fragment, int sqlite_rc) {
  pthread_mutex_lock(&statement_lock);
  bool on = sql_fragment && sqlite_rc != 0 && strlen(sql_fragment) < sizeof statement_fragment;
  snprintf(statement_fragment, sizeof statement_fragment, "%s", on ? sql_fragment : "");
  atomic_store(&statement_rc, on ? sqlite_rc : 0);
  pthread_mutex_unlock(&statement_lock);
}

int store_statement_fault(const char *sql) {
  if (atomic_load(&statement_rc) == 0 || !sql)
    return 0;
  pthread_mutex_lock(&statement_lock);
  int rc = strstr(sql, statement_fragment) ? atomic_load(&statement_rc) : 0;
  pthread_mutex_unlock(&statement_lock);
  return rc;
}
