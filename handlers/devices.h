/* GET /v1/devices: every GPU slot with its evaluator's state. */
#ifndef OPFORGE_HANDLERS_DEVICES_H
#define OPFORGE_HANDLERS_DEVICES_H

#include "server/request.h"

/* Answers 200 {"devices":[{"index","name","capability","memory_bytes","state","restarts",
 * "current_task"},...]} from req->app->supervisors ({"devices":[]} when the server runs
 * without evaluators), or 500 internal when out of memory. */
enum MHD_Result handle_devices_list(struct request *req);

#endif
