/* GET /v1/tasks/{id}/best: the task's best correct candidate, for use outside opforge. */
#ifndef OPFORGE_HANDLERS_TASK_BEST_H
#define OPFORGE_HANDLERS_TASK_BEST_H

#include "server/request.h"

/* ?format=cuda (the default) answers 200 application/json {"task_id","candidate_id",
 * "speedup","time_ms","source","options","plan"}; ?format=kernelbench answers 200
 * text/x-python, a file defining ModelNew (handlers/export_kernelbench.h). Any other format,
 * or a pure other than true or false, is 400 invalid_query; a malformed id 400 invalid_id;
 * an unknown task 404 task_not_found; a task without a correct candidate 409
 * no_correct_candidate; with ?pure=true, a best program that runs library steps 409
 * not_pure; a best program in format=cuda 409 conflict. */
enum MHD_Result handle_task_best(struct request *req);

#endif
