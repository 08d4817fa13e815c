/* On-disk cubin cache. Entry file <dir>/<key>.cubin:
 *   "OFGCUBIN1\n" | u64 log_len | u64 cubin_len | sha256(log || cubin) | log | cubin
 * (little-endian); the digest turns a torn or tampered file into a miss. */
#include "gpu/cubin_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "OFGCUBIN1\n"
#define MAGIC_LEN 10
#define HEADER_LEN (MAGIC_LEN + 8 + 8 + SHA256_DIGEST_BYTES)

struct cubin_cache {
  char *dir;
  atomic_ulong hits;
  atomic_ulong misses;
  atomic_ulong tmp_counter;
};

/* mkdir -p with mode 0700 for the directories it creates. */
static int make_dirs(const char *path) {
  char *p = strdup(path);
  if (!p)
    return -1;
  for (char *s = p + 1; *s; s++) {
    if (*s != '/')
      continue;
    *s = '\0';
    if (mkdir(p, 0700) < 0 && errno != EEXIST) {
      free(p);
      return -1;
    }
    *s = '/';
  }
  int rc = mkdir(p, 0700) < 0 && errno != EEXIST ? -1 : 0;
  free(p);
  return rc;
}

int cubin_cache_open(const char *dir, struct cubin_cache **ret_cache, char *err,
                     size_t errlen) {
  struct stat st;
  if (!dir || !*dir) {
    snprintf(err, errlen, "cache directory is empty");
    return -1;
  }
  if (make_dirs(dir) < 0 || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
    snprintf(err, errlen, "cannot create cache directory %s: %s", dir, strerror(errno));
    return -1;
  }
  struct cubin_cache *c = calloc(1, sizeof *c);
  if (!c || !(c->dir = strdup(dir))) {
    free(c);
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  atomic_init(&c->hits, 0);
  atomic_init(&c->misses, 0);
  atomic_init(&c->tmp_counter, 0);
  *ret_cache = c;
  return 0;
}

void cubin_cache_free(struct cubin_cache *cache) {
  if (!cache)
    return;
  free(cache->dir);
  free(cache);
}

void cubin_cache_key(const char *source, const char *const *options, size_t n_options,
                     const char *arch, char ret_hex[SHA256_HEX_BYTES]) {
  struct sha256_ctx ctx;
  uint8_t digest[SHA256_DIGEST_BYTES];
  sha256_init(&ctx);
  sha256_update(&ctx, source, strlen(source) + 1);
  for (size_t i = 0; i < n_options; i++) {
    sha256_update(&ctx, options[i], strlen(options[i]));
    sha256_update(&ctx, "\n", 1);
  }
  sha256_update(&ctx, "", 1);
  sha256_update(&ctx, arch, strlen(arch));
  sha256_final(&ctx, digest);
  sha256_to_hex(digest, ret_hex);
}

static void put_u64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_u64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

static void payload_digest(const char *log, size_t log_len, const void *cubin, size_t bytes,
                           uint8_t ret[SHA256_DIGEST_BYTES]) {
  struct sha256_ctx ctx;
  sha256_init(&ctx);
  sha256_update(&ctx, log, log_len);
  sha256_update(&ctx, cubin, bytes);
  sha256_final(&ctx, ret);
}

/* Keys are our own hex digests; refusing anything else keeps paths inside dir. */
static int entry_path(const struct cubin_cache *c, const char *key, char *out, size_t outlen) {
  if (strlen(key) != SHA256_HEX_BYTES - 1 || strspn(key, "0123456789abcdef") != strlen(key))
    return -1;
  int n = snprintf(out, outlen, "%s/%s.cubin", c->dir, key);
  return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

/* Reads the whole file at path (at most CUBIN_CACHE_MAX_ENTRY bytes). */
static uint8_t *read_file(const char *path, size_t *ret_len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0)
    return NULL;
  uint8_t *buf = NULL;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= HEADER_LEN &&
      (uint64_t)st.st_size <= CUBIN_CACHE_MAX_ENTRY && (buf = malloc((size_t)st.st_size))) {
    size_t got = 0;
    while (got < (size_t)st.st_size) {
      ssize_t r = read(fd, buf + got, (size_t)st.st_size - got);
      if (r < 0 && errno == EINTR)
        continue;
      if (r <= 0)
        break;
      got += (size_t)r;
    }
    if (got == (size_t)st.st_size) {
      *ret_len = got;
    } else {
      free(buf);
      buf = NULL;
    }
  }
  close(fd);
  return buf;
}

/* Splits a file image into log and cubin copies; -1 when malformed. */
static int decode_entry(const uint8_t *buf, size_t len, void **ret_cubin, size_t *ret_bytes,
                        char **ret_log) {
  if (memcmp(buf, MAGIC, MAGIC_LEN) != 0)
    return -1;
  uint64_t log_len = get_u64(buf + MAGIC_LEN), cubin_len = get_u64(buf + MAGIC_LEN + 8);
  if (log_len > len - HEADER_LEN || cubin_len != len - HEADER_LEN - log_len || cubin_len == 0)
    return -1;
  const char *log = (const char *)buf + HEADER_LEN;
  const uint8_t *cubin = buf + HEADER_LEN + log_len;
  uint8_t digest[SHA256_DIGEST_BYTES];
  payload_digest(log, log_len, cubin, cubin_len, digest);
  if (memcmp(digest, buf + MAGIC_LEN + 16, SHA256_DIGEST_BYTES) != 0 ||
      memchr(log, '\0', log_len))
    return -1;
  char *l = malloc(log_len + 1);
  void *c = malloc(cubin_len);
  if (!l || !c) {
    free(l);
    free(c);
    return -1;
  }
  memcpy(l, log, log_len);
  l[log_len] = '\0';
  memcpy(c, cubin, cubin_len);
  *ret_log = l;
  *ret_cubin = c;
  *ret_bytes = cubin_len;
  return 0;
}

int cubin_cache_get(struct cubin_cache *cache, const char *key, void **ret_cubin,
                    size_t *ret_bytes, char **ret_log) {
  char path[4096];
  size_t len = 0;
  uint8_t *buf = NULL;
  int hit = 0;
  if (entry_path(cache, key, path, sizeof path) == 0 && (buf = read_file(path, &len)))
    hit = decode_entry(buf, len, ret_cubin, ret_bytes, ret_log) == 0;
  free(buf);
  atomic_fetch_add(hit ? &cache->hits : &cache->misses, 1);
  return hit;
}

static int write_all(int fd, const void *data, size_t len) {
  const uint8_t *p = data;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return -1;
    p += w;
    len -= (size_t)w;
  }
  return 0;
}

int cubin_cache_put(struct cubin_cache *cache, const char *key, const void *cubin,
                    size_t bytes, const char *log) {
  char path[4096], tmp[4200];
  size_t log_len = strlen(log);
  if (bytes == 0 || log_len > CUBIN_CACHE_MAX_ENTRY - HEADER_LEN ||
      bytes > CUBIN_CACHE_MAX_ENTRY - HEADER_LEN - log_len ||
      entry_path(cache, key, path, sizeof path) < 0) {
    errno = EINVAL;
    return -1;
  }
  unsigned long n = atomic_fetch_add(&cache->tmp_counter, 1);
  snprintf(tmp, sizeof tmp, "%s/.tmp.%s.%ld.%lu", cache->dir, key, (long)getpid(), n);
  uint8_t header[HEADER_LEN];
  memcpy(header, MAGIC, MAGIC_LEN);
  put_u64(header + MAGIC_LEN, log_len);
  put_u64(header + MAGIC_LEN + 8, bytes);
  payload_digest(log, log_len, cubin, bytes, header + MAGIC_LEN + 16);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return -1;
  int rc = write_all(fd, header, sizeof header) == 0 && write_all(fd, log, log_len) == 0 &&
                   write_all(fd, cubin, bytes) == 0
               ? 0
               : -1;
  int saved = errno;
  if (close(fd) < 0 && rc == 0) {
    rc = -1;
    saved = errno;
  }
  if (rc == 0 && rename(tmp, path) < 0) {
    rc = -1;
    saved = errno;
  }
  if (rc < 0) {
    unlink(tmp);
    errno = saved;
  }
  return rc;
}

unsigned long cubin_cache_hits(const struct cubin_cache *cache) {
  return atomic_load(&((struct cubin_cache *)cache)->hits);
}

unsigned long cubin_cache_misses(const struct cubin_cache *cache) {
  return atomic_load(&((struct cubin_cache *)cache)->misses);
}

const char *cubin_cache_dir(const struct cubin_cache *cache) {
  return cache->dir;
}
