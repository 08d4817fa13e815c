/* Seeded pseudo-random numbers for the search (xoshiro256**, seeded by splitmix64). */
#ifndef OPFORGE_RNG_H
#define OPFORGE_RNG_H

#include <stddef.h>
#include <stdint.h>

/* Generator state: plain data, copyable, no ownership. The four words are the whole
 * state, so a caller may persist and restore them to continue a stream exactly. */
struct rng {
  uint64_t s[4];
};

/* Seeds *r from seed (splitmix64 expands it to four nonzero-on-average words). */
void rng_seed(struct rng *r, uint64_t seed);

/* Seeds *r for one of many independent streams of one seed, e.g. (task seed, step
 * number): resuming a task at step t re-creates its stream without stored state. */
void rng_seed_stream(struct rng *r, uint64_t seed, uint64_t stream);

/* Next 64 random bits. */
uint64_t rng_next(struct rng *r);

/* Uniform double in [0, 1) with 53 random bits. */
double rng_uniform(struct rng *r);

/* Draws an index from the categorical distribution with weights p[0..n-1] (need not sum
 * to 1; each must be finite and >= 0, and their sum > 0). Consumes exactly one
 * rng_uniform draw. Returns 0 and sets *ret_index, or -EINVAL (nothing drawn). */
int rng_categorical(struct rng *r, const double *p, size_t n, size_t *ret_index);

#endif
