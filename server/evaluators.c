/* Starting the evaluator processes of `opforge serve`: one supervisor per GPU slot. */
#include "server/evaluators.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/sandbox.h"
#include "gpu/supervisor.h"
#include "server/config.h"
#include "base/log.h"

/* True when path names a Python script (run through the interpreter), not a program. */
static bool is_python_script(const char *path) {
  size_t n = strlen(path);
  return n > 3 && strcmp(path + n - 3, ".py") == 0;
}

/* What every slot's evaluator shares: its command, and its sandbox or why none. */
struct slot_common {
  const char *python, *evaluator, *lib;
  const struct sandbox *sandbox;  /* NULL with refusal set: no slot may start */
  const char *refusal;
};

/* Starts the evaluator of one slot on device index gpu; adds it to pool either way. */
static void start_slot(struct supervisor_pool *pool, const struct opforge_config *cfg, int gpu,
                       int slot, const struct slot_common *c) {
  const char *python = c->python, *evaluator = c->evaluator, *lib = c->lib;
  char device[16], cache[PATH_MAX + 16], log_path[PATH_MAX + 32], err[512];
  snprintf(device, sizeof device, "%d", gpu);
  snprintf(cache, sizeof cache, "%s/cubin-cache", cfg->data_dir);
  snprintf(log_path, sizeof log_path, "%s/evaluator-%d-%d.log", cfg->data_dir, gpu, slot);
  struct supervisor_config sc;
  supervisor_config_defaults(&sc);
  sc.python = evaluator && is_python_script(evaluator) ? python : NULL;
  sc.evaluator_path = evaluator;
  sc.gpu_lib_path = lib;
  sc.cache_dir = cache;
  sc.device = device;
  sc.stderr_path = log_path;
  /* Slots that share a GPU take turns for GPU work (the device lock of gpu/evaluator/device_lock.py): a
   * request may first wait for each other slot's request, itself bounded by the same
   * deadline, so a slot's deadline is the configured one times the slots per GPU. A
   * kernel that never ends is still killed, later; a request that only waited is not. */
  sc.compile_eval_deadline_s = (double)cfg->evaluate_deadline_s * cfg->workers_per_gpu;
  sc.profile_deadline_s = (double)cfg->profile_deadline_s * cfg->workers_per_gpu;
  /* They also share its memory: each may use its part of 90%, and an evaluate that runs
   * out of it reruns last holding the GPU alone with 90% (docs/architecture.md, section 4,
   * "Evaluator protocol"). */
  sc.mem_fraction = 0.9 / cfg->workers_per_gpu;
  sc.sandbox = c->sandbox;
  struct supervisor *sv = NULL;
  if (!evaluator) {
    snprintf(err, sizeof err, "no evaluator found (set --evaluator)");
  } else if (c->refusal[0]) {
    snprintf(err, sizeof err, "%s", c->refusal);
  } else if (supervisor_start(&sc, &sv, err, sizeof err) == 0) {
    log_info("evaluator for GPU %d slot %d started (log %s)", gpu, slot, log_path);
    supervisor_pool_add(pool, sv);
    return;
  }
  log_error("evaluator for GPU %d slot %d cannot start: %s", gpu, slot, err);
  if (supervisor_new_disabled(&sc, err, &sv) == 0)
    supervisor_pool_add(pool, sv);
}

/* Prepares the sandbox every slot shares; on failure writes the refusal (and logs it).
 * With --sandbox none it warns that task code runs unsandboxed. */
static struct sandbox *prepare_sandbox(const struct opforge_config *cfg,
                                       const struct slot_common *c, char *refusal,
                                       size_t refusal_len) {
  const char *hidden[] = {cfg->data_dir, cfg->token_file, cfg->llm.key_file,
                          cfg->search_config, NULL};
  struct sandbox_paths paths = {.python = c->evaluator && is_python_script(c->evaluator)
                                              ? c->python : NULL,
                                .evaluator = c->evaluator, .gpu_lib = c->lib,
                                .hidden = hidden};
  struct sandbox *sb = NULL;
  char err[1024];
  if (sandbox_prepare(&cfg->sandbox, &paths, &sb, err, sizeof err) != 0) {
    snprintf(refusal, refusal_len, "%s", err);
    log_error("evaluators not started: %s", err);
    return NULL;
  }
  if (!sandbox_enforced(sb))
    log_warn("--sandbox none: task code runs unsandboxed, as this server's user and with "
             "its environment; it can read the token file, the LLM key and --data");
  else
    log_info("evaluators run sandboxed (bubblewrap, no network, a private /tmp)");
  return sb;
}

struct supervisor_pool *evaluators_start(const struct opforge_config *cfg,
                                         struct sandbox **ret_sandbox, char *refusal,
                                         size_t refusal_len) {
  int gpus[CONFIG_MAX_GPUS], n = 0;
  *ret_sandbox = NULL;
  refusal[0] = '\0';
  if (cfg->gpu_mode == GPUS_NONE)
    return NULL;
  if (cfg->gpu_mode == GPUS_LIST) {
    memcpy(gpus, cfg->gpu_list, sizeof gpus);
    n = cfg->n_gpu_list;
  } else {
    n = supervisor_count_gpus();
    for (int i = 0; i < n && i < CONFIG_MAX_GPUS; i++)
      gpus[i] = i;
    if (n == 0) {
      log_warn("no GPU found: tasks stay queued until the server runs on a GPU host");
      return NULL;
    }
  }
  struct supervisor_pool *pool = supervisor_pool_new();
  char *python = cfg->python[0] ? strdup(cfg->python) : supervisor_default_python();
  char *evaluator = cfg->evaluator[0] ? strdup(cfg->evaluator) : supervisor_default_evaluator();
  char *lib = cfg->gpu_lib[0] ? strdup(cfg->gpu_lib) : supervisor_default_gpu_lib();
  struct slot_common c = {.python = python, .evaluator = evaluator, .lib = lib,
                          .refusal = refusal};
  if (evaluator)
    c.sandbox = *ret_sandbox = prepare_sandbox(cfg, &c, refusal, refusal_len);
  for (int i = 0; pool && i < n; i++)
    for (int slot = 0; slot < cfg->workers_per_gpu; slot++)
      start_slot(pool, cfg, gpus[i], slot, &c);
  free(python);
  free(evaluator);
  free(lib);
  return pool;
}

json_t *evaluators_sandbox_describe(const struct sandbox *sb, const char *refusal) {
  if (sb)
    return sandbox_describe(sb);
  if (refusal && refusal[0])
    return json_pack("{s:s,s:s}", "mode", "refused", "reason", refusal);
  return json_pack("{s:s}", "mode", "unused");
}
