/* Starting the evaluator processes of `opforge serve`: one supervisor per GPU slot. */
#ifndef OPFORGE_EVALUATORS_H
#define OPFORGE_EVALUATORS_H

#include <jansson.h>
#include <stddef.h>

struct opforge_config;
struct supervisor_pool;
struct sandbox;

/* Starts one supervised evaluator per GPU and worker slot that cfg names (none for
 * --gpus none), each in the sandbox of cfg->sandbox (prepared once here; see
 * gpu/sandbox.h). A slot whose evaluator cannot start is kept as a disabled supervisor,
 * so /v1/devices shows why; when no sandbox can be made and --sandbox is not none,
 * every slot is disabled with that reason, which also goes into refusal. Sets
 * *ret_sandbox to the prepared sandbox (caller frees it with sandbox_free after the
 * pool) or NULL. Returns the pool (caller frees with supervisor_pool_free), or NULL for
 * --gpus none, no GPU found, or no memory (each logged). */
struct supervisor_pool *evaluators_start(const struct opforge_config *cfg,
                                         struct sandbox **ret_sandbox, char *refusal,
                                         size_t refusal_len);

/* The evaluators' sandbox as /healthz and /metrics show it (caller owns; NULL when out of
 * memory): sandbox_describe's object when one was prepared ("bwrap", or "none" for
 * --sandbox none), {"mode": "refused", "reason"} when none could be made (no evaluator
 * runs), {"mode": "unused"} when no evaluator was started (--gpus none, no GPU). */
json_t *evaluators_sandbox_describe(const struct sandbox *sb, const char *refusal);

#endif
