/* The retry policy of LLM requests (see retry.h). */
#include "proposers/llm/retry.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static time_t real_now(void *ctx) {
  (void)ctx;
  return time(NULL);
}

static void real_sleep(void *ctx, long ms) {
  (void)ctx;
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

const struct llm_clock *llm_clock_real(void) {
  static const struct llm_clock real = {real_now, real_sleep, NULL};
  return &real;
}

bool llm_status_retryable(long http_status) {
  return http_status == 429 || (http_status >= 500 && http_status <= 599);
}

uint64_t llm_rng_next(uint64_t *state) {
  uint64_t x = *state ? *state : 0x9e3779b97f4a7c15ull;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}

long llm_retry_delay_ms(const struct llm_retry_policy *p, unsigned attempt, long retry_after_ms,
                        uint64_t *rng) {
  if (attempt >= p->retries)
    return -1;
  if (retry_after_ms > (long)p->max_wait_ms)
    return -1;
  unsigned long long base = p->backoff_ms ? p->backoff_ms : 1;
  for (unsigned i = 0; i < attempt && base < p->max_backoff_ms; i++)
    base *= 2;
  if (base > p->max_backoff_ms)
    base = p->max_backoff_ms;
  unsigned long long half = base / 2;
  long delay = (long)(base - half + llm_rng_next(rng) % (half + 1));
  return retry_after_ms > delay ? retry_after_ms : delay;
}

/* Parses "Sun, 06 Nov 1994 08:49:37 GMT" (IMF-fixdate, the form RFC 9110 requires
 * senders to use) into seconds since the epoch. */
static int parse_http_date(const char *v, time_t *ret) {
  struct tm tm;
  memset(&tm, 0, sizeof tm);
  const char *end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (!end || *end)
    return -1;
  time_t t = timegm(&tm);
  if (t == (time_t)-1)
    return -1;
  *ret = t;
  return 0;
}

int llm_parse_retry_after(const char *value, time_t now, long *ret_ms) {
  if (!value)
    return -1;
  while (*value == ' ' || *value == '\t')
    value++;
  size_t len = strlen(value);
  while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t'))
    len--;
  char v[64];
  if (len == 0 || len >= sizeof v)
    return -1;
  memcpy(v, value, len);
  v[len] = '\0';
  if (isdigit((unsigned char)v[0])) {
    errno = 0;
    char *end = NULL;
    unsigned long long s = strtoull(v, &end, 10);
    if (errno || *end || s > 86400ull * 365)
      return -1;
    *ret_ms = (long)(s * 1000);
    return 0;
  }
  time_t at;
  if (parse_http_date(v, &at) != 0)
    return -1;
  double ahead = difftime(at, now);
  *ret_ms = ahead > 0 ? (long)(ahead > 86400.0 * 365 ? 86400.0 * 365 * 1000 : ahead * 1000) : 0;
  return 0;
}
