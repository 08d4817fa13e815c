/* Reading a task's candidates page by page (candidate_pages.h). */
#include "cli/candidate_pages.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

/* Fetches the page of at most limit candidates after seq cursor into *ret_page (the
 * caller's). Returns cli_call's value: 0, -1 (printed) or CLI_REPLY_TOO_LARGE (quiet). */
static int fetch_page(struct cli_client *client, const char *escaped_id, int limit,
                      long long cursor, json_t **ret_page) {
  char path[CLI_MAX_URL];
  int n = snprintf(path, sizeof path, "/v1/tasks/%s/candidates?limit=%d&cursor=%lld",
                   escaped_id, limit, cursor);
  if (n < 0 || (size_t)n >= sizeof path) {
    fprintf(stderr, "error: request URL too long\n");
    return -1;
  }
  cli_client_set_quiet_too_large(client, true);
  int rc = cli_call(client, "GET", path, NULL, ret_page);
  cli_client_set_quiet_too_large(client, false);
  return rc;
}

int cli_each_candidate_page(struct cli_client *client, const char *task_id,
                            candidate_page_fn on_page, void *user) {
  char *escaped_id = cli_escape(task_id);
  if (!escaped_id) {
    fprintf(stderr, "error: out of memory\n");
    return -1;
  }
  int limit = CANDIDATE_PAGE_MAX, ret = 0;
  long long cursor = 0;
  for (;;) {
    json_t *page = NULL;
    int rc = fetch_page(client, escaped_id, limit, cursor, &page);
    if (rc == CLI_REPLY_TOO_LARGE && limit > 1) {
      limit /= 2;
      continue;
    }
    if (rc == CLI_REPLY_TOO_LARGE)
      fprintf(stderr, "error: the candidate after seq %lld of task %s alone is a reply over "
                      "the client's limit (OPFORGE_MAX_REPLY_BYTES)\n", cursor, task_id);
    if (rc != 0) {
      ret = -1;
      break;
    }
    const json_t *items = json_object_get(page, "items");
    const json_t *last = json_array_get(items, json_array_size(items) - 1);
    long long seq = json_integer_value(json_object_get(last, "seq"));
    bool more = json_string_value(json_object_get(page, "next_cursor")) && seq > cursor;
    int stop = on_page(items, user);
    json_decref(page);
    if (stop || !more)
      break;
    cursor = seq;
  }
  free(escaped_id);
  return ret;
}
