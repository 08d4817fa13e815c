/* Starting the evaluator processes of `opforge serve`: one supervisor per GPU slot. */
#ifndef OPFORGE_EVALUATORS_H
#define OPFORGE_EVALUATORS_H

struct opforge_config;
struct supervisor_pool;

/* Starts one supervised evaluator per GPU and worker slot that cfg names (none for
 * --gpus none). A slot whose evaluator cannot start is kept as a disabled supervisor,
 * so /v1/devices shows why. Returns the pool (caller frees with supervisor_pool_free),
 * or NULL for --gpus none, no GPU found, or no memory (each logged). */
struct supervisor_pool *evaluators_start(const struct opforge_config *cfg);

#endif
