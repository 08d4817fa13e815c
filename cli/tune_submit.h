/* Submitting one program of `opforge tune`, safely retried: its Idempotency-Key (made of
 * the submission and the CI run), the answer to a replayed key, and the way a refusal
 * or a server that cannot be reached is told to the caller. */
#ifndef OPFORGE_CLI_TUNE_SUBMIT_H
#define OPFORGE_CLI_TUNE_SUBMIT_H

#include <stdbool.h>

#include <jansson.h>

#include "cli/client.h"
#include "cli/tune_task.h"

/* "tune-", 64 hex digits, "-" and an attempt number, and the NUL, with room. */
#define TUNE_KEY_MAX 96
/* Keys tried per program: a key whose task failed or was cancelled moves on to the next
 * (a retried job runs again what failed), at most this many times. */
#define TUNE_KEY_ATTEMPTS 8

/* How the run submits. */
struct tune_submit_policy {
  bool keyed;         /* send an Idempotency-Key */
  const char *scope;  /* the run id the key is made with; NULL or "": none */
  bool reuse;         /* --reuse: a replayed task counts as reused */
};

enum tune_submit_result {
  TUNE_SUBMIT_OK = 0,      /* t has its task (new, replayed or reused) */
  TUNE_SUBMIT_REFUSED,     /* the server refused it as invalid (400, 404, 413; printed) */
  TUNE_SUBMIT_AUTH,        /* the token was refused (401, 403; printed) */
  TUNE_SUBMIT_UNREACHABLE, /* no answer (printed) */
  TUNE_SUBMIT_ERROR,       /* any other failure (printed) */
};

/* Writes the Idempotency-Key of body for attempt (0 first) into out: "tune-" and the
 * SHA-256 of the scope (may be NULL), a newline and body's canonical JSON (compact, keys
 * sorted), then "-<attempt>" from the second attempt on. The same program with the same
 * options in the same run always gets the same key. Returns 0, or -1 when out of
 * memory. */
int tune_idempotency_key(const json_t *body, const char *scope, unsigned attempt,
                         char out[TUNE_KEY_MAX]);

/* Posts body (borrowed) as t's submission under policy, retrying an answerless or 5xx
 * attempt a few times when keyed (the key makes that safe). On TUNE_SUBMIT_OK t holds the
 * task and its origin; on TUNE_SUBMIT_REFUSED t is refused with the server's error. */
enum tune_submit_result tune_submit(struct cli_client *client, struct tune_task *t,
                                    const json_t *body, const struct tune_submit_policy *policy);

#endif
