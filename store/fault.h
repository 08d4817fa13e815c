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

/* Makes every step of a statement whose SQL contains sql_fragment fail with sqlite_rc
 * (an SQLite result code, e.g. DB_CONSTRAINT_CHECK or DB_BUSY) until it is
 * called again; NULL (or a fragment of 128 bytes or more) switches it off. Unlike
 * store_fail_after the fault is persistent, as a constraint that a row always violates.
 * The fragment is copied. */
void store_fail_statement(const char *sql_fragment, int sqlite_rc);

/* For store/ only: the code store_fail_statement set for a statement with this SQL, or
 * 0 (DB_OK) when it must run normally. */
int store_statement_fault(const char *sql);

/* For store/ only: true when fault injection says this allocation or SQLite call must
 * fail. Every checked allocation and SQLite call in store/ asks it first. */
bool store_fault(void);

#endif
