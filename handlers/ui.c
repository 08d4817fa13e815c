/* The web page's files (ui/), embedded by tools/embed.c and served under /ui/. */
#include "handlers/ui.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/embedded.h"
#include "server/reply.h"

extern const struct embedded_file opforge_ui[];

/* The page may load scripts, styles, images and fonts from its own origin and talk to
 * its own origin only; nothing inline, no plugins, no framing, no <base>, no forms
 * posting anywhere. */
#define UI_CSP                                                                         \
  "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "    \
  "frame-ancestors 'none'; form-action 'none'"

/* Content types by file name ending; a file whose ending is not listed is not served. */
static const struct {
  const char *ending;
  const char *type;
} ui_types[] = {
  {".html", "text/html; charset=utf-8"},
  {".css", "text/css; charset=utf-8"},
  {".js", "text/javascript; charset=utf-8"},
  {".svg", "image/svg+xml"},
  {".txt", "text/plain; charset=utf-8"},
};

/* The Content-Type for name (static), or NULL when its ending is not listed. */
static const char *content_type_of(const char *name) {
  size_t n = strlen(name);
  for (size_t i = 0; i < sizeof ui_types / sizeof ui_types[0]; i++) {
    size_t e = strlen(ui_types[i].ending);
    if (n > e && strcmp(name + n - e, ui_types[i].ending) == 0)
      return ui_types[i].type;
  }
  return NULL;
}

/* The embedded file called name (static), or NULL. */
static const struct embedded_file *find_file(const char *name) {
  for (const struct embedded_file *f = opforge_ui; f->name; f++)
    if (strcmp(f->name, name) == 0)
      return f;
  return NULL;
}

/* Writes the file's entity tag, a quoted FNV-1a hash of its bytes, into etag. */
static void entity_tag(const struct embedded_file *f, char etag[20]) {
  uint64_t h = 14695981039346656037ull;
  for (size_t i = 0; i < f->size; i++)
    h = (h ^ (unsigned char)f->data[i]) * 1099511628211ull;
  snprintf(etag, 20, "\"%016llx\"", (unsigned long long)h);
}

/* True when If-None-Match (a list of tags, weak ones included, or "*") names etag. */
static bool not_modified(struct request *req, const char *etag) {
  const char *inm = request_header(req, MHD_HTTP_HEADER_IF_NONE_MATCH);
  return inm && (strcmp(inm, "*") == 0 || strstr(inm, etag) != NULL);
}

/* Queues f (or 304 when the client has it) with the headers every page file carries. */
static enum MHD_Result send_file(struct request *req, const struct embedded_file *f,
                                 const char *type) {
  char etag[20];
  entity_tag(f, etag);
  bool same = not_modified(req, etag);
  struct MHD_Response *resp = MHD_create_response_from_buffer(
      same ? 0 : f->size, same ? NULL : (void *)f->data, MHD_RESPMEM_PERSISTENT);
  if (!resp)
    return MHD_NO;
  if (!same)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(resp, MHD_HTTP_HEADER_ETAG, etag);
  MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  MHD_add_response_header(resp, "Content-Security-Policy", UI_CSP);
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  MHD_add_response_header(resp, "X-Frame-Options", "DENY");
  MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
  return reply_response(req, same ? MHD_HTTP_NOT_MODIFIED : MHD_HTTP_OK, resp);
}

/* Serves the embedded file name, or 404 not_found. */
static enum MHD_Result serve_named(struct request *req, const char *name) {
  const struct embedded_file *f = find_file(name);
  const char *type = f ? content_type_of(name) : NULL;
  if (!f || !type)
    return reply_error(req, API_ERR_NOT_FOUND, NULL, "no file '%.100s' under /ui/", name);
  return send_file(req, f, type);
}

enum MHD_Result handle_ui_redirect(struct request *req) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
  if (!resp)
    return MHD_NO;
  MHD_add_response_header(resp, MHD_HTTP_HEADER_LOCATION, "/ui/");
  return reply_response(req, MHD_HTTP_MOVED_PERMANENTLY, resp);
}

enum MHD_Result handle_ui_index(struct request *req) {
  return serve_named(req, "index.html");
}

enum MHD_Result handle_ui_file(struct request *req) {
  return serve_named(req, req->params[0]);
}
