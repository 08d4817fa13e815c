/* SHA-256 (FIPS 180-4), used for cubin cache keys; no external crypto library needed. */
#ifndef OPFORGE_GPU_SHA256_H
#define OPFORGE_GPU_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_BYTES 32
#define SHA256_HEX_BYTES 65 /* 64 hex digits and the terminating NUL */

/* Streaming state; plain value, no resources, so it needs no destructor. */
struct sha256_ctx {
  uint32_t state[8];
  uint64_t total_bytes;
  uint8_t block[64];
  size_t block_used;
};

/* Starts a digest in ctx (caller-owned storage). */
void sha256_init(struct sha256_ctx *ctx);
/* Feeds len bytes of data (data may be NULL when len is 0). */
void sha256_update(struct sha256_ctx *ctx, const void *data, size_t len);
/* Writes the digest into ret_digest; ctx must be re-initialized before reuse. */
void sha256_final(struct sha256_ctx *ctx, uint8_t ret_digest[SHA256_DIGEST_BYTES]);
/* One-shot digest of data, written as lower-case hex into ret_hex (NUL-terminated). */
void sha256_hex(const void *data, size_t len, char ret_hex[SHA256_HEX_BYTES]);
/* Formats a finished digest as lower-case hex. */
void sha256_to_hex(const uint8_t digest[SHA256_DIGEST_BYTES], char ret_hex[SHA256_HEX_BYTES]);

#endif
