/* GET /ui/ and /ui/{file}: the web page of ui/, compiled in at build time; /ui redirects. */
#ifndef OPFORGE_HANDLERS_UI_H
#define OPFORGE_HANDLERS_UI_H

#include "server/request.h"

/* GET /ui: 301 to /ui/ (the page's relative URLs need the trailing slash). */
enum MHD_Result handle_ui_redirect(struct request *req);

/* GET /ui/: the page itself (index.html). */
enum MHD_Result handle_ui_index(struct request *req);

/* GET /ui/{file}: one embedded file with its Content-Type, the page's security headers
 * (a Content-Security-Policy allowing this origin only, nosniff, no framing) and an ETag
 * with Cache-Control: no-cache, so a browser revalidates and gets 304 while the build is
 * unchanged. A name the build did not embed gets 404 not_found. Bodies are static: no
 * copy is made. */
enum MHD_Result handle_ui_file(struct request *req);

#endif
