/* Private to gpu/supervisor/: the supervisor struct and the functions its files share
 * (process control, the protocol stream, state setters). Only the files of that folder
 * include it; everyone else uses the public gpu/supervisor.h. */
#ifndef OPFORGE_SUPERVISOR_INTERNAL_H
#define OPFORGE_SUPERVISOR_INTERNAL_H

#include "gpu/supervisor.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#define MAX_RESTART_LIMIT 64
#define MAX_PENDING_REAPS 16

/* Outcome of one low-level I/O step. */
enum io_result { IO_OK, IO_TIMEOUT, IO_EOF, IO_TOO_LONG, IO_ERROR };

/* Outcome of sending one request and reading its reply. */
enum exchange { EX_REPLY, EX_TIMEOUT, EX_EOF, EX_GARBAGE };

struct supervisor {
  struct supervisor_config cfg; /* string fields point at owned copies */
  char *python, *evaluator_path, *gpu_lib_path, *cache_dir, *device, *stderr_path;

  /* The process and the protocol stream: only the request thread touches these. */
  pid_t pid;           /* -1 when no process */
  int to_child;        /* its stdin (our write end), -1 */
  int from_child;      /* its stdout (our read end), -1 */
  int pidfd;           /* readable once the process exits; -1 when the kernel lacks it */
  char *buf;           /* bytes read and not yet consumed */
  size_t len, cap, scanned, line_end;
  json_int_t next_id;
  json_t *last_load;   /* args of the last successful load_task, replayed on restart */
  double restart_times[MAX_RESTART_LIMIT]; /* restarts since the last normal reply */
  size_t n_restart_times;
  pid_t pending[MAX_PENDING_REAPS]; /* killed but not yet reaped */
  size_t n_pending;
  struct stderr_pump *pump; /* a sandboxed process's stderr on its way to the log, or NULL */

  /* Read by other threads (/v1/devices, /metrics). */
  pthread_mutex_t lock;
  enum supervisor_state state;
  atomic_ulong restarts;
  char *current_task;
  json_t *device_info;
  char *last_error;
  long shown_pid;
  atomic_bool aborted; /* supervisor_abort: no restart, every request refused */
};

/* ---- small helpers ---- */

/* Seconds on the monotonic clock. */
static inline double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleeps s seconds, resuming after signals. */
static inline void sleep_s(double s) {
  struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* Milliseconds left until deadline, for poll(); 0 when it has passed. */
static inline int ms_left(double deadline) {
  double left = deadline - now_s();
  if (left <= 0)
    return 0;
  if (left > 86400.0)
    return 86400 * 1000;
  return (int)(left * 1000.0) + 1;
}

/* A copy of s (caller frees), or NULL for NULL (and when out of memory). */
static inline char *dup_or_null(const char *s) {
  return s ? strdup(s) : NULL;
}

/* A JSON string's text, or "?" for anything else (for messages; borrowed). */
static inline const char *str_or(json_t *v) {
  return json_is_string(v) ? json_string_value(v) : "?";
}

/* Formats into err (errlen bytes) when err is not NULL. */
static inline void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

/* ---- state.c: the setters behind what other threads read ---- */

void sv_log(struct supervisor *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sv_set_state(struct supervisor *sv, enum supervisor_state state);
void sv_set_last_error(struct supervisor *sv, const char *msg);
void sv_set_pid(struct supervisor *sv, pid_t pid);

/* ---- process.c: spawning, killing and reaping the evaluator's process group ---- */

int sv_spawn(struct supervisor *sv, char *err, size_t errlen);
bool sv_wait_exit(pid_t pid, double grace_s, siginfo_t *ret_info);
void sv_explain_eof(struct supervisor *sv, char *cls, size_t clslen);
void sv_kill_and_reap(struct supervisor *sv);
void sv_reap_pending(struct supervisor *sv, double wait_s);
void sv_close_fd(int *fd);

/* ---- stderr_pump.c: a sandboxed evaluator's stderr, copied to its log by a thread ---- */

struct stderr_pump;
/* Starts a thread copying what fd (taken over) delivers to the log at path (appended,
 * rotated to PATH.1 past 64 MiB), or to our stderr when path is NULL. Returns 0 and
 * *ret_pump, or a negative errno (fd is then closed). */
int stderr_pump_start(int fd, const char *path, struct stderr_pump **ret_pump);
/* Copies what is still readable, ends the thread, closes the pipe and frees (NULL is
 * fine). Call once the process is gone. */
void stderr_pump_stop(struct stderr_pump *pump);

/* ---- protocol.c: request lines out, reply lines in, synthetic replies ---- */

char *sv_request_line(const char *op, json_t *args, json_int_t id, size_t *ret_len);
enum exchange sv_exchange(struct supervisor *sv, const char *line, size_t len, json_int_t id,
                          double deadline, json_t **ret_reply, char *why, size_t whylen);
enum io_result sv_read_line(struct supervisor *sv, double deadline, char **ret_line,
                            size_t *ret_len);
void sv_consume_line(struct supervisor *sv);
bool sv_stream_quiet(struct supervisor *sv);
int sv_take_ready_line(struct supervisor *sv, const char *line, size_t len, char *err,
                       size_t errlen);
json_t *sv_synthetic_reply(json_int_t id, enum eval_stage stage, const char *cls,
                           const char *message, bool restarted, bool reloaded);

#endif
