/* Helpers shared by the resource handlers: store failures, id parameters, integers. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "handlers/handlers.h"
#include "base/ids.h"
#include "server/reply.h"
#include "store/status.h"

enum MHD_Result reply_store_failure(struct request *req, int store_rc,
                                    enum api_error not_found_code) {
  switch (store_rc) {
  case STORE_NOT_FOUND:
    return reply_error(req, not_found_code, NULL, "no such resource");
  case STORE_BUSY:
    return reply_error_with_header(req, API_ERR_STORE_BUSY, "Retry-After", "1",
                                   "the store is busy; retry shortly");
  case STORE_UNAVAILABLE:
    return reply_error_with_header(req, API_ERR_STORE_UNAVAILABLE, "Retry-After", "5",
                                   "the database server cannot be reached; nothing was "
                                   "changed; retry shortly");
  case STORE_FULL:
    return reply_error(req, API_ERR_INSUFFICIENT_STORAGE, NULL,
                       "the disk holding the store is full: nothing was written; free "
                       "space on it and retry");
  default:
    return reply_error(req, API_ERR_INTERNAL, NULL, "internal store error");
  }
}

const char *require_id_param(struct request *req, unsigned index, const char *name,
                             enum MHD_Result *ret_result) {
  char *id = index < req->n_params ? req->params[index] : NULL;
  if (id_valid(id)) {
    for (char *c = id; *c; c++)  /* ids are stored lowercase */
      *c = (char)tolower((unsigned char)*c);
    return id;
  }
  *ret_result = reply_error(req, API_ERR_INVALID_ID, name, "%s must be a UUID", name);
  return NULL;
}

bool parse_decimal(const char *text, long long lo, long long hi, long long *ret_value) {
  size_t n = text ? strspn(text, "0123456789") : 0;
  if (n == 0 || text[n] != '\0' || n > 19 || (n > 1 && text[0] == '0'))
    return false;
  errno = 0;
  long long v = strtoll(text, NULL, 10);
  if (errno || v < lo || v > hi)
    return false;
  *ret_value = v;
  return true;
}

int query_integer(struct request *req, const char *key, long long lo, long long hi,
                  long long fallback, long long *ret_value, enum MHD_Result *ret_result) {
  const char *text = request_query(req, key);
  if (!text) {
    *ret_value = fallback;
    return 0;
  }
  if (!parse_decimal(text, lo, hi, ret_value)) {
    *ret_result = reply_error(req, API_ERR_INVALID_QUERY, key,
                              "%s must be an integer from %lld to %lld", key, lo, hi);
    return -1;
  }
  return 0;
}
