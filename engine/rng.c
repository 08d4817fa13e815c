/* Seeded pseudo-random numbers for the search (xoshiro256**, seeded by splitmix64). */
#include "engine/rng.h"

#include <errno.h>
#include <math.h>

/* splitmix64: the seeding generator recommended by xoshiro's authors, because it turns
 * any seed (0 included) into well-mixed state words. */
static uint64_t splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

void rng_seed(struct rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++)
    r->s[i] = splitmix64(&x);
  if ((r->s[0] | r->s[1] | r->s[2] | r->s[3]) == 0)
    r->s[0] = 1; /* the all-zero state is a fixed point of xoshiro */
}

void rng_seed_stream(struct rng *r, uint64_t seed, uint64_t stream) {
  uint64_t x = stream;
  rng_seed(r, seed ^ splitmix64(&x));
}

uint64_t rng_next(struct rng *r) {
  uint64_t *s = r->s;
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

double rng_uniform(struct rng *r) {
  return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

int rng_categorical(struct rng *r, const double *p, size_t n, size_t *ret_index) {
  if (!r || !p || n == 0 || !ret_index)
    return -EINVAL;
  double total = 0.0;
  for (size_t i = 0; i < n; i++) {
    if (!isfinite(p[i]) || p[i] < 0.0)
      return -EINVAL;
    total += p[i];
  }
  if (!(total > 0.0) || !isfinite(total))
    return -EINVAL;
  double u = rng_uniform(r) * total;
  double acc = 0.0;
  size_t last_positive = 0;
  for (size_t i = 0; i < n; i++) {
    if (p[i] <= 0.0)
      continue;
    last_positive = i;
    acc += p[i];
    if (u < acc) {
      *ret_index = i;
      return 0;
    }
  }
  /* Rounding can leave u just above the running sum: the last positive weight wins. */
  *ret_index = last_positive;
  return 0;
}
