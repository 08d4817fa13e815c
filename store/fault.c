/* Fault injection: a one-shot countdown over the store's allocations and SQLite calls. */
#include "store/fault.h"

#include <stdatomic.h>

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
