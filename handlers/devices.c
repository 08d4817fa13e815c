/* GET /v1/devices: a snapshot of the supervisor pool (gpu/supervisor.h). */
#include "handlers/devices.h"

#include "gpu/supervisor.h"
#include "server/app.h"
#include "server/reply.h"

enum MHD_Result handle_devices_list(struct request *req) {
  json_t *body = supervisor_pool_describe(req->app->supervisors);
  if (!body)
    return reply_error(req, API_ERR_INTERNAL, NULL, "out of memory listing devices");
  return reply_json(req, 200, body);
}
