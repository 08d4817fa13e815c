/* GET /v1/tasks/{id}/candidates and GET /v1/candidates/{id}. */
#ifndef OPFORGE_HANDLERS_CANDIDATES_H
#define OPFORGE_HANDLERS_CANDIDATES_H

#include "server/request.h"

enum MHD_Result handle_task_candidates(struct request *req);
enum MHD_Result handle_candidate_get(struct request *req);

#endif
