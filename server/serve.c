/* `opforge serve`: start-up, the wait for a signal, and the graceful shutdown. */
#include "server/serve.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "server/app.h"
#include "server/claim_lease.h"
#include "server/config.h"
#include "server/data_lock.h"
#include "server/server_row.h"
#include "server/daemon.h"
#include "engine/search_config.h"
#include "engine/workers.h"
#include "gpu/sandbox.h"
#include "gpu/supervisor.h"
#include "server/evaluators.h"
#include "server/event_bus.h"
#include "base/log.h"
#include "server/metrics.h"
#include "store/conninfo.h"
#include "store/listener.h"
#include "store/memory.h"
#include "store/servers.h"
#include "store/store.h"
#include "store/tasks.h"

/* Blocks SIGINT/SIGTERM in this thread (and so in every thread started later) so that
 * serve_main can take them with sigwait; ignores SIGPIPE from closed sockets and pipes. */
static void block_signals(sigset_t *set) {
  sigemptyset(set);
  sigaddset(set, SIGINT);
  sigaddset(set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, set, NULL);
  signal(SIGPIPE, SIG_IGN);
}

/* Creates the data directory if needed; logs and returns -1 on failure. */
static int ensure_data_dir(const char *dir) {
  if (mkdir(dir, 0750) == 0)
    return 0;
  struct stat st;
  if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode))
    return 0;
  log_error("--data: cannot create directory '%s'", dir);
  return -1;
}

static struct search_config search_cfg;


/* What serve holds besides the app: the data directory and the claims' lease. */
static struct data_lock *data_lock;
static struct claim_lease *lease_keeper;
static struct store_listener *listener;

/* Takes the data directory (one server per --data) and then the claims left behind by
 * this host's earlier servers or by servers whose lease ran out. Returns 0 or -1
 * (logged). */
static int own_data_dir(const struct opforge_config *cfg) {
  char err[PATH_MAX + 256];
  if (data_lock_acquire(cfg->data_dir, &data_lock, NULL, err, sizeof err) != 0) {
    log_error("%s", err);
    return -1;
  }
  return 0;
}

/* The lease keeper's tick: this server's row, with what its GPUs are now. */
static void refresh_row(void *app) {
  server_row_refresh(app);
}

/* Releases the stale claims (see store_claims_release_stale) and starts renewing ours. */
static int adopt_claims(struct app *app) {
  int released = 0;
  char data_dir[PATH_MAX];
  store_server_set_data_dir(app->store, realpath(app->cfg->data_dir, data_dir)
                                            ? data_dir : app->cfg->data_dir);
  unsigned lease_s = app->cfg->lease_s;
  if (store_claims_configure(app->store, NULL, lease_s) != STORE_OK ||
      store_claims_release_stale(app->store, &released) != STORE_OK)
    return -1;
  if (released)
    log_info("%d task(s) left running by an earlier server resume", released);
  log_info("claims are held as %s", store_claims_instance(app->store));
  return claim_lease_start(app->store, lease_s, refresh_row, app, &lease_keeper);
}

/* The loop's notify callback: wakes the task's event streams. */
static void wake_streams(void *bus, const char *task_id) {
  event_bus_notify(bus, task_id);
}

/* What the listener of a shared store heard: another server's events wake this server's
 * streams of that task; a task queued or let go wakes the workers. */
static void heard(void *arg, const char *channel, const char *payload) {
  struct app *app = arg;
  if (strcmp(channel, STORE_CHANNEL_EVENTS) == 0) {
    event_bus_notify(app->bus, payload);
  } else if (app->workers) {
    workers_kick(app->workers);
  }
}

/* Opens the store --store names: SQLite in --data, or PostgreSQL. */
static int open_store(struct app *app, const struct opforge_config *cfg) {
  char err[1024];
  int rc = cfg->store[0]
               ? store_open_pg(cfg->store, cfg->store_password[0] ? cfg->store_password : NULL,
                               &app->store, err, sizeof err)
               : store_open(cfg->data_dir, &app->store, err, sizeof err);
  if (rc != STORE_OK) {
    log_error("store: %s", err);
    return -1;
  }
  log_info("store: %s (%s)", store_display(app->store), store_backend_name(app->store));
  return 0;
}

/* Starts the evaluators and one worker per slot (none with --gpus none). */
static int start_workers(struct app *app, const struct opforge_config *cfg) {
  search_cfg = cfg->search;  /* --search-config over the defaults */
  app->search = &search_cfg;
  app->supervisors = evaluators_start(cfg, &app->sandbox, app->sandbox_refusal,
                                     sizeof app->sandbox_refusal);
  if (!app->supervisors)
    return 0;
  struct worker_settings ws = {.search = &search_cfg,
                               .fixtures_dir = cfg->fixtures[0] ? cfg->fixtures : NULL,
                               .llm = &cfg->llm,
                               .evaluate_deadline_s = cfg->evaluate_deadline_s,
                               .profile_deadline_s = cfg->profile_deadline_s,
                               .load_deadline_s = 300};
  if (workers_start(app->store, wake_streams, app->bus, app->supervisors, &ws,
                    &app->workers) != 0) {
    log_error("cannot start the workers");
    return -1;
  }
  return 0;
}

/* Opens what the app holds. Returns 0, or -1 after logging (the caller cleans up). */
static int app_open(struct app *app, const struct opforge_config *cfg) {
  app->cfg = cfg;
  if (ensure_data_dir(cfg->data_dir) != 0 || own_data_dir(cfg) != 0)
    return -1;
  char err[512];
  if (open_store(app, cfg) != 0)
    return -1;
  if (store_memory_seed_if_empty(app->store, NULL) != STORE_OK) {
    char why[PATH_MAX + 200];
    if (!store_has_space(app->store, why, sizeof why))
      log_error("store: cannot load the seed memory: %s", why);
    else
      log_error("store: cannot load the seed memory");
    return -1;
  }
  app->metrics = metrics_new();
  app->bus = event_bus_new(1000);
  if (!app->metrics || !app->bus) {
    log_error("out of memory at start-up");
    return -1;
  }
  /* Tasks left running by a crash lose their claim and resume from their last step. */
  if (adopt_claims(app) != 0)
    return -1;
  if (data_lock_write_pid(data_lock, err, sizeof err) != 0) {
    log_error("%s", err);
    return -1;
  }
  if (start_workers(app, cfg) != 0)
    return -1;
  server_row_refresh(app); /* on failure logged; the lease keeper writes it next period */
  if (store_listener_start(app->store, heard, app, &listener) != STORE_OK) {
    log_error("cannot start the store's listener");
    return -1;
  }
  return 0;
}

/* Workers checkpoint their tasks at the next step boundary before the evaluators and
 * the store go away. */
static void app_close(struct app *app) {
  store_listener_stop(listener);
  workers_stop(app->workers, app->cfg ? (double)app->cfg->shutdown_grace_s : 0);
  claim_lease_stop(lease_keeper);
  if (app->store && lease_keeper) {
    store_task_unclaim(app->store, NULL);  /* so a next server need not wait for the lease */
    store_server_remove(app->store);
  }
  supervisor_pool_free(app->supervisors);
  sandbox_free(app->sandbox);  /* after the supervisors, which borrow it */
  event_bus_free(app->bus);
  metrics_free(app->metrics);
  store_close(app->store);
  data_lock_release(data_lock);
}

int serve_main(int argc, char **argv) {
  if (argc > 1 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    config_usage(stdout);
    return 0;
  }
  static struct opforge_config cfg;
  char err[512];
  if (config_load(argc - 1, argv + 1, getenv, &cfg, err, sizeof err) != 0) {
    fprintf(stderr, "opforge serve: %s\n", err);
    return 2;
  }
  sigset_t signals;
  block_signals(&signals);
  static struct app app;
  struct daemon *d = NULL;
  uint16_t port = 0;
  int code = 2;  /* a start-up failure, like a bad option */
  if (app_open(&app, &cfg) == 0 && daemon_start(&app, &d, &port) == 0) {
    printf("listening on http://%s:%u\n", cfg.listen_host, (unsigned)port);
    fflush(stdout);
    log_info("opforge listening on %s:%u, data in %s, %d token(s)", cfg.listen_host,
             (unsigned)port, cfg.data_dir, cfg.n_tokens);
    int sig = 0;
    sigwait(&signals, &sig);
    log_info("signal %d: stopping", sig);
    atomic_store(&app.shutting_down, true);
    /* MHD_stop_daemon closes the listening socket itself. MHD_quiesce_daemon is not
     * used: in 0.9.75 it races a pool thread over the listening socket's epoll entry
     * and can abort the process ("Failed to remove listen FD from epoll set"). */
    daemon_stop(d);
    code = 0;
  }
  app_close(&app);
  if (code == 0)
    log_info("stopped cleanly");
  return code;
}
