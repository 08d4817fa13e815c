/* Helpers shared by the resource handlers: store failures, id parameters. */
#include <ctype.h>

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
    return reply_error(req, API_ERR_STORE_BUSY, NULL, "the store is busy; retry shortly");
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
