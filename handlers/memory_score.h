/* GET /v1/memory/score: every term of the HTAM score and the policy, for checking by hand. */
#ifndef OPFORGE_HANDLERS_MEMORY_SCORE_H
#define OPFORGE_HANDLERS_MEMORY_SCORE_H

#include "server/request.h"

enum MHD_Result handle_memory_score(struct request *req);

#endif
