/* Queueing responses: JSON bodies, the one error shape, empty replies. */
#ifndef OPFORGE_REPLY_H
#define OPFORGE_REPLY_H

#include <jansson.h>
#include <microhttpd.h>

#include "base/errors.h"
#include "server/request.h"

/* Queues status with body as JSON; takes over body (json_decref'd here, even on error). */
enum MHD_Result reply_json(struct request *req, unsigned status, json_t *body);

/* Like reply_json, adding one extra header (name/value are copied). */
enum MHD_Result reply_json_with_header(struct request *req, unsigned status, json_t *body,
                                       const char *header, const char *value);

/* Queues the error shape {"error":{"code","message","field"}} with the code's status.
 * field may be NULL (null); "" (the empty key) is sent as "/". The message is formatted
 * like printf and copied. */
enum MHD_Result reply_error(struct request *req, enum api_error err, const char *field,
                            const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Like reply_error (no field), adding one extra header, e.g. Retry-After. */
enum MHD_Result reply_error_with_header(struct request *req, enum api_error err,
                                        const char *header, const char *value,
                                        const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Queues a body of the given content type; the bytes are copied. */
enum MHD_Result reply_bytes(struct request *req, unsigned status, const char *content_type,
                            const char *data, size_t len);

/* Queues an empty reply (e.g. 204). */
enum MHD_Result reply_empty(struct request *req, unsigned status);

/* Queues a response built by the caller; takes over response (destroyed here). Every
 * reply_* ends here: it adds the CORS headers of req->cors_origin and Connection: close
 * when req->close_after, and while req->defer_replies is set it keeps the response in
 * req->deferred instead of queueing it (see reply_deferred). */
enum MHD_Result reply_response(struct request *req, unsigned status,
                               struct MHD_Response *response);

/* Queues the response that reply_response deferred, once the body has been drained
 * (the final access-handler call); MHD_YES when there is none. */
enum MHD_Result reply_deferred(struct request *req);

#endif
