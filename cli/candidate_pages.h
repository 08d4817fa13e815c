/* Reading a task's candidates page by page, with a page that shrinks while a reply is
 * too large for the client (a level-3 program's candidates run to megabytes each). */
#ifndef OPFORGE_CLI_CANDIDATE_PAGES_H
#define OPFORGE_CLI_CANDIDATE_PAGES_H

#include <jansson.h>

#include "cli/client.h"

#define CANDIDATE_PAGE_MAX 200 /* the server's largest candidate page */

/* Called with each page's items (borrowed, in step order); nonzero stops the walk. */
typedef int (*candidate_page_fn)(const json_t *items, void *user);

/* Walks the candidates of the task with id task_id (unescaped; the caller's) from the
 * first: asks for CANDIDATE_PAGE_MAX at a time, and while a reply is over the client's
 * limit asks again for half as many, quietly; the smaller page is kept for the rest of
 * the walk. Returns 0 at the end or when on_page stopped it; -1 after printing the error
 * (the server's, or that one candidate alone is over the limit). */
int cli_each_candidate_page(struct cli_client *client, const char *task_id,
                            candidate_page_fn on_page, void *user);

#endif
