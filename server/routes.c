/* The route table: every endpoint of the API, matched in order by server/router.c. */
#include "handlers/handlers.h"
#include "handlers/candidates.h"
#include "handlers/devices.h"
#include "handlers/memory.h"
#include "handlers/memory_score.h"
#include "handlers/servers.h"
#include "handlers/skills.h"
#include "handlers/task_best.h"
#include "handlers/ui.h"
#include "server/router.h"

const struct route opforge_routes[] = {
  {.method = "POST", .pattern = "/v1/tasks", .handler = handle_tasks_create},
  {.method = "GET", .pattern = "/v1/tasks", .handler = handle_tasks_list},
  {.method = "GET", .pattern = "/v1/tasks/{id}", .handler = handle_task_get},
  {.method = "DELETE", .pattern = "/v1/tasks/{id}", .handler = handle_task_delete},
  {.method = "POST", .pattern = "/v1/tasks/{id}/cancel", .handler = handle_task_cancel},
  {.method = "GET", .pattern = "/v1/tasks/{id}/events", .handler = handle_task_events},
  {.method = "GET", .pattern = "/v1/tasks/{id}/candidates", .handler = handle_task_candidates},
  {.method = "GET", .pattern = "/v1/candidates/{id}", .handler = handle_candidate_get},
  {.method = "GET", .pattern = "/v1/devices", .handler = handle_devices_list},
  {.method = "GET", .pattern = "/v1/servers", .handler = handle_servers_list},
  {.method = "GET", .pattern = "/healthz", .handler = handle_healthz},
  {.method = "GET", .pattern = "/readyz", .handler = handle_readyz},
  {.method = "GET", .pattern = "/metrics", .handler = handle_metrics},
  {.method = "GET", .pattern = "/openapi.json", .handler = handle_openapi},
  {.method = "GET", .pattern = "/v1/memory/global", .handler = handle_memory_global_list},
  {.method = "POST", .pattern = "/v1/memory/global", .handler = handle_memory_global_create},
  {.method = "GET", .pattern = "/v1/memory/global/{id}", .handler = handle_memory_global_get},
  {.method = "PATCH", .pattern = "/v1/memory/global/{id}", .handler = handle_memory_global_update},
  {.method = "DELETE", .pattern = "/v1/memory/global/{id}", .handler = handle_memory_global_delete},
  {.method = "GET", .pattern = "/v1/memory/global/{id}/local", .handler = handle_memory_local_list},
  {.method = "POST", .pattern = "/v1/memory/global/{id}/local", .handler = handle_memory_local_create},
  {.method = "GET", .pattern = "/v1/memory/local/{id}", .handler = handle_memory_local_get},
  {.method = "PATCH", .pattern = "/v1/memory/local/{id}", .handler = handle_memory_local_update},
  {.method = "DELETE", .pattern = "/v1/memory/local/{id}", .handler = handle_memory_local_delete},
  {.method = "GET", .pattern = "/v1/memory/edges", .handler = handle_memory_edges_list},
  {.method = "POST", .pattern = "/v1/memory/edges", .handler = handle_memory_edge_create},
  {.method = "GET", .pattern = "/v1/memory/edges/{from}/{to}", .handler = handle_memory_edge_get},
  {.method = "PATCH", .pattern = "/v1/memory/edges/{from}/{to}", .handler = handle_memory_edge_update},
  {.method = "DELETE", .pattern = "/v1/memory/edges/{from}/{to}", .handler = handle_memory_edge_delete},
  {.method = "GET", .pattern = "/v1/memory/export", .handler = handle_memory_export},
  {.method = "GET", .pattern = "/v1/memory/score", .handler = handle_memory_score},
  {.method = "POST", .pattern = "/v1/memory/import", .handler = handle_memory_import},
  {.method = "POST", .pattern = "/v1/memory/reset", .handler = handle_memory_reset},
  {.method = "GET", .pattern = "/v1/memory/namespaces", .handler = handle_memory_namespaces_list},
  {.method = "POST", .pattern = "/v1/memory/namespaces", .handler = handle_memory_namespace_create},
  {.method = "GET", .pattern = "/v1/memory/namespaces/{name}", .handler = handle_memory_namespace_get},
  {.method = "DELETE", .pattern = "/v1/memory/namespaces/{name}", .handler = handle_memory_namespace_delete},
  {.method = "GET", .pattern = "/v1/tasks/{id}/best", .handler = handle_task_best},
  {.method = "GET", .pattern = "/v1/skills", .handler = handle_skills_list},
  {.method = "POST", .pattern = "/v1/skills", .handler = handle_skill_create},
  {.method = "GET", .pattern = "/v1/skills/export", .handler = handle_skills_export},
  {.method = "POST", .pattern = "/v1/skills/import", .handler = handle_skills_import},
  {.method = "POST", .pattern = "/v1/skills/adapt", .handler = handle_skills_adapt},
  {.method = "GET", .pattern = "/v1/skills/{id}", .handler = handle_skill_get},
  {.method = "PATCH", .pattern = "/v1/skills/{id}", .handler = handle_skill_update},
  {.method = "DELETE", .pattern = "/v1/skills/{id}", .handler = handle_skill_delete},
  {.method = "GET", .pattern = "/ui", .handler = handle_ui_redirect},
  {.method = "GET", .pattern = "/ui/", .handler = handle_ui_index},
  {.method = "GET", .pattern = "/ui/{file}", .handler = handle_ui_file},
  {.method = NULL},
};
