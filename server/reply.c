/* Queueing responses: JSON bodies, the one error shape, empty replies; the CORS and
 * Connection headers the admission checks asked for; answers held until the body is
 * drained. */
#include "server/reply.h"

#include "server/origin.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum MHD_Result reply_response(struct request *req, unsigned status,
                               struct MHD_Response *response) {
  if (!response)
    return MHD_NO;
  if (req->cors_origin)
    origin_add_cors_headers(response, req->cors_origin);
  if (req->close_after)
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
  req->status = status;
  req->answered = true;
  if (req->defer_replies && !req->deferred) {
    req->deferred = response;
    req->deferred_status = status;
    return MHD_YES;
  }
  enum MHD_Result ret = MHD_queue_response(req->conn, status, response);
  MHD_destroy_response(response);
  request_observe(req);
  return ret;
}

enum MHD_Result reply_deferred(struct request *req) {
  struct MHD_Response *response = req->deferred;
  req->deferred = NULL;
  req->defer_replies = false;
  if (!response)
    return MHD_YES;
  enum MHD_Result ret = MHD_queue_response(req->conn, req->deferred_status, response);
  MHD_destroy_response(response);
  request_observe(req);
  return ret;
}

enum MHD_Result reply_bytes(struct request *req, unsigned status, const char *content_type,
                            const char *data, size_t len) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);
  if (!resp)
    return MHD_NO;
  if (content_type)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  return reply_response(req, status, resp);
}

/* Serializes body and queues it, with an optional extra header. Takes over body. */
static enum MHD_Result queue_json(struct request *req, unsigned status, json_t *body,
                                  const char *header, const char *value) {
  char *text = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  if (!text)
    return MHD_NO;
  size_t len = strlen(text);
  struct MHD_Response *resp =
      MHD_create_response_from_buffer_with_free_callback(len, text, free);
  if (!resp) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
  if (header)
    MHD_add_response_header(resp, header, value);
  return reply_response(req, status, resp);
}

enum MHD_Result reply_json(struct request *req, unsigned status, json_t *body) {
  return queue_json(req, status, body, NULL, NULL);
}

enum MHD_Result reply_json_with_header(struct request *req, unsigned status, json_t *body,
                                       const char *header, const char *value) {
  return queue_json(req, status, body, header, value);
}

/* The error shape for err with the formatted message, queued with an optional header. */
static enum MHD_Result vreply_error(struct request *req, enum api_error err, const char *field,
                                    const char *header, const char *value, const char *fmt,
                                    va_list ap) __attribute__((format(printf, 6, 0)));
static enum MHD_Result vreply_error(struct request *req, enum api_error err, const char *field,
                                    const char *header, const char *value, const char *fmt,
                                    va_list ap) {
  char message[512];
  vsnprintf(message, sizeof message, fmt, ap);
  /* The field names the key at fault; the empty key ("" at the top of a body) is named
   * by its JSON pointer, "/", since the error shape's field is never empty. */
  if (field && !*field)
    field = "/";
  const struct api_error_info *info = api_error_info(err);
  json_t *body = json_pack("{s:{s:s, s:s, s:s?}}", "error", "code", info->code,
                           "message", message, "field", field);
  if (!body)
    return MHD_NO;
  return queue_json(req, info->status, body, header, value);
}

enum MHD_Result reply_error(struct request *req, enum api_error err, const char *field,
                            const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  enum MHD_Result ret = vreply_error(req, err, field, NULL, NULL, fmt, ap);
  va_end(ap);
  return ret;
}

enum MHD_Result reply_error_with_header(struct request *req, enum api_error err,
                                        const char *header, const char *value,
                                        const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  enum MHD_Result ret = vreply_error(req, err, NULL, header, value, fmt, ap);
  va_end(ap);
  return ret;
}

enum MHD_Result reply_empty(struct request *req, unsigned status) {
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
  return reply_response(req, status, resp);
}
