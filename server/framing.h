/* Request framing and head syntax (RFC 9112): what a proxy in front of the server and
 * the server itself must read the same way, so that no request can be smuggled inside
 * another. A head that two readers could frame differently is refused with 400 and its
 * connection closed, before any byte of its body is read. */
#ifndef OPFORGE_FRAMING_H
#define OPFORGE_FRAMING_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

/* Why a head was refused. */
enum framing_fault {
  FRAMING_OK,
  FRAMING_REQUEST_LINE,  /* not METHOD SP target SP version: a NUL byte, a blank or a
                            control character in the target, two spaces */
  FRAMING_NUL,           /* a NUL byte in a header line */
  FRAMING_NAME,          /* a header name that is not a token (space before the colon) */
  FRAMING_VALUE,         /* a control character (CR among them) in a header value */
  FRAMING_FOLD,          /* a header line folded onto the next (obs-fold) */
  FRAMING_BARE_LF,       /* a line ended by LF alone */
  FRAMING_NO_HOST,       /* HTTP/1.1 without Host */
  FRAMING_DUP_HOST,      /* Host more than once */
  FRAMING_DUP_LENGTH,    /* Content-Length more than once */
  FRAMING_BAD_LENGTH,    /* Content-Length that is not digits */
  FRAMING_LENGTH_AND_TE, /* Content-Length and Transfer-Encoding together */
  FRAMING_CODING,        /* Transfer-Encoding other than one "chunked" (or in HTTP/1.0) */
};

/* One header line as the HTTP library parsed it (pointers into its head buffer). */
struct framing_field {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
};

/* A request head as the HTTP library left it in its buffer: the request line starts at
 * start and its version ends at line_end; the fields follow in order; the empty line
 * that ends the head ends at end. The library overwrote every line end and the colon
 * with NUL bytes, so the bytes between two fields tell how the previous line ended. */
struct framing_head {
  const char *start;
  const char *line_end;
  const char *end;
  const char *target;        /* the request target (start of the URI) */
  size_t target_seen;        /* its length as first seen, up to a NUL byte */
  bool target_blank;         /* a blank or control byte among those target_seen bytes */
  const char *version_start; /* where the version begins (after the target and a space) */
  bool http11;               /* HTTP/1.1 (else 1.0) */
  const struct framing_field *fields;
  size_t n_fields;
};

/* The verdict on a head. field names the header concerned (static storage or borrowed
 * from the head), NULL when none; message says why, for the client. */
struct framing_verdict {
  enum framing_fault fault;
  const char *field;
  char message[160];
};

/* Checks head. Pure: reads only the head's pointers and bytes. Sets *ret and returns
 * true when the head is sound (ret->fault FRAMING_OK), false otherwise. */
bool framing_check(const struct framing_head *head, struct framing_verdict *ret);

/* Measures a request target as the URI log callback sees it (before the library
 * splits and decodes it in place): *ret_len its length up to a NUL byte, and whether a
 * blank or control byte is among them. */
void framing_measure_target(const char *uri, size_t *ret_len, bool *ret_blank);

/* Checks the head of the request on conn at the access handler's first call, before
 * any body byte is read: method, url and version as MHD passed them, target_seen and
 * target_blank as framing_measure_target found them. Returns like framing_check; when
 * the head cannot be collected (out of memory) it is let through (true). */
bool framing_check_request(struct MHD_Connection *conn, const char *method, const char *url,
                           const char *version, size_t target_seen, bool target_blank,
                           struct framing_verdict *ret);

#endif
