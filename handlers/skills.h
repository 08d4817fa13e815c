/* Entry points of the /v1/skills handlers (the skill memory's rules); the route table
 * (server/routes.c) uses them. Bodies are checked as the memory's are
 * (handlers/memory.h): the same error codes, and field naming the JSON path. */
#ifndef OPFORGE_HANDLERS_SKILLS_H
#define OPFORGE_HANDLERS_SKILLS_H

#include "server/request.h"

/* handlers/skills.c: /v1/skills[/{id}] */
enum MHD_Result handle_skills_list(struct request *req);
enum MHD_Result handle_skill_create(struct request *req);
enum MHD_Result handle_skill_get(struct request *req);
enum MHD_Result handle_skill_update(struct request *req);
enum MHD_Result handle_skill_delete(struct request *req);

/* handlers/skills_io.c: /v1/skills/export, /v1/skills/import, /v1/skills/adapt */
enum MHD_Result handle_skills_export(struct request *req);
enum MHD_Result handle_skills_import(struct request *req);
enum MHD_Result handle_skills_adapt(struct request *req);

#endif
