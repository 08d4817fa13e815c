/* The OpenAI-compatible chat client: POST {base_url}/chat/completions through libcurl,
 * one answer per call (no streaming), with timeouts, a cap on the answer's size, retries
 * with backoff (proposers/llm/retry.h) and the endpoint's concurrency limit
 * (proposers/llm/slots.h). The key goes into the Authorization header only; every message
 * this client makes is scrubbed of it. */
#ifndef OPFORGE_LLM_CLIENT_H
#define OPFORGE_LLM_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "proposers/llm/retry.h"
#include "proposers/llm/settings.h"

/* One chat completion request; strings borrowed for the call. */
struct llm_request {
  const char *model;
  const char *system;  /* the system message, or NULL */
  const char *user;    /* the user message */
  double temperature;
  int max_tokens;
};

/* One answer. content is owned (llm_reply_clear). */
struct llm_reply {
  char *content;
  char model[LLM_MODEL_MAX];   /* the model the endpoint says answered */
  long long prompt_tokens;
  long long completion_tokens;
  bool usage_estimated;        /* the endpoint sent no usage: about 4 bytes a token */
  bool truncated;              /* finish_reason "length": the answer hit max_tokens */
  double latency_ms;           /* of the attempt that answered */
  unsigned attempts;
};

/* Why a call failed: a failure class (parse/llm_*) and a message, both free of the key. */
struct llm_error {
  char cls[40];
  char message[600];
  long http_status;            /* the last HTTP status, 0 when none came */
};

struct llm_client;

/* A client for the endpoint of settings (copied; its base_url must be set). clock may be
 * NULL for the real one (borrowed, must outlive the client). Returns 0 and *ret_client
 * (free with llm_client_free), or -1 when libcurl or memory fails. */
int llm_client_new(const struct llm_settings *settings, const struct llm_clock *clock,
                   struct llm_client **ret_client);

/* Frees the client and wipes its copy of the key. Accepts NULL. */
void llm_client_free(struct llm_client *client);

/* Sends req, retrying as the settings say. Returns 0 and fills *ret (caller clears it),
 * or -1 and fills *err. */
int llm_chat(struct llm_client *client, const struct llm_request *req, struct llm_reply *ret,
             struct llm_error *err);

/* Frees what a reply owns. Accepts a zeroed struct. */
void llm_reply_clear(struct llm_reply *reply);

/* Replaces, in place, every run of 8 or more characters of text that also occurs in key
 * with "[redacted]" (text shrinks or keeps its length; it stays NUL-terminated). A no-op
 * for an empty key. */
void llm_redact(char *text, const char *key);

#endif
