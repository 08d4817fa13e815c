/* Fault injection for tests: makes the store's next allocation or SQLite call fail. */
#ifndef OPFORGE_STORE_FAULT_H
#define OPFORGE_STORE_FAULT_H

#include <stdbool.h>

/* After n more successful allocations/SQLite steps inside the store, the next one fails
 * (n < 0 disables). */
void store_fail_after(int n);

/* True when the injected fault has fired since the last store_fail_after. The fault is
 * one-shot: the call that fails also switches injection off. */
bool store_fault_injected(void);

/* For store/ only: true when fault injection says this allocation or SQLite call must
 * fail. Every checked allocation and SQLite call in store/ asks it first. */
bool store_fault(void);

#endif
