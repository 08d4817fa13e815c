/* Idempotency keys of task submissions (schema/0008_idempotency.sql): a key remembers
 * the digest of the body it came with and the task that body made, for 24 hours, so a
 * client that retries a submission gets its first task back instead of a second one. */
#ifndef OPFORGE_STORE_IDEMPOTENCY_H
#define OPFORGE_STORE_IDEMPOTENCY_H

#include <jansson.h>
#include <stdint.h>

#include "store/status.h"

/* How long a key holds: 24 hours, in milliseconds. */
#define STORE_IDEMPOTENCY_TTL_MS (24LL * 60 * 60 * 1000)
/* Longest key (the API checks 1..128 visible ASCII characters). */
#define STORE_IDEMPOTENCY_KEY_MAX 128
/* A body digest: SHA-256 as 64 lower-case hex digits. */
#define STORE_IDEMPOTENCY_DIGEST_LEN 64

/* What a live key names. */
struct store_idempotency {
  char digest[STORE_IDEMPOTENCY_DIGEST_LEN + 1];
  char task_id[65];
  int64_t created_ms; /* Unix milliseconds */
};

/* Looks key up as of now_ms (Unix milliseconds): STORE_OK and *ret filled when it was
 * stored less than STORE_IDEMPOTENCY_TTL_MS before now_ms and its task still exists,
 * else STORE_NOT_FOUND (an expired key, or one whose task was deleted, is free).
 * Everything passed stays the caller's; *ret is set only on STORE_OK. */
int store_idempotency_find(struct store *s, const char *key, int64_t now_ms,
                           struct store_idempotency *ret);

/* Inserts a task exactly as store_task_insert does (id, name, options and reference
 * borrowed; *ret_task, when ret_task is not NULL, the caller's on STORE_OK) and, in the
 * same transaction, key -> (digest, id, now_ms). First prunes every key that expired by
 * now_ms and frees key when its task is gone. STORE_CONFLICT, with nothing written, when
 * key is still held: a concurrent submission stored it first (look it up again with
 * store_idempotency_find). STORE_INVALID for an empty or too long key or a digest that
 * is not 64 characters. */
int store_idempotency_insert_task(struct store *s, const char *key, const char *digest,
                                  int64_t now_ms, const char *id, const char *name,
                                  json_t *options, const char *reference, json_t **ret_task);

#endif
