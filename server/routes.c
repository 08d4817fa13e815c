/* The route table: every endpoint of the API, matched in order by server/router.c. */
#include "handlers/handlers.h"
#include "server/router.h"

const struct route opforge_routes[] = {
  {.method = "POST", .pattern = "/v1/tasks", .handler = handle_tasks_create},
  {.method = "GET", .pattern = "/v1/tasks", .handler = handle_tasks_list},
  {.method = "GET", .pattern = "/v1/tasks/{id}", .handler = handle_task_get},
  {.method = "DELETE", .pattern = "/v1/tasks/{id}", .handler = handle_task_delete},
  {.method = "POST", .pattern = "/v1/tasks/{id}/cancel", .handler = handle_task_cancel},
  {.method = "GET", .pattern = "/v1/tasks/{id}/events", .handler = handle_task_events},
  {.method = "GET", .pattern = "/healthz", .handler = handle_healthz},
  {.method = "GET", .pattern = "/readyz", .handler = handle_readyz},
  {.method = "GET", .pattern = "/metrics", .handler = handle_metrics},
  {.method = "GET", .pattern = "/openapi.json", .handler = handle_openapi},
  {.method = NULL},
};
