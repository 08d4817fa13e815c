/* On-disk cubin cache: one file per compile, keyed by sha256 of what determines it. */
#ifndef OPFORGE_GPU_CUBIN_CACHE_H
#define OPFORGE_GPU_CUBIN_CACHE_H

#include <stddef.h>

#include "base/sha256.h"

/* Entries larger than this are neither written nor read. */
#define CUBIN_CACHE_MAX_ENTRY (64u << 20)

struct cubin_cache;

/* Opens (creating with mode 0700 if needed, parents included) the cache directory dir.
 * The caller frees the cache with cubin_cache_free. Returns 0, or -1 with err filled. */
int cubin_cache_open(const char *dir, struct cubin_cache **ret_cache, char *err,
                     size_t errlen);
/* Frees the handle (the directory stays); accepts NULL. */
void cubin_cache_free(struct cubin_cache *cache);

/* Key of a compile: sha256(source \0 options each followed by \n \0 arch). Options come
 * from the allow-list, which admits no newline, so the encoding is unambiguous. */
void cubin_cache_key(const char *source, const char *const *options, size_t n_options,
                     const char *arch, char ret_hex[SHA256_HEX_BYTES]);

/* Looks key up. On a hit returns 1 and sets *ret_cubin / *ret_bytes / *ret_log
 * (malloc'd, caller frees both). On a miss returns 0 and sets nothing. A missing,
 * truncated or corrupt entry is a miss. Counts the hit or the miss. */
int cubin_cache_get(struct cubin_cache *cache, const char *key, void **ret_cubin,
                    size_t *ret_bytes, char **ret_log);
/* Stores an entry atomically (temporary file, then rename), so concurrent readers see
 * the old entry or the whole new one. Borrows all arguments. Returns 0 or -1 (errno). */
int cubin_cache_put(struct cubin_cache *cache, const char *key, const void *cubin,
                    size_t bytes, const char *log);

/* Lookups that hit / missed since open (thread-safe counters); the directory (borrowed,
 * lives as long as cache). */
unsigned long cubin_cache_hits(const struct cubin_cache *cache);
unsigned long cubin_cache_misses(const struct cubin_cache *cache);
const char *cubin_cache_dir(const struct cubin_cache *cache);

#endif
