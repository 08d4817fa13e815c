/* Entry points of the /v1/memory handlers (the HTAM memory graph), and the helpers they
 * share; the route table (server/routes.c) uses the entry points. */
#ifndef OPFORGE_HANDLERS_MEMORY_H
#define OPFORGE_HANDLERS_MEMORY_H

#include <jansson.h>

#include "base/errors.h"
#include "server/request.h"
#include "store/memory.h"

/* handlers/memory_global.c: /v1/memory/global[/{id}] */
enum MHD_Result handle_memory_global_list(struct request *req);
enum MHD_Result handle_memory_global_create(struct request *req);
enum MHD_Result handle_memory_global_get(struct request *req);
enum MHD_Result handle_memory_global_update(struct request *req);
enum MHD_Result handle_memory_global_delete(struct request *req);

/* handlers/memory_local.c: /v1/memory/global/{id}/local, /v1/memory/local/{id} */
enum MHD_Result handle_memory_local_list(struct request *req);
enum MHD_Result handle_memory_local_create(struct request *req);
enum MHD_Result handle_memory_local_get(struct request *req);
enum MHD_Result handle_memory_local_update(struct request *req);
enum MHD_Result handle_memory_local_delete(struct request *req);

/* handlers/memory_edges.c: /v1/memory/edges[/{from}/{to}] */
enum MHD_Result handle_memory_edges_list(struct request *req);
enum MHD_Result handle_memory_edge_create(struct request *req);
enum MHD_Result handle_memory_edge_get(struct request *req);
enum MHD_Result handle_memory_edge_update(struct request *req);
enum MHD_Result handle_memory_edge_delete(struct request *req);

/* handlers/memory_io.c: /v1/memory/export, /v1/memory/import, /v1/memory/reset */
enum MHD_Result handle_memory_export(struct request *req);
enum MHD_Result handle_memory_import(struct request *req);
enum MHD_Result handle_memory_reset(struct request *req);

/* handlers/memory_namespaces.c: /v1/memory/namespaces[/{name}] */
enum MHD_Result handle_memory_namespaces_list(struct request *req);
enum MHD_Result handle_memory_namespace_create(struct request *req);
enum MHD_Result handle_memory_namespace_get(struct request *req);
enum MHD_Result handle_memory_namespace_delete(struct request *req);

/* ---- handlers/memory_common.c ---- */

/* A memory_check_* function. */
typedef int (*memory_check_fn)(const json_t *obj, enum memory_mode mode, const char *prefix,
                               struct memory_invalid *ret_why);

/* The namespace a /v1/memory request works on: ?memory=NAME, "default" when absent.
 * Returns it (borrowed from the request), or queues 400 invalid_query (a malformed name)
 * or 404 memory_namespace_not_found (no such namespace) and returns NULL (the caller
 * returns *ret_result). */
const char *memory_require_namespace(struct request *req, enum MHD_Result *ret_result);

/* req->params[index] when it is a node id (^[a-z][a-z0-9_]{1,63}$); else queues 400
 * invalid_id naming the parameter and returns NULL (the caller returns *ret_result). */
const char *memory_require_id(struct request *req, unsigned index, const char *name,
                              enum MHD_Result *ret_result);

/* Parses the body as a JSON object and checks it with check in mode. Returns it (caller
 * owns), or queues the 400 (bad_json, unknown_field, invalid_field, missing_field, with
 * the field) and returns NULL (the caller returns *ret_result). */
json_t *memory_parse_body(struct request *req, memory_check_fn check, enum memory_mode mode,
                          enum MHD_Result *ret_result);

/* Queues the error for a refused memory write: a reference to nothing 404
 * memory_node_not_found, a duplicate 409 already_exists, and the field problems 400
 * (unknown_field, missing_field, invalid_field). */
enum MHD_Result memory_reply_invalid(struct request *req, const struct memory_invalid *why);

/* Answers a failed store call: STORE_NOT_FOUND as not_found with the printf message
 * (which names what is missing), anything else as reply_store_failure does. */
enum MHD_Result memory_reply_failure(struct request *req, int store_rc,
                                     enum api_error not_found, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Queues 201 with record (taken over) and a Location header built from the printf
 * format (at most 256 bytes). */
enum MHD_Result memory_reply_created(struct request *req, json_t *record, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
