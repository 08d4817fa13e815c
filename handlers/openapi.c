/* GET /openapi.json: the API description, converted from openapi/openapi.yaml at build time. */
#include "handlers/handlers.h"
#include "server/reply.h"
#include "base/embedded.h"

extern const struct embedded_file opforge_openapi[];

enum MHD_Result handle_openapi(struct request *req) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(
      opforge_openapi[0].size, (void *)opforge_openapi[0].data, MHD_RESPMEM_PERSISTENT);
  if (!resp)
    return MHD_NO;
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  return reply_response(req, 200, resp);
}
