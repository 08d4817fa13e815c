/* Requests in flight per LLM endpoint: one process-wide counting semaphore per base URL,
 * shared by every worker, so that N workers do not open N times the endpoint's limit. */
#ifndef OPFORGE_LLM_SLOTS_H
#define OPFORGE_LLM_SLOTS_H

/* Waits for a free slot of the endpoint base_url (copied) under limit, which becomes the
 * endpoint's limit for every caller (0 keeps the one set before): in a server every
 * worker passes the same settings, and a later client with other settings for the same
 * URL (a test's endpoint on a reused port) is not held to a stale limit. Returns 0
 * (release with llm_slot_release), or -1 when the table of endpoints is full or memory
 * runs out: the caller then goes on without a slot. */
int llm_slot_acquire(const char *base_url, unsigned limit);

/* Gives back a slot taken by llm_slot_acquire for base_url. */
void llm_slot_release(const char *base_url);

/* How many slots of base_url are taken now (for tests); 0 for an unknown endpoint. */
unsigned llm_slots_in_use(const char *base_url);

#endif
