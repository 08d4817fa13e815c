/* The one table of API error codes: each code, its HTTP status, and its text name. */
#ifndef OPFORGE_ERRORS_H
#define OPFORGE_ERRORS_H

/* Keep in the same order as the table in errors.c and the ErrorCode enum in
 * openapi/openapi.yaml; tests/unit/test_errors.c checks both. */
enum api_error {
  API_ERR_BAD_JSON,            /* 400 body is not valid JSON */
  API_ERR_UNKNOWN_FIELD,       /* 400 a key the schema does not know */
  API_ERR_INVALID_FIELD,       /* 400 wrong type or out of range */
  API_ERR_MISSING_FIELD,       /* 400 a required key is absent */
  API_ERR_INVALID_REFERENCE,   /* 400 reference source fails the textual checks */
  API_ERR_INVALID_ID,          /* 400 an id in the path is malformed */
  API_ERR_INVALID_QUERY,       /* 400 a query parameter is malformed */
  API_ERR_INVALID_CURSOR,      /* 400 a paging cursor is malformed */
  API_ERR_UNAUTHORIZED,        /* 401 no bearer token on a write */
  API_ERR_FORBIDDEN,           /* 403 wrong bearer token */
  API_ERR_NOT_FOUND,           /* 404 no such route */
  API_ERR_TASK_NOT_FOUND,      /* 404 no such task */
  API_ERR_CANDIDATE_NOT_FOUND, /* 404 no such candidate */
  API_ERR_METHOD_NOT_ALLOWED,  /* 405 route exists, method does not */
  API_ERR_TASK_FINISHED,       /* 409 the task is already in a final state */
  API_ERR_TASK_RUNNING,        /* 409 the task must be cancelled before deletion */
  API_ERR_CONFLICT,            /* 409 other state conflicts */
  API_ERR_BODY_TOO_LARGE,      /* 413 body over the configured cap */
  API_ERR_URL_TOO_LONG,        /* 414 request URL over the cap */
  API_ERR_UNSUPPORTED_MEDIA,   /* 415 body is not application/json */
  API_ERR_TOO_MANY_REQUESTS,   /* 429 a per-client limit tripped */
  API_ERR_INTERNAL,            /* 500 a bug or an I/O failure; logged */
  API_ERR_STORE_BUSY,          /* 503 the store stayed locked past its retries */
  API_ERR_INSUFFICIENT_STORAGE, /* 507 the disk holding the store is full */
  API_ERR_NOT_READY,           /* 503 store closed or migrations missing */
  API_ERR_SHUTTING_DOWN,       /* 503 the server is stopping */
  API_ERR_MEMORY_NOT_FOUND,    /* 404 no such memory node (global or local) */
  API_ERR_EDGE_NOT_FOUND,      /* 404 no such memory edge */
  API_ERR_HAS_CHILDREN,        /* 409 the global node still has local nodes */
  API_ERR_ALREADY_EXISTS,      /* 409 a memory node or edge with this id exists */
  API_ERR_INVALID_IMPORT,      /* 400 a memory import document is refused */
  API_ERR_NO_CORRECT_CANDIDATE, /* 409 the task has no correct candidate to export */
  API_ERR_NOT_PURE,            /* 409 pure=true, but the best program runs library steps */
  API_ERR_NO_GENERATED_CANDIDATE, /* 409 generated=true, but no correct candidate has any */
  API_ERR_NO_ELEMENTWISE_CANDIDATE, /* 409 elementwise=true, but every correct one needed the
                                       float64 accuracy budget */
  API_ERR_SKILL_NOT_FOUND,     /* 404 no such skill rule */
  API_ERR_TASK_NOT_FINISHED,   /* 409 the task has not finished yet */
  API_ERR_NAMESPACE_NOT_FOUND, /* 404 no such memory namespace */
  API_ERR_CROSS_SITE_REFUSED,  /* 403 a write from an origin that is not allowed */
  API_ERR_HOST_NOT_ALLOWED,    /* 421 the Host header names no address of this server */
  API_ERR_INVALID_HEADER,      /* 400 the request head is malformed or its framing ambiguous */
  API_ERR_NOT_EXPORTABLE,      /* 409 the best candidate cannot be written in the format asked */
  API_ERR_IDEMPOTENCY_CONFLICT, /* 409 an Idempotency-Key already names another submission */
  API_ERR_STORE_UNAVAILABLE,   /* 503 the database server (PostgreSQL) cannot be reached */
  API_ERR__COUNT
};

/* Static description of one code. */
struct api_error_info {
  const char *code;   /* stable snake_case name sent to clients */
  unsigned status;    /* HTTP status */
};

/* Returns the table entry for err (static storage; never NULL for a valid err). */
const struct api_error_info *api_error_info(enum api_error err);

/* Looks a code up by name; returns API_ERR__COUNT when unknown. */
enum api_error api_error_from_code(const char *code);

#endif
