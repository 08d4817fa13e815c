/* Submitting one program of `opforge tune` under its Idempotency-Key. */
#include "cli/tune_submit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/sha256.h"
#include "cli/submit_options.h"

#define SEND_TRIES 4          /* a keyed submission without an answer is sent again */
#define SEND_PAUSE_FIRST_MS 500

int tune_idempotency_key(const json_t *body, const char *scope, unsigned attempt,
                         char out[TUNE_KEY_MAX]) {
  char *text = json_dumps(body, JSON_COMPACT | JSON_SORT_KEYS);
  if (!text)
    return -1;
  struct sha256_ctx ctx;
  uint8_t digest[SHA256_DIGEST_BYTES];
  char hex[SHA256_HEX_BYTES];
  sha256_init(&ctx);
  if (scope)
    sha256_update(&ctx, scope, strlen(scope));
  sha256_update(&ctx, "\n", 1);
  sha256_update(&ctx, text, strlen(text));
  sha256_final(&ctx, digest);
  sha256_to_hex(digest, hex);
  free(text);
  if (attempt == 0)
    snprintf(out, TUNE_KEY_MAX, "tune-%s", hex);
  else
    snprintf(out, TUNE_KEY_MAX, "tune-%s-%u", hex, attempt);
  return 0;
}

/* Sleeps ms milliseconds, resuming after signals. */
static void pause_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* One POST, sent again (keyed only) while it gets no answer or a 429/5xx. Returns 0 with
 * the last answer's status and body (the caller's), or -1 when none came (printed). */
static int post(struct cli_client *client, const json_t *body, const char *key,
                long *ret_status, json_t **ret_reply) {
  char header[TUNE_KEY_MAX + 32];
  if (key)
    snprintf(header, sizeof header, "Idempotency-Key: %s", key);
  long pause = SEND_PAUSE_FIRST_MS;
  for (int i = 0;; i++) {
    long status = 0;
    json_t *reply = NULL;
    bool last = !key || i + 1 == SEND_TRIES;
    int rc = cli_request_with_header(client, "POST", "/v1/tasks", key ? header : NULL, body,
                                     &status, &reply);
    if (rc == 0 && (last || (status != 429 && status < 500))) {
      *ret_status = status;
      *ret_reply = reply;
      return 0;
    }
    json_decref(reply);
    if (last || (rc != 0 && !cli_client_unreachable(client)))
      return -1;
    pause_ms(pause);
    pause *= 2;
  }
}

/* What a refused POST means for the run; prints the server's error. */
static enum tune_submit_result refusal(struct tune_task *t, long status, const json_t *reply) {
  submit_print_refusal(status, reply);
  if (status == 401 || status == 403)
    return TUNE_SUBMIT_AUTH;
  if (status == 400 || status == 404 || status == 413) {
    tune_task_take_refusal(t, status, reply);
    return TUNE_SUBMIT_REFUSED;
  }
  return TUNE_SUBMIT_ERROR;
}

enum tune_submit_result tune_submit(struct cli_client *client, struct tune_task *t,
                                    const json_t *body, const struct tune_submit_policy *policy) {
  for (unsigned attempt = 0;; attempt++) {
    char key[TUNE_KEY_MAX];
    if (policy->keyed &&
        tune_idempotency_key(body, policy->reuse ? NULL : policy->scope, attempt, key) != 0) {
      fprintf(stderr, "error: out of memory\n");
      return TUNE_SUBMIT_ERROR;
    }
    long status = 0;
    json_t *reply = NULL;
    if (post(client, body, policy->keyed ? key : NULL, &status, &reply) != 0)
      return cli_client_unreachable(client) ? TUNE_SUBMIT_UNREACHABLE : TUNE_SUBMIT_ERROR;
    enum tune_submit_result result = TUNE_SUBMIT_OK;
    if (status != 200 && status != 202) {
      result = refusal(t, status, reply);
    } else if (!json_is_string(json_object_get(reply, "id"))) {
      fprintf(stderr, "error: bad_reply: the server's reply names no task id\n");
      result = TUNE_SUBMIT_ERROR;
    } else {
      tune_task_take(t, reply);
      t->origin = status == 202                                 ? TUNE_NEW
                  : policy->reuse && t->state == TUNE_SUCCEEDED ? TUNE_REUSED
                                                                : TUNE_REPLAYED;
    }
    json_decref(reply);
    /* A replayed task that failed or was cancelled is what a retry wants to run again. */
    bool again = result == TUNE_SUBMIT_OK && status == 200 &&
                 (t->state == TUNE_FAILED || t->state == TUNE_CANCELLED) &&
                 attempt + 1 < TUNE_KEY_ATTEMPTS;
    if (!again)
      return result;
    char replaced[TUNE_ID_MAX];
    snprintf(replaced, sizeof replaced, "%s", t->id);
    tune_task_init(t, t->file);
    snprintf(t->replaces, sizeof t->replaces, "%s", replaced);
  }
}
