/* Helpers of the LLM tests: the scripted OpenAI-compatible endpoint (scripted_llm.c) as a
 * child process, its request log, the fixtures, and requests built from fixture JSON. */
#ifndef OPFORGE_TESTS_LLM_TESTLIB_H
#define OPFORGE_TESTS_LLM_TESTLIB_H

#include <jansson.h>
#include <limits.h>
#include <sys/types.h>

#include "proposers/llm/settings.h"
#include "proposers/proposer.h"

/* A running scripted endpoint. dir is its temp dir (script.json, requests.jsonl, log). */
struct scripted_llm {
  pid_t pid;
  int out_fd;
  char url[64];          /* http://127.0.0.1:PORT */
  char dir[PATH_MAX];
  char log[PATH_MAX + 32];
};

/* Starts $OPFORGE_SCRIPTED_LLM with the script (JSON text; borrowed). Fails the test when
 * it does not start. Stop it with scripted_llm_stop. */
void scripted_llm_start(const char *script, struct scripted_llm *ret);

/* Stops it (SIGTERM) and removes its temp dir. */
void scripted_llm_stop(struct scripted_llm *s);

/* The requests it logged so far, one object per whole line of its log (a line being
 * written is left out; caller owns the array). */
json_t *scripted_llm_requests(const struct scripted_llm *s);

/* Settings for the endpoint: base URL s->url + "/v1", model "scripted-model", fast
 * retries (backoff 5 ms), timeout 5 s. */
void scripted_llm_settings(const struct scripted_llm *s, struct llm_settings *ret);

/* The fixture tests/llm/fixtures/name, parsed (caller owns). */
json_t *llm_fixture(const char *name);

/* The text of a file (caller frees), or NULL when it cannot be read. */
char *llm_read_file(const char *path);

/* A request whose fields point into doc (a fixture request; borrowed, must outlive it). */
void llm_request_of(json_t *doc, struct proposal_request *ret);

/* Writes text to path; fails the test on error. */
void llm_write_file(const char *path, const char *text);

#endif
