/* GET /v1/memory/score: every term of the HTAM score and the policy, for checking by hand. */
#include <stdlib.h>
#include <string.h>

#include "engine/htam.h"
#include "engine/memory_view.h"
#include "handlers/handlers.h"
#include "handlers/memory.h"
#include "handlers/memory_score.h"
#include "server/app.h"
#include "server/reply.h"
#include "store/memory.h"

/* Splits the prefix list into ids that must be global nodes of the view. Returns the
 * count, or -1 after queueing the error: 400 invalid_query for a malformed list or more
 * than cap ids, 404 memory_node_not_found for a well-formed id that names no direction
 * (as everywhere a reference names a missing node). ids point into buf. */
static int parse_prefix(struct request *req, const struct memory_view *v, char *buf,
                        const char **ids, size_t cap, enum MHD_Result *ret_result) {
  size_t n = 0;
  for (char *tok = buf, *comma; *buf && tok; tok = comma ? comma + 1 : NULL) {
    if ((comma = strchr(tok, ',')))
      *comma = '\0';
    if (!memory_id_valid(tok) || n == cap) {
      *ret_result = reply_error(req, API_ERR_INVALID_QUERY, "prefix",
                                "prefix must be at most %zu comma-separated direction ids", cap);
      return -1;
    }
    bool known = false;
    for (size_t i = 0; i < v->n_globals && !known; i++)
      known = strcmp(v->globals[i].id, tok) == 0;
    if (!known) {
      *ret_result = reply_error(req, API_ERR_MEMORY_NOT_FOUND, "prefix",
                                "prefix names %s, which is no direction", tok);
      return -1;
    }
    ids[n++] = tok;
  }
  return (int)n;
}

/* Checks the optional state parameters; queues 400 and returns -1 when one is unknown. */
static int parse_state(struct request *req, struct htam_state *st, enum MHD_Result *ret_result) {
  st->family = request_query(req, "family");
  st->failure_stage = request_query(req, "failure");
  st->bound = request_query(req, "bound");
  const char *bad = NULL;
  if (st->family && !htam_family_known(st->family))
    bad = "family";
  else if (st->bound && strcmp(st->bound, "memory") != 0 && strcmp(st->bound, "compute") != 0)
    bad = "bound";
  bool stage_ok = !st->failure_stage;
  for (size_t i = 0; !stage_ok && htam_failure_stages[i]; i++)
    stage_ok = strcmp(htam_failure_stages[i], st->failure_stage) == 0;
  if (!bad && !stage_ok)
    bad = "failure";
  if (bad)
    *ret_result = reply_error(req, API_ERR_INVALID_QUERY, bad, "%s has an unknown value", bad);
  return bad ? -1 : 0;
}

/* One direction's terms as JSON. */
static json_t *score_json(const struct memory_view *v, const struct htam_score *s) {
  json_t *terms = json_array();
  for (size_t i = 0; i < s->n_terms; i++)
    json_array_append_new(terms, json_pack("{s:s, s:f, s:f, s:f, s:f}", "from", s->terms[i].from,
                                           "alpha", s->terms[i].alpha, "n_ab", s->terms[i].n_ab,
                                           "m_ab", s->terms[i].m_ab, "u", s->terms[i].u));
  const struct htam_global *g = &v->globals[s->index];
  return json_pack("{s:s, s:f, s:I, s:f, s:f, s:o, s:f, s:f, s:f, s:f, s:f}", "direction", g->id,
                   "prior", g->prior, "n", (json_int_t)g->n, "reward_sum", g->reward_sum, "mu",
                   s->mu, "terms", terms, "transition", s->transition, "trigger", s->trigger,
                   "explore", s->explore, "score", s->score, "pi", s->pi);
}

/* Scores every direction and builds the reply body (caller owns), NULL on failure. */
static json_t *score_all(const struct search_config *cfg, const struct memory_view *v,
                         const char **prefix, size_t n_prefix, const struct htam_state *st) {
  struct htam_score *scores = calloc(v->n_globals + 1, sizeof *scores);
  if (!scores || htam_score(cfg, v->globals, v->n_globals, v->edges, v->n_edges, prefix,
                            n_prefix, st, scores) != 0) {
    free(scores);
    return NULL;
  }
  json_t *list = json_array(), *used = json_array();
  for (size_t i = 0; i < v->n_globals; i++)
    json_array_append_new(list, score_json(v, &scores[i]));
  for (size_t i = 0; i < n_prefix; i++)
    json_array_append_new(used, json_string(prefix[i]));
  json_t *body = json_pack(
      "{s:o, s:{s:s?, s:s?, s:s?}, s:{s:f, s:f, s:i, s:f, s:f, s:f, s:f}, s:f, s:o}", "prefix",
      used, "state", "family", st->family, "bound", st->bound, "failure", st->failure_stage,
      "config", "k0", cfg->k0, "k", cfg->k_edge, "K", (int)cfg->prefix_len, "lambda",
      cfg->lambda, "beta", cfg->beta, "c", cfg->c, "tau", cfg->tau, "N",
      v->n_globals ? scores[0].N : 0.0, "scores", list);
  free(scores);
  return body;
}

enum MHD_Result handle_memory_score(struct request *req) {
  enum MHD_Result result = MHD_NO;
  struct htam_state st = {0};
  if (parse_state(req, &st, &result) != 0)
    return result;
  const char *ns = memory_require_namespace(req, &result);
  if (!ns)
    return result;
  json_t *graph = NULL;
  int rc = store_memory_load_graph(req->app->store, ns, &graph);
  if (rc != STORE_OK)
    return reply_store_failure(req, rc, API_ERR_NOT_FOUND);
  struct memory_view v;
  if (memory_view_init(&v, graph) != 0) {
    json_decref(graph);
    return reply_error(req, API_ERR_INTERNAL, NULL, "the memory graph is malformed");
  }
  json_decref(graph);
  const char *text = request_query(req, "prefix");
  char *buf = strdup(text ? text : "");
  const char *prefix[HTAM_MAX_PREFIX];
  int n = buf ? parse_prefix(req, &v, buf, prefix, req->app->search->prefix_len, &result) : -1;
  if (n >= 0) {
    json_t *body = score_all(req->app->search, &v, prefix, (size_t)n, &st);
    result = body ? reply_json(req, 200, body)
                  : reply_error(req, API_ERR_INTERNAL, NULL, "cannot score the memory");
  }
  free(buf);
  memory_view_clear(&v);
  return result;
}
