/* The retry policy of LLM requests, as pure functions: which failures are retried, how
 * long to wait (exponential backoff with jitter, at least the endpoint's Retry-After), and
 * the parsing of Retry-After. The clock is a parameter so tests can fake it. */
#ifndef OPFORGE_LLM_RETRY_H
#define OPFORGE_LLM_RETRY_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

struct llm_retry_policy {
  unsigned retries;         /* retries after the first attempt */
  unsigned backoff_ms;      /* base delay of the first retry */
  unsigned max_backoff_ms;  /* cap of one computed delay */
  unsigned max_wait_ms;     /* a Retry-After longer than this is not waited for */
};

/* Time as the client sees it: the wall clock (for Retry-After dates) and sleeping. */
struct llm_clock {
  time_t (*now)(void *ctx);
  void (*sleep_ms)(void *ctx, long ms);
  void *ctx;
};

/* The real clock (time(), nanosleep). Static storage. */
const struct llm_clock *llm_clock_real(void);

/* Whether an HTTP status is worth retrying: 429 and 5xx. */
bool llm_status_retryable(long http_status);

/* The delay before retry number attempt (0 for the first retry) in ms: base * 2^attempt,
 * capped, with "equal jitter" (half fixed, half drawn from *rng, a xorshift state that
 * must not be 0), and never less than retry_after_ms (-1 when the endpoint sent none).
 * Returns -1 when no retry should be made: attempt >= retries, or a Retry-After beyond
 * the policy's max_wait_ms. */
long llm_retry_delay_ms(const struct llm_retry_policy *p, unsigned attempt, long retry_after_ms,
                        uint64_t *rng);

/* Parses a Retry-After value (RFC 9110: delay-seconds, or an HTTP-date such as "Sun, 06
 * Nov 1994 08:49:37 GMT") against now into *ret_ms (0 for a date in the past). Returns
 * 0, or -1 for anything else (then the header is ignored). */
int llm_parse_retry_after(const char *value, time_t now, long *ret_ms);

/* Advances the xorshift state and returns the next number. */
uint64_t llm_rng_next(uint64_t *state);

#endif
