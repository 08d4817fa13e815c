/* Task records: create, read, list, count, state changes (store/tasks*.c), a worker's
 * claim on a task (store/claims.c) and the task's profile (store/profile.c). Records
 * come back as Jansson objects in their API shape. */
#ifndef OPFORGE_STORE_TASKS_H
#define OPFORGE_STORE_TASKS_H

#include <jansson.h>
#include <stdbool.h>

#include "store/status.h"

/* ---- rows and listing (store/tasks.c, store/tasks_list.c) ---- */

/* Inserts a task in status "queued" with its normalized options (borrowed) and its
 * reference source, and appends its first event ("queued") in the same transaction.
 * On STORE_OK, *ret_task (caller owns) is the task in API shape, without reference. */
int store_task_insert(struct store *s, const char *id, const char *name, json_t *options,
                      const char *reference, json_t **ret_task);

/* Loads one task in API shape (caller owns *ret_task); with_reference adds "reference".
 * STORE_NOT_FOUND when there is no such id. */
int store_task_get(struct store *s, const char *id, bool with_reference, json_t **ret_task);

/* Lists tasks newest first, optionally only those in status (NULL for all), at most limit
 * (1..500). cursor is NULL or a value from an earlier *ret_next_cursor; a malformed one
 * gives STORE_INVALID. *ret_items (caller owns) is a JSON array; *ret_next_cursor (caller
 * frees with free) is NULL when there is no further page. */
int store_task_list(struct store *s, const char *status, int limit, const char *cursor,
                    json_t **ret_items, char **ret_next_cursor);

/* Counts tasks per status: {"queued":n,"running":n,"succeeded":n,"failed":n,
 * "cancelled":n} (every key present). Caller owns *ret_counts. */
int store_task_counts(struct store *s, json_t **ret_counts);

/* True when the task status is final (succeeded, failed, cancelled). */
bool store_status_is_final(const char *status);

/* ---- state changes (store/tasks_state.c) ---- */

/* Cancels a task: a queued one becomes "cancelled" at once (events "cancelled", then
 * "finished" with {"status","steps","correct"}, as every task's log ends); a running one
 * gets cancel_requested=true (event "cancel_requested") and its worker ends it.
 * STORE_CONFLICT for a task already succeeded, failed or cancelled. On STORE_OK
 * *ret_task (caller owns) is the task after the change. */
int store_task_cancel(struct store *s, const char *id, json_t **ret_task);

/* Deletes a task with its events and candidates. STORE_CONFLICT while it is running. */
int store_task_delete(struct store *s, const char *id);

/* Moves a task to status (one of the five) and appends an event whose type is the new
 * status, with data {"error": error} when error is given, else {}. error (borrowed, an
 * object or NULL) replaces the stored error; pass NULL to clear it. A final task, or a
 * task already in status, gives STORE_CONFLICT (so two workers cannot both claim a
 * queued task); any other move is allowed, e.g. running back to queued on restart.
 * Joins the caller's store_transaction when called inside one. */
int store_task_set_status(struct store *s, const char *id, const char *status, json_t *error);

/* Replaces a task's progress and/or baselines (borrowed objects; NULL leaves that field
 * unchanged) and its updated_at; appends no event. STORE_NOT_FOUND when there is no
 * such id. Joins the caller's store_transaction when called inside one. */
int store_task_update_progress(struct store *s, const char *id, json_t *progress,
                               json_t *baselines);

/* ---- claims (store/claims.c) ---- */

/* Every claim names the server instance that holds it and carries a lease: the holder
 * renews it (store_claims_renew) while it lives; once it runs out, any server may take
 * the task over. An instance id is "<host>:<pid>:<random>"; store_open makes one and a
 * lease of 60 s. */

/* Replaces the instance id (when instance is not NULL; copied) and the lease (seconds,
 * at most 86400; 0 makes every claim stale at once, for tests). Call it before other
 * threads use the store. STORE_INVALID for an empty or too long id. */
int store_claims_configure(struct store *s, const char *instance, unsigned lease_s);

/* This store's instance id (owned by the store). */
const char *store_claims_instance(const struct store *s);

/* The lease of a claim in seconds (store_claims_configure; 60 by default). */
unsigned store_claims_lease(const struct store *s);

/* Claims one task for worker: first a running task nobody holds or whose lease ran out
 * (it resumes), else the oldest queued one (it becomes running, event "running"). The
 * claim is atomic: two workers never get the same task. STORE_NOT_FOUND when there is
 * nothing to do; on STORE_OK ret_id holds the task id. */
int store_task_claim(struct store *s, const char *worker, char ret_id[40]);

/* Drops this instance's claim on one task (a checkpoint), or, when id is NULL, every
 * claim of this instance (shutdown). Claims of other instances are left alone. */
int store_task_unclaim(struct store *s, const char *id);

/* Extends the lease of every claim this process's workers run: those store_task_claim
 * gave out here and that no unclaim, finish or store_claims_forget has dropped since.
 * A claim held in the table but no longer run (its release failed) is not renewed, so it
 * runs out and the task is taken over. *ret_renewed (may be NULL) gets how many. */
int store_claims_renew(struct store *s, int *ret_renewed);

/* The worker stopped running task id, whether or not its claim could be released: the
 * claim is no longer renewed. */
void store_claims_forget(struct store *s, const char *id);

/* Start-up, with the data directory's lock held: drops the claims of this host (their
 * processes are gone, since the lock is ours), claims from before leases existed, and
 * claims whose lease ran out. A live server's claim elsewhere is kept. *ret_released
 * (may be NULL) gets how many were dropped. */
int store_claims_release_stale(struct store *s, int *ret_released);

/* Ends a task: status (succeeded, failed or cancelled) with its error (may be NULL), then
 * event "finished" with summary (borrowed, may be NULL), and drops the claim. */
int store_task_finish(struct store *s, const char *id, const char *status, json_t *error,
                      json_t *summary);

/* ---- profile (store/profile.c) ---- */

/* The stored profile of a task, or *ret_profile = NULL when it has none yet (caller owns). */
int store_task_profile_get(struct store *s, const char *id, json_t **ret_profile);

/* Stores the profile and the baselines (both borrowed) and appends event "profiled"
 * with the baselines, in one transaction. */
int store_task_profile_set(struct store *s, const char *id, json_t *profile,
                           json_t *baselines);

#endif
