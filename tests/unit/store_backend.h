/* The store's unit suites on either backend (docs/architecture.md, "Store backends"):
 * SQLite in a test's data directory, the default, or, when OPFORGE_TEST_PG holds the
 * admin URL of a PostgreSQL cluster (tests/pg/cluster start DIR prints one), a database
 * of that cluster that belongs to the directory. Every function here fails the running
 * cmocka test (fail_msg) when the database cannot be reached or a query fails.
 *
 * A directory's database lives as long as the directory's marker file (DIR/pg-database,
 * PostgreSQL mode only): the first open of a directory without one drops any database of
 * that name left from an earlier run, creates it empty and writes the marker; later opens
 * of the same directory reopen the same database; test_store_remove drops it. */
#ifndef OPFORGE_TESTS_UNIT_STORE_BACKEND_H
#define OPFORGE_TESTS_UNIT_STORE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

struct store;

/* True when OPFORGE_TEST_PG is set (and not empty): the suites run on PostgreSQL. */
bool test_pg(void);

/* Under PostgreSQL, prints "skipped under PostgreSQL: <why>" to stderr and skips the
 * running test (cmocka's skip(), which does not return); under SQLite, returns. */
void test_sqlite_only(const char *why);

/* store_open on dir (SQLite) or store_open_pg on dir's database (PostgreSQL, created
 * when the directory has none yet). Returns store_open's status; on STORE_OK the caller
 * owns *ret_store (store_close), else *ret_store is NULL and err says why. */
int test_store_try_open(const char *dir, struct store **ret_store, char *err, size_t errlen);

/* test_store_try_open that fails the test when the store does not open. The caller owns
 * the store (store_close). */
struct store *test_store_open(const char *dir);

/* Removes dir and everything in it and, under PostgreSQL, drops its database (closing
 * any connection still open to it). Close the directory's stores first. */
void test_store_remove(const char *dir);

/* Raw access to dir's database on a connection of its own, past the store: the SQL is
 * the backend's own (see test_pg). test_raw_count returns the first column of the first
 * row as an integer; test_raw_text copies it into buf (len bytes, NUL-terminated; a NULL
 * value fails the test); test_raw_exec runs one or more statements and ignores rows. */
long long test_raw_count(const char *dir, const char *sql);
void test_raw_text(const char *dir, const char *sql, char *buf, size_t len);
void test_raw_exec(const char *dir, const char *sql);

#endif
