/* The prompts of the LLM proposer, rendered from the templates of proposers/llm/prompts/.
 * A large step (regenerate) says, in order: the problem, the rules, the common pitfalls
 * (skill rules scored 3 or more), the region (source, shapes, FLOPs, bytes, floor, its
 * exact tensors), the HTAM direction with its strategies and their evidence, and a pool of
 * up to 5 kernels with their results. A small step (patch) says the problem, the rules,
 * the pitfalls, the region, the current kernel, how it and its ancestors did, and the
 * strategy's guidance. */
#ifndef OPFORGE_LLM_PROMPT_H
#define OPFORGE_LLM_PROMPT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "proposers/llm/text.h"
#include "proposers/proposer.h"

#define LLM_POOL_MAX 5            /* kernels shown in a large step's pool */
#define LLM_PITFALL_MIN_SCORE 3   /* skill rules below this score are left out */
#define LLM_PITFALLS_MAX 20
#define LLM_SHOWN_SOURCE_MAX (24u * 1024u)  /* bytes of a pool kernel's source shown */
#define LLM_FAILURE_LOG_MAX 4096u  /* bytes of the current kernel's failure and compile log */

/* The two messages of one request (both owned; llm_prompt_clear). */
struct llm_prompt {
  char *system;
  char *user;
};

/* Builds the prompt of req: a small step (patching req->parent, which must have a
 * source) or a large one. Returns 0, or -1 with err (out of memory, or a template
 * that names a value the code does not give: a bug the golden tests catch). */
int llm_prompt_build(const struct proposal_request *req, bool small, struct llm_prompt *ret,
                     char *err, size_t errlen);

/* The two calls of a two-call small step (search.small_step two_call): the reviser's
 * prompt is the small step's with an answer that asks for advice in words (no code); the
 * tuner's is the small step's with that advice (borrowed) in its guidance. Returns as
 * llm_prompt_build. */
int llm_prompt_build_reviser(const struct proposal_request *req, struct llm_prompt *ret,
                             char *err, size_t errlen);
int llm_prompt_build_tuner(const struct proposal_request *req, const char *advice,
                           struct llm_prompt *ret, char *err, size_t errlen);

/* The short prompt of HTAM's local choice by the LLM (search.local_choice llm): the
 * direction, the region, and req->strategies with their records and ids. Returns 0 with
 * ret, or -1 with err. */
int llm_prompt_build_local_choice(const struct proposal_request *req, struct llm_prompt *ret,
                                  char *err, size_t errlen);

/* The strategy id the answer names: the first line that is exactly the id of one of
 * strategies (after trimming blanks, backticks and a final period), or NULL (borrowed
 * from strategies). */
const char *llm_local_choice_parse(const char *answer, json_t *strategies);

void llm_prompt_clear(struct llm_prompt *p);

/* ---- Parts (prompt_parts.c), each appended to out; shared with the tests. ---- */

/* The region's FX graph as lines "name = target(args)  # [shape] dtype". */
void prompt_graph(json_t *profile, struct ltext *out);

/* The region's tensors, one "- name: dtype [shape], role" line each. */
void prompt_tensors(json_t *profile, struct ltext *out);

/* Size, floor, eager time and SM count, as far as the profile has them. */
void prompt_facts(json_t *profile, struct ltext *out);

/* One line of the GPU's facts, all from the profile (its "gpu" object and floor basis,
 * else its sm_count): the model, compute capability, SMs, L2, shared memory per block,
 * threads per block, memory bandwidth (peak and measured) and fp32 peak; nothing when the
 * profile names no GPU. */
void prompt_hardware(json_t *profile, struct ltext *out);

/* How an evaluated candidate did, from its "result": "correct, 1.250 ms, 1.60x eager,
 * 80% of the floor" or "failed at compile (compile/syntax_error): message". */
void prompt_verdict(json_t *candidate, struct ltext *out);

/* "step 3, small step, strategy vector_float4" from a stored candidate's fields. */
void prompt_origin(json_t *candidate, struct ltext *out);

/* The accuracy rule of the task's precision and tolerance. */
void prompt_accuracy(const struct proposal_request *req, struct ltext *out);

#endif
