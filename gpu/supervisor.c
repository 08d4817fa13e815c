/* The evaluator supervisor (see supervisor.h): spawning, the JSON-lines exchange with
 * deadlines, kill/reap/restart/reload, the restart storm guard, and the slot pool. */
#include "gpu/supervisor.h"
#include "base/log.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RESTART_LIMIT 64
#define MAX_PENDING_REAPS 16
#define REAP_WAIT_S 10.0   /* a SIGKILLed process stuck in the driver gets this long */
#define EOF_EXIT_WAIT_S 2.0 /* after EOF, how long the process may take to exit */
#define READ_CHUNK 65536

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

  /* Read by other threads (/v1/devices, /metrics). */
  pthread_mutex_t lock;
  enum supervisor_state state;
  atomic_ulong restarts;
  char *current_task;
  json_t *device_info;
  char *last_error;
  long shown_pid;
};

/* ---- small helpers ---- */

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s) {
  struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

/* Milliseconds left until deadline, for poll(); 0 when it has passed. */
static int ms_left(double deadline) {
  double left = deadline - now_s();
  if (left <= 0)
    return 0;
  if (left > 86400.0)
    return 86400 * 1000;
  return (int)(left * 1000.0) + 1;
}

static char *dup_or_null(const char *s) {
  return s ? strdup(s) : NULL;
}

/* A JSON string's text, or "?" for anything else (for messages). */
static const char *str_or(json_t *v) {
  return json_is_string(v) ? json_string_value(v) : "?";
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...) {
  if (!err || errlen == 0)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, errlen, fmt, ap);
  va_end(ap);
}

static void sv_log(struct supervisor *sv, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void sv_log(struct supervisor *sv, const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  log_warn("evaluator[%s]: %s", sv->device, msg);
}

static void sv_set_state(struct supervisor *sv, enum supervisor_state state) {
  pthread_mutex_lock(&sv->lock);
  sv->state = state;
  pthread_mutex_unlock(&sv->lock);
}

/* Records the newest failure for /v1/devices (copied). */
static void sv_set_last_error(struct supervisor *sv, const char *msg) {
  char *copy = dup_or_null(msg);
  pthread_mutex_lock(&sv->lock);
  free(sv->last_error);
  sv->last_error = copy;
  pthread_mutex_unlock(&sv->lock);
}

static void sv_set_pid(struct supervisor *sv, pid_t pid) {
  sv->pid = pid;
  pthread_mutex_lock(&sv->lock);
  sv->shown_pid = pid > 0 ? (long)pid : -1;
  pthread_mutex_unlock(&sv->lock);
}

/* "crash/signal_N" or "crash/exit_N" from a waitid() result. */
static void class_from_siginfo(const siginfo_t *info, char *out, size_t outlen) {
  if (info->si_code == CLD_EXITED)
    snprintf(out, outlen, "crash/exit_%d", info->si_status);
  else
    snprintf(out, outlen, "crash/signal_%d", info->si_status);
}

/* The start of a line, printable, for messages about garbage. */
static void snippet(const char *line, size_t len, char *out, size_t outlen) {
  size_t n = 0;
  for (size_t i = 0; i < len && n + 4 < outlen && i < 160; i++) {
    unsigned char c = (unsigned char)line[i];
    out[n++] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
  }
  if (len > 160 && n + 4 < outlen) {
    memcpy(out + n, "...", 3);
    n += 3;
  }
  out[n] = '\0';
}

/* ---- processes ---- */

/* Waits up to grace_s for pid to exit, without reaping it (WNOWAIT): a zombie keeps its
 * pid, and with it the process group id, reserved while we signal the group. */
static bool wait_exit_nowait(pid_t pid, double grace_s, siginfo_t *ret_info) {
  double deadline = now_s() + grace_s;
  for (;;) {
    siginfo_t info;
    memset(&info, 0, sizeof info);
    int rc = waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT);
    if (rc == 0 && info.si_pid == pid) {
      if (ret_info)
        *ret_info = info;
      return true;
    }
    if (rc < 0 && errno != EINTR)
      return false;
    if (now_s() >= deadline)
      return false;
    sleep_s(0.005);
  }
}

/* Reaps pid, waiting at most wait_s. True when reaped (or not our child any more). */
static bool reap_bounded(pid_t pid, double wait_s) {
  double deadline = now_s() + wait_s;
  for (;;) {
    int status;
    pid_t rc = waitpid(pid, &status, WNOHANG);
    if (rc == pid || (rc < 0 && errno == ECHILD))
      return true;
    if (rc < 0 && errno != EINTR)
      return true;
    if (now_s() >= deadline)
      return false;
    sleep_s(0.005);
  }
}

/* Retries reaping processes that outlived REAP_WAIT_S earlier. */
static void reap_pending(struct supervisor *sv, double wait_s) {
  size_t kept = 0;
  for (size_t i = 0; i < sv->n_pending; i++) {
    if (!reap_bounded(sv->pending[i], wait_s))
      sv->pending[kept++] = sv->pending[i];
  }
  sv->n_pending = kept;
}

static void close_fd(int *fd) {
  if (*fd >= 0)
    close(*fd);
  *fd = -1;
}

/* SIGKILLs the whole process group (task code may have spawned helpers), reaps the
 * leader, and drops the stream. The leader is not reaped before the kill, so the group
 * id cannot have been reused. */
static void sv_kill_and_reap(struct supervisor *sv) {
  if (sv->pid > 0) {
    pid_t pid = sv->pid;
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    if (!reap_bounded(pid, REAP_WAIT_S)) {
      sv_log(sv, "pid %ld did not die within %.0f s of SIGKILL; reaping later",
             (long)pid, REAP_WAIT_S);
      if (sv->n_pending < MAX_PENDING_REAPS)
        sv->pending[sv->n_pending++] = pid;
      else
        reap_bounded(pid, 1e9);
    }
  }
  sv_set_pid(sv, -1);
  close_fd(&sv->to_child);
  close_fd(&sv->from_child);
  close_fd(&sv->pidfd);
  sv->len = sv->scanned = sv->line_end = 0;
  reap_pending(sv, 0);
}

/* Moves fd above 2 so that dup2 onto 0/1 in the child cannot clobber another pipe end. */
static int fd_above_2(int fd) {
  if (fd > 2)
    return fd;
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  int saved = errno;
  close(fd);
  errno = saved;
  return moved;
}

/* argv for the evaluator (pointers into sv, plus mem_fraction written into mem). */
static void build_argv(struct supervisor *sv, const char **argv, char *mem, size_t memlen) {
  size_t n = 0;
  if (sv->python)
    argv[n++] = sv->python;
  argv[n++] = sv->evaluator_path;
  argv[n++] = "--device";
  argv[n++] = sv->device;
  if (sv->gpu_lib_path) {
    argv[n++] = "--lib";
    argv[n++] = sv->gpu_lib_path;
  }
  if (sv->cache_dir) {
    argv[n++] = "--cache-dir";
    argv[n++] = sv->cache_dir;
  }
  if (sv->cfg.mem_fraction > 0) {
    snprintf(mem, memlen, "%g", sv->cfg.mem_fraction);
    argv[n++] = "--mem-fraction";
    argv[n++] = mem;
  }
  argv[n] = NULL;
}

/* Spawn attributes: own process group, empty signal mask, and default dispositions for
 * signals a server commonly ignores (ignored ones survive exec). */
static int spawn_attrs(posix_spawnattr_t *attr) {
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  const int sigs[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD,
                      SIGUSR1, SIGUSR2, SIGALRM, SIGXFSZ};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
    sigaddset(&defaults, sigs[i]);
  int rc = posix_spawnattr_init(attr);
  if (rc == 0)
    rc = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                            POSIX_SPAWN_SETSIGDEF);
  if (rc == 0)
    rc = posix_spawnattr_setpgroup(attr, 0);
  if (rc == 0)
    rc = posix_spawnattr_setsigmask(attr, &none);
  if (rc == 0)
    rc = posix_spawnattr_setsigdefault(attr, &defaults);
  return rc;
}

/* File actions: stdin/stdout onto the pipes, stderr to the log if any, nothing else
 * inherited (another slot's pipe end held open would hide that slot's EOF). */
static int spawn_files(struct supervisor *sv, posix_spawn_file_actions_t *fa, int in_fd,
                       int out_fd) {
  int rc = posix_spawn_file_actions_init(fa);
  if (rc == 0)
    rc = posix_spawn_file_actions_adddup2(fa, in_fd, 0);
  if (rc == 0)
    rc = posix_spawn_file_actions_adddup2(fa, out_fd, 1);
  if (rc == 0 && sv->stderr_path)
    rc = posix_spawn_file_actions_addopen(fa, 2, sv->stderr_path,
                                          O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (rc == 0)
    rc = posix_spawn_file_actions_addclosefrom_np(fa, 3);
  return rc;
}

/* Creates the two pipes (all four ends close-on-exec and above fd 2). */
static int make_pipes(int in_pipe[2], int out_pipe[2]) {
  in_pipe[0] = in_pipe[1] = out_pipe[0] = out_pipe[1] = -1;
  if (pipe2(in_pipe, O_CLOEXEC) < 0)
    return -errno;
  if (pipe2(out_pipe, O_CLOEXEC) < 0) {
    int e = errno;
    close(in_pipe[0]);
    close(in_pipe[1]);
    in_pipe[0] = in_pipe[1] = -1;
    return -e;
  }
  int *all[4] = {&in_pipe[0], &in_pipe[1], &out_pipe[0], &out_pipe[1]};
  int rc = 0;
  for (int i = 0; i < 4; i++) {
    *all[i] = fd_above_2(*all[i]);
    if (*all[i] < 0 && rc == 0)
      rc = -errno;
  }
  if (rc < 0)
    for (int i = 0; i < 4; i++)
      close_fd(all[i]);
  return rc;
}

/* Spawns the evaluator; on success sv->pid and both stream fds are set. */
static int sv_spawn(struct supervisor *sv, char *err, size_t errlen) {
  int in_pipe[2], out_pipe[2];
  int rc = make_pipes(in_pipe, out_pipe);
  if (rc < 0) {
    set_err(err, errlen, "cannot create pipes: %s", strerror(-rc));
    return rc;
  }
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t fa;
  const char *argv[16];
  char mem[32];
  build_argv(sv, argv, mem, sizeof mem);
  pid_t pid = -1;
  rc = spawn_attrs(&attr);
  if (rc == 0) {
    rc = spawn_files(sv, &fa, in_pipe[0], out_pipe[1]);
    if (rc == 0)
      rc = posix_spawnp(&pid, argv[0], &fa, &attr, (char *const *)argv, environ);
    posix_spawn_file_actions_destroy(&fa);
  }
  posix_spawnattr_destroy(&attr);
  close(in_pipe[0]);
  close(out_pipe[1]);
  if (rc != 0) {
    close(in_pipe[1]);
    close(out_pipe[0]);
    set_err(err, errlen, "cannot start %s: %s", argv[0], strerror(rc));
    return -rc;
  }
  fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  sv->to_child = in_pipe[1];
  sv->from_child = out_pipe[0];
  /* A helper process that inherited the pipes would hide the evaluator's death from
   * EOF; the pidfd reports it anyway. */
  /* The raw syscall: glibc's pidfd_open wrapper would require glibc 2.36 at run time. */
  sv->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);  /* close-on-exec by default */
  sv->len = sv->scanned = sv->line_end = 0;
  sv_set_pid(sv, pid);
  return 0;
}

/* ---- the stream ---- */

/* Waits until the stream is ready for events (POLLIN: our read end; POLLOUT: our write
 * end), the deadline passes (IO_TIMEOUT) or the process exits with the stream idle
 * (IO_EOF). IO_OK means "try the I/O again". */
static enum io_result sv_wait(struct supervisor *sv, short events, double deadline) {
  struct pollfd p[2] = {
      {.fd = events == POLLIN ? sv->from_child : sv->to_child, .events = events},
      {.fd = sv->pidfd, .events = POLLIN},
  };
  int left = ms_left(deadline);
  if (left == 0)
    return IO_TIMEOUT;
  int rc = poll(p, sv->pidfd >= 0 ? 2 : 1, left);
  if (rc == 0 && now_s() >= deadline)
    return IO_TIMEOUT;
  if (rc > 0 && p[0].revents == 0 && (p[1].revents & POLLIN))
    return IO_EOF;
  return IO_OK;
}

/* Writes all of data before deadline. SIGPIPE is blocked around the write and a SIGPIPE
 * it raised is consumed, so a dead evaluator gives IO_EOF instead of killing the server. */
static enum io_result sv_write_all(struct supervisor *sv, const char *data, size_t len,
                                   double deadline) {
  sigset_t pipe_set, old_mask, pending;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old_mask);
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE);
  enum io_result res = IO_OK;
  while (len > 0) {
    ssize_t n = write(sv->to_child, data, len);
    if (n > 0) {
      data += n;
      len -= (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN) {
      res = sv_wait(sv, POLLOUT, deadline);
      if (res != IO_OK)
        break;
      continue;
    }
    res = (n < 0 && errno == EPIPE) ? IO_EOF : IO_ERROR;
    break;
  }
  if (res == IO_EOF && !was_pending) {
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
  return res;
}

/* Makes room for at least one more read, up to max_line_bytes + 1 bytes of line. */
static int sv_grow(struct supervisor *sv) {
  size_t limit = sv->cfg.max_line_bytes + 2;
  if (sv->cap - sv->len >= 4096 || sv->cap >= limit)
    return 0;
  size_t cap = sv->cap ? sv->cap * 2 : READ_CHUNK;
  if (cap > limit)
    cap = limit;
  char *grown = realloc(sv->buf, cap);
  if (!grown)
    return -ENOMEM;
  sv->buf = grown;
  sv->cap = cap;
  return 0;
}

/* Reads until a whole line is buffered or deadline. On IO_OK *ret_line is the line,
 * NUL-terminated without its newline, inside sv->buf until sv_consume_line. */
static enum io_result sv_read_line(struct supervisor *sv, double deadline, char **ret_line,
                                   size_t *ret_len) {
  for (;;) {
    char *nl = sv->len > sv->scanned
                   ? memchr(sv->buf + sv->scanned, '\n', sv->len - sv->scanned)
                   : NULL;
    if (nl) {
      *nl = '\0';
      *ret_line = sv->buf;
      *ret_len = (size_t)(nl - sv->buf);
      sv->line_end = *ret_len + 1;
      return IO_OK;
    }
    sv->scanned = sv->len;
    if (sv->len > sv->cfg.max_line_bytes)
      return IO_TOO_LONG;
    if (sv_grow(sv) < 0)
      return IO_ERROR;
    size_t room = sv->cap - sv->len - 1;
    ssize_t n = read(sv->from_child, sv->buf + sv->len, room);
    if (n > 0) {
      sv->len += (size_t)n;
      continue;
    }
    if (n == 0)
      return IO_EOF;
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN)
      return IO_ERROR;
    enum io_result waited = sv_wait(sv, POLLIN, deadline);
    if (waited != IO_OK)
      return waited;
  }
}

/* Drops the line sv_read_line returned. A buffer grown for one huge reply is released
 * once empty, so an idle slot does not keep max_line_bytes. */
static void sv_consume_line(struct supervisor *sv) {
  size_t rest = sv->len - sv->line_end;
  memmove(sv->buf, sv->buf + sv->line_end, rest);
  sv->len = rest;
  sv->scanned = 0;
  sv->line_end = 0;
  if (rest == 0 && sv->cap > (1u << 20)) {
    free(sv->buf);
    sv->buf = NULL;
    sv->cap = 0;
  }
}

/* The parsed reply when line answers request id; NULL with the reason otherwise. */
static json_t *parse_reply(const char *line, size_t len, json_int_t id, char *why,
                           size_t whylen) {
  char shown[200];
  json_error_t jerr;
  json_t *obj = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
  snippet(line, len, shown, sizeof shown);
  if (!json_is_object(obj)) {
    set_err(why, whylen, "unparsable line from the evaluator: %s", shown);
    json_decref(obj);
    return NULL;
  }
  json_t *jid = json_object_get(obj, "id");
  if (!json_is_integer(jid) || json_integer_value(jid) != id) {
    set_err(why, whylen, "line is not the reply to request %lld: %s", (long long)id, shown);
    json_decref(obj);
    return NULL;
  }
  if (!json_is_boolean(json_object_get(obj, "ok"))) {
    set_err(why, whylen, "reply without a boolean \"ok\": %s", shown);
    json_decref(obj);
    return NULL;
  }
  return obj;
}

/* Sends one request line and reads its reply before deadline. On EX_REPLY *ret_reply is
 * the reply (caller owns); otherwise why says what went wrong. */
static enum exchange sv_exchange(struct supervisor *sv, const char *line, size_t len,
                                 json_int_t id, double deadline, json_t **ret_reply,
                                 char *why, size_t whylen) {
  enum io_result io = sv_write_all(sv, line, len, deadline);
  if (io == IO_TIMEOUT)
    return EX_TIMEOUT;
  if (io != IO_OK) {
    set_err(why, whylen, "evaluator closed its stdin");
    return EX_EOF;
  }
  char *reply_line;
  size_t reply_len;
  io = sv_read_line(sv, deadline, &reply_line, &reply_len);
  switch (io) {
  case IO_OK: {
    json_t *reply = parse_reply(reply_line, reply_len, id, why, whylen);
    sv_consume_line(sv);
    if (!reply)
      return EX_GARBAGE;
    *ret_reply = reply;
    return EX_REPLY;
  }
  case IO_TIMEOUT:
    return EX_TIMEOUT;
  case IO_TOO_LONG:
    set_err(why, whylen, "reply line longer than %zu bytes", sv->cfg.max_line_bytes);
    return EX_GARBAGE;
  case IO_EOF:
    set_err(why, whylen, "evaluator closed its stdout");
    return EX_EOF;
  case IO_ERROR:
    break;
  }
  set_err(why, whylen, "reading from the evaluator: %s", strerror(errno));
  return EX_EOF;
}

/* Serializes {"id":id,"op":op,...args} as one line (caller frees). */
static char *request_line(const char *op, json_t *args, json_int_t id, size_t *ret_len) {
  json_t *req = json_pack("{s:I,s:s}", "id", id, "op", op);
  if (!req)
    return NULL;
  if (args) {
    const char *key;
    json_t *value;
    json_object_foreach(args, key, value) {
      if (strcmp(key, "id") != 0 && strcmp(key, "op") != 0)
        json_object_set(req, key, value);
    }
  }
  char *text = json_dumps(req, JSON_COMPACT);
  json_decref(req);
  if (!text)
    return NULL;
  size_t len = strlen(text);
  char *line = realloc(text, len + 2);
  if (!line) {
    free(text);
    return NULL;
  }
  line[len] = '\n';
  line[len + 1] = '\0';
  *ret_len = len + 1;
  return line;
}

/* ---- start ---- */

/* Validates the ready line and keeps its device info. */
static int take_ready_line(struct supervisor *sv, const char *line, size_t len, char *err,
                           size_t errlen) {
  char shown[200];
  snippet(line, len, shown, sizeof shown);
  json_t *obj = json_loadb(line, len, 0, NULL);
  json_t *device = json_object_get(obj, "device");
  if (!json_is_object(obj) ||
      !json_is_string(json_object_get(obj, "event")) ||
      strcmp(json_string_value(json_object_get(obj, "event")), "ready") != 0 ||
      !json_is_object(device)) {
    set_err(err, errlen, "evaluator wrote %s instead of its ready line "
            "(crash/garbage_output)", shown);
    json_decref(obj);
    return -EPROTO;
  }
  json_incref(device);
  pthread_mutex_lock(&sv->lock);
  json_decref(sv->device_info);
  sv->device_info = device;
  pthread_mutex_unlock(&sv->lock);
  json_decref(obj);
  return 0;
}

/* Why a process that closed its stream died: its exit class, or that it still runs. */
static void explain_eof(struct supervisor *sv, char *cls, size_t clslen) {
  siginfo_t info;
  if (sv->pid > 0 && wait_exit_nowait(sv->pid, EOF_EXIT_WAIT_S, &info))
    class_from_siginfo(&info, cls, clslen);
  else
    snprintf(cls, clslen, "crash/garbage_output");
}

/* Spawns a process and waits for its ready line; on failure nothing is left running. */
static int sv_launch(struct supervisor *sv, char *err, size_t errlen) {
  sv_set_state(sv, SUPERVISOR_STARTING);
  int rc = sv_spawn(sv, err, errlen);
  if (rc < 0)
    return rc;
  double deadline = now_s() + sv->cfg.start_deadline_s;
  char *line;
  size_t len;
  enum io_result io = sv_read_line(sv, deadline, &line, &len);
  if (io == IO_OK) {
    rc = take_ready_line(sv, line, len, err, errlen);
    sv_consume_line(sv);
  } else if (io == IO_TIMEOUT) {
    set_err(err, errlen, "no ready line within %g s (timeout/start)",
            sv->cfg.start_deadline_s);
    rc = -ETIMEDOUT;
  } else if (io == IO_EOF) {
    char cls[64];
    explain_eof(sv, cls, sizeof cls);
    set_err(err, errlen, "evaluator ended before its ready line (%s); see its stderr", cls);
    rc = -ECHILD;
  } else {
    set_err(err, errlen, "ready line unreadable or longer than %zu bytes "
            "(crash/garbage_output)", sv->cfg.max_line_bytes);
    rc = -EPROTO;
  }
  if (rc < 0) {
    sv_kill_and_reap(sv);
    return rc;
  }
  sv_set_state(sv, SUPERVISOR_READY);
  return 0;
}

/* Copies cfg into sv, strings included (sv->cfg's pointers then name the copies).
 * False when out of memory. */
static bool copy_config(struct supervisor *sv, const struct supervisor_config *cfg) {
  sv->cfg = *cfg;
  sv->python = (cfg->python && cfg->python[0]) ? strdup(cfg->python) : NULL;
  sv->evaluator_path = dup_or_null(cfg->evaluator_path);
  sv->gpu_lib_path = dup_or_null(cfg->gpu_lib_path);
  sv->cache_dir = dup_or_null(cfg->cache_dir);
  sv->device = strdup(cfg->device ? cfg->device : "cpu");
  sv->stderr_path = dup_or_null(cfg->stderr_path);
  sv->cfg.python = sv->python;
  sv->cfg.evaluator_path = sv->evaluator_path;
  sv->cfg.gpu_lib_path = sv->gpu_lib_path;
  sv->cfg.cache_dir = sv->cache_dir;
  sv->cfg.device = sv->device;
  sv->cfg.stderr_path = sv->stderr_path;
  return sv->device && (sv->python || !cfg->python || !cfg->python[0]) &&
         (sv->evaluator_path || !cfg->evaluator_path) &&
         (sv->gpu_lib_path || !cfg->gpu_lib_path) && (sv->cache_dir || !cfg->cache_dir) &&
         (sv->stderr_path || !cfg->stderr_path);
}

/* Replaces the numbers of c left at zero (or negative) by the defaults. */
static void apply_defaults(struct supervisor_config *c) {
  struct supervisor_config d;
  supervisor_config_defaults(&d);
  if (c->compile_eval_deadline_s <= 0)
    c->compile_eval_deadline_s = d.compile_eval_deadline_s;
  if (c->profile_deadline_s <= 0)
    c->profile_deadline_s = d.profile_deadline_s;
  if (c->load_deadline_s <= 0)
    c->load_deadline_s = d.load_deadline_s;
  if (c->start_deadline_s <= 0)
    c->start_deadline_s = d.start_deadline_s;
  if (c->shutdown_deadline_s <= 0)
    c->shutdown_deadline_s = d.shutdown_deadline_s;
  if (c->max_line_bytes == 0)
    c->max_line_bytes = d.max_line_bytes;
  if (c->restart_limit <= 0)
    c->restart_limit = d.restart_limit;
  if (c->restart_limit > MAX_RESTART_LIMIT)
    c->restart_limit = MAX_RESTART_LIMIT;
  if (c->restart_window_s <= 0)
    c->restart_window_s = d.restart_window_s;
}

/* Allocates a supervisor with no process (caller owns; NULL when out of memory). */
static struct supervisor *sv_alloc(const struct supervisor_config *cfg) {
  struct supervisor *sv = calloc(1, sizeof *sv);
  if (!sv)
    return NULL;
  pthread_mutex_init(&sv->lock, NULL);
  atomic_init(&sv->restarts, 0);
  sv->pid = -1;
  sv->shown_pid = -1;
  sv->to_child = sv->from_child = sv->pidfd = -1;
  sv->next_id = 1;
  sv->state = SUPERVISOR_STARTING;
  if (!copy_config(sv, cfg)) {
    supervisor_free(sv);
    return NULL;
  }
  apply_defaults(&sv->cfg);
  return sv;
}

void supervisor_config_defaults(struct supervisor_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->compile_eval_deadline_s = 60;
  cfg->profile_deadline_s = 600;
  cfg->load_deadline_s = 120;
  cfg->start_deadline_s = 120;
  cfg->shutdown_deadline_s = 2;
  cfg->max_line_bytes = 16u << 20;
  cfg->restart_limit = 5;
  cfg->restart_window_s = 60;
}

int supervisor_start(const struct supervisor_config *cfg, struct supervisor **ret_sv,
                     char *err, size_t errlen) {
  if (!cfg || !ret_sv || !cfg->evaluator_path) {
    set_err(err, errlen, "no evaluator path configured");
    return -EINVAL;
  }
  struct supervisor *sv = sv_alloc(cfg);
  if (!sv) {
    set_err(err, errlen, "out of memory");
    return -ENOMEM;
  }
  int rc = sv_launch(sv, err, errlen);
  if (rc < 0) {
    supervisor_free(sv);
    return rc;
  }
  *ret_sv = sv;
  return 0;
}

int supervisor_new_disabled(const struct supervisor_config *cfg, const char *reason,
                            struct supervisor **ret_sv) {
  if (!cfg || !ret_sv)
    return -EINVAL;
  struct supervisor *sv = sv_alloc(cfg);
  if (!sv)
    return -ENOMEM;
  sv->state = SUPERVISOR_DISABLED;
  sv->last_error = dup_or_null(reason ? reason : "disabled");
  *ret_sv = sv;
  return 0;
}

/* ---- restarts ---- */

/* The storm guard: true when restart_limit restarts already happened inside the window
 * without a normal reply since. Forgets restarts that fell out of the window. */
static bool storm_exceeded(struct supervisor *sv, double now) {
  size_t kept = 0;
  for (size_t i = 0; i < sv->n_restart_times; i++)
    if (now - sv->restart_times[i] < sv->cfg.restart_window_s)
      sv->restart_times[kept++] = sv->restart_times[i];
  sv->n_restart_times = kept;
  return kept >= (size_t)sv->cfg.restart_limit;
}

/* Any reply in the protocol's shape proves the evaluator works: the storm is over. */
static void storm_reset(struct supervisor *sv) {
  sv->n_restart_times = 0;
}

/* Replays the last successful load_task in the fresh process. True when it loaded. A
 * process that fails the replay by timeout, death or garbage is killed and left down
 * (the next request restarts it, under the storm guard); a normal ok:false keeps it. */
static bool sv_reload(struct supervisor *sv) {
  size_t len;
  json_int_t id = sv->next_id++;
  char *line = request_line("load_task", sv->last_load, id, &len);
  if (!line)
    return false;
  json_t *reply = NULL;
  char why[512] = "";
  enum exchange ex = sv_exchange(sv, line, len, id, now_s() + sv->cfg.load_deadline_s,
                                 &reply, why, sizeof why);
  free(line);
  char msg[700];
  if (ex == EX_REPLY && json_is_true(json_object_get(reply, "ok"))) {
    storm_reset(sv);
    json_decref(reply);
    return true;
  }
  if (ex == EX_REPLY && !json_is_true(json_object_get(reply, "fatal"))) {
    storm_reset(sv);
    json_t *e = json_object_get(reply, "error");
    snprintf(msg, sizeof msg, "replaying load_task after a restart failed: %s: %s",
             str_or(json_object_get(e, "class")),
             str_or(json_object_get(e, "message")));
    json_decref(sv->last_load);
    sv->last_load = NULL;
  } else {
    char cls[64];
    if (ex == EX_EOF)
      explain_eof(sv, cls, sizeof cls);
    snprintf(msg, sizeof msg, "replaying load_task after a restart failed: %s",
             ex == EX_TIMEOUT ? "timeout/load_task"
             : ex == EX_REPLY ? "fatal reply"
             : ex == EX_EOF   ? cls
                              : why);
    sv_kill_and_reap(sv);
  }
  json_decref(reply);
  sv_log(sv, "%s", msg);
  sv_set_last_error(sv, msg);
  return false;
}

/* Kills what is left of the process, then (storm guard permitting) starts a new one and
 * replays the last load_task. reason (NULL: the process is already down and last_error
 * says why) is recorded as the last error. Returns 0 when a new process was started
 * (*ret_reloaded says whether the task is loaded in it; the process may have been lost
 * again during the replay), or a negative errno with the reason in err. */
static int sv_restart(struct supervisor *sv, const char *reason, bool *ret_reloaded,
                      char *err, size_t errlen) {
  sv_kill_and_reap(sv);
  if (reason)
    sv_set_last_error(sv, reason);
  if (!reason)
    reason = "evaluator down";
  if (sv->cfg.no_restart) {
    set_err(err, errlen, "evaluator down and restarts are disabled (%s)", reason);
    sv_set_state(sv, SUPERVISOR_RESTARTING);
    return -ECANCELED;
  }
  double now = now_s();
  if (storm_exceeded(sv, now)) {
    set_err(err, errlen, "%d restarts within %g s; evaluator marked failed",
            sv->cfg.restart_limit, sv->cfg.restart_window_s);
    sv_log(sv, "%s (last: %s)", err, reason);
    sv_set_state(sv, SUPERVISOR_FAILED);
    return -EAGAIN;
  }
  sv->restart_times[sv->n_restart_times++] = now;
  atomic_fetch_add(&sv->restarts, 1);
  sv_log(sv, "%s; restarting", reason);
  sv_set_state(sv, SUPERVISOR_RESTARTING);
  int rc = sv_launch(sv, err, errlen);
  if (rc < 0) {
    sv_log(sv, "restart failed: %s", err);
    sv_set_last_error(sv, err);
    sv_set_state(sv, SUPERVISOR_RESTARTING);
    return rc;
  }
  bool reloaded = sv->last_load ? sv_reload(sv) : false;
  sv_set_state(sv, sv->pid > 0 ? SUPERVISOR_READY : SUPERVISOR_RESTARTING);
  *ret_reloaded = reloaded;
  return 0;
}

/* A reply the supervisor makes up: {"id","ok":false,"error":{...},"fatal":false,
 * "restarted","reloaded"}. Caller owns. */
static json_t *synthetic_reply(json_int_t id, const char *stage, const char *cls,
                               const char *message, bool restarted, bool reloaded) {
  return json_pack("{s:I,s:b,s:{s:s,s:s,s:s},s:b,s:b,s:b}", "id", id, "ok", 0, "error",
                   "stage", stage, "class", cls, "message", message, "fatal", 0,
                   "restarted", restarted, "reloaded", reloaded);
}

/* Turns a failed exchange into a synthetic reply, after kill, restart and reload. */
static json_t *sv_fail_request(struct supervisor *sv, json_int_t id, const char *stage,
                               const char *cls, const char *message) {
  char reason[800], err[512] = "";
  snprintf(reason, sizeof reason, "%s: %s", cls, message);
  bool reloaded = false;
  int rc = sv_restart(sv, reason, &reloaded, err, sizeof err);
  bool restarted = rc == 0;
  char full[1400];
  if (restarted)
    snprintf(full, sizeof full, "%s; evaluator restarted%s", message,
             reloaded ? ", task reloaded" : "");
  else if (rc == -ECANCELED)
    snprintf(full, sizeof full, "%s; evaluator stopped (restarts disabled)", message);
  else
    snprintf(full, sizeof full, "%s; restart failed: %s", message, err);
  return synthetic_reply(id, stage, cls, full, restarted, reloaded);
}

/* ---- requests ---- */

static double default_deadline(const struct supervisor *sv, const char *op) {
  if (strcmp(op, "profile") == 0)
    return sv->cfg.profile_deadline_s;
  if (strcmp(op, "load_task") == 0)
    return sv->cfg.load_deadline_s;
  if (strcmp(op, "shutdown") == 0)
    return sv->cfg.shutdown_deadline_s;
  return sv->cfg.compile_eval_deadline_s;
}

/* Before a request: the process must exist and have said nothing since its last reply.
 * A process that died in between, or wrote stray output, is restarted (counted and
 * logged) so that this request does not inherit the blame. Returns NULL when ready to
 * send, or a failure reply (caller owns) when no process could be had. */
static json_t *sv_preflight(struct supervisor *sv, json_int_t id) {
  char reason[400] = "", err[512] = "";
  if (sv->pid > 0) {
    struct pollfd p[2] = {{.fd = sv->from_child, .events = POLLIN},
                          {.fd = sv->pidfd, .events = POLLIN}};
    if (sv->len == 0 && poll(p, sv->pidfd >= 0 ? 2 : 1, 0) == 0)
      return NULL;
    char *line;
    size_t len;
    enum io_result io = sv_read_line(sv, now_s(), &line, &len);
    if (io == IO_EOF) {
      char cls[64];
      explain_eof(sv, cls, sizeof cls);
      snprintf(reason, sizeof reason, "%s: evaluator %s between requests", cls,
               strcmp(cls, "crash/garbage_output") == 0 ? "closed its stdout" : "died");
    } else {
      snprintf(reason, sizeof reason,
               "crash/garbage_output: evaluator wrote output between requests");
    }
  }
  bool reloaded = false;
  int rc = sv_restart(sv, reason[0] ? reason : NULL, &reloaded, err, sizeof err);
  if (rc == 0 && sv->pid > 0)
    return NULL;
  if (rc == -EAGAIN)
    return synthetic_reply(id, "crash", "crash/restart_limit", err, false, false);
  if (rc == 0) {
    pthread_mutex_lock(&sv->lock);
    snprintf(err, sizeof err, "evaluator lost again while reloading the task: %s",
             sv->last_error ? sv->last_error : "?");
    pthread_mutex_unlock(&sv->lock);
  }
  return synthetic_reply(id, "crash", "crash/start_failed", err, false, false);
}

/* Requests refused without touching a process: failed or disabled slots. */
static json_t *sv_refuse(struct supervisor *sv, json_int_t id) {
  pthread_mutex_lock(&sv->lock);
  enum supervisor_state state = sv->state;
  char msg[600];
  snprintf(msg, sizeof msg, "%s: %s",
           state == SUPERVISOR_FAILED ? "evaluator failed after repeated restarts"
                                      : "evaluator disabled",
           sv->last_error ? sv->last_error : "no detail");
  pthread_mutex_unlock(&sv->lock);
  if (state != SUPERVISOR_FAILED && state != SUPERVISOR_DISABLED)
    return NULL;
  return synthetic_reply(id, "crash",
                         state == SUPERVISOR_FAILED ? "crash/restart_limit" : "crash/disabled",
                         msg, false, false);
}

/* A "fatal":true reply: the process is on its way out; let it exit, then make sure of
 * the whole group, restart and reload. */
static void sv_after_fatal(struct supervisor *sv, json_t *reply) {
  wait_exit_nowait(sv->pid, sv->cfg.shutdown_deadline_s, NULL);
  json_t *e = json_object_get(reply, "error");
  char reason[600], err[512];
  snprintf(reason, sizeof reason, "fatal reply %s: %s",
           str_or(json_object_get(e, "class")),
           str_or(json_object_get(e, "message")));
  bool reloaded = false;
  sv_restart(sv, reason, &reloaded, err, sizeof err);
}

/* Handles a reply that arrived in time. Returns it (ownership passes through). */
static json_t *sv_took_reply(struct supervisor *sv, const char *op, json_t *args,
                             json_t *reply) {
  storm_reset(sv);
  if (json_is_true(json_object_get(reply, "fatal"))) {
    sv_after_fatal(sv, reply);
    return reply;
  }
  if (strcmp(op, "load_task") == 0 && json_is_true(json_object_get(reply, "ok")))
    sv->last_load = args ? json_deep_copy(args) : json_object();
  sv_set_state(sv, SUPERVISOR_READY);
  return reply;
}

/* Builds the synthetic reply of a failed exchange (and restarts). */
static json_t *sv_exchange_failed(struct supervisor *sv, enum exchange ex, const char *op,
                                  json_int_t id, double deadline_s, const char *why) {
  char cls[128], msg[700];
  if (ex == EX_TIMEOUT) {
    sv_kill_and_reap(sv);
    snprintf(cls, sizeof cls, "timeout/%s", op);
    snprintf(msg, sizeof msg, "no reply to %s within %g s", op, deadline_s);
    return sv_fail_request(sv, id, "timeout", cls, msg);
  }
  if (ex == EX_EOF) {
    explain_eof(sv, cls, sizeof cls);
    if (strcmp(cls, "crash/garbage_output") == 0)
      snprintf(msg, sizeof msg, "during %s: %s but kept running", op, why);
    else
      snprintf(msg, sizeof msg, "evaluator died during %s", op);
    return sv_fail_request(sv, id, "crash", cls, msg);
  }
  snprintf(msg, sizeof msg, "during %s: %s", op, why);
  return sv_fail_request(sv, id, "crash", "crash/garbage_output", msg);
}

int supervisor_request(struct supervisor *sv, const char *op, json_t *args,
                       double deadline_s, json_t **ret_reply) {
  if (!sv || !op || !ret_reply || (args && !json_is_object(args)))
    return -EINVAL;
  if (deadline_s <= 0)
    deadline_s = default_deadline(sv, op);
  json_int_t id = sv->next_id++;
  json_t *reply = sv_refuse(sv, id);
  if (!reply)
    reply = sv_preflight(sv, id);
  if (reply) {
    *ret_reply = reply;
    return 0;
  }
  size_t len;
  char *line = request_line(op, args, id, &len);
  if (!line)
    return -ENOMEM;
  if (strcmp(op, "load_task") == 0) {
    json_decref(sv->last_load);  /* a new task replaces the old even if it fails */
    sv->last_load = NULL;
  }
  sv_set_state(sv, SUPERVISOR_BUSY);
  char why[512] = "";
  enum exchange ex = sv_exchange(sv, line, len, id, now_s() + deadline_s, &reply, why,
                                 sizeof why);
  free(line);
  if (ex == EX_REPLY)
    reply = sv_took_reply(sv, op, args, reply);
  else
    reply = sv_exchange_failed(sv, ex, op, id, deadline_s, why);
  if (!reply)
    return -ENOMEM;
  *ret_reply = reply;
  return 0;
}

/* ---- state for other threads ---- */

const char *supervisor_state_name(enum supervisor_state state) {
  switch (state) {
  case SUPERVISOR_STARTING: return "starting";
  case SUPERVISOR_READY: return "ready";
  case SUPERVISOR_BUSY: return "busy";
  case SUPERVISOR_RESTARTING: return "restarting";
  case SUPERVISOR_FAILED: return "failed";
  case SUPERVISOR_DISABLED: return "disabled";
  }
  return "unknown";
}

unsigned long supervisor_restarts(struct supervisor *sv) {
  return sv ? atomic_load(&sv->restarts) : 0;
}

enum supervisor_state supervisor_state(struct supervisor *sv) {
  pthread_mutex_lock(&sv->lock);
  enum supervisor_state state = sv->state;
  pthread_mutex_unlock(&sv->lock);
  return state;
}

long supervisor_pid(struct supervisor *sv) {
  pthread_mutex_lock(&sv->lock);
  long pid = sv->shown_pid;
  pthread_mutex_unlock(&sv->lock);
  return pid;
}

void supervisor_set_current_task(struct supervisor *sv, const char *task_id) {
  char *copy = dup_or_null(task_id);
  pthread_mutex_lock(&sv->lock);
  free(sv->current_task);
  sv->current_task = copy;
  pthread_mutex_unlock(&sv->lock);
}

/* Slot index: the device info's, else the --device argument when it is a number. */
static json_t *describe_index(const char *device, json_t *info) {
  json_t *index = json_object_get(info, "index");
  if (json_is_integer(index))
    return json_integer(json_integer_value(index));
  char *end;
  errno = 0;
  long n = strtol(device, &end, 10);
  if (errno == 0 && end != device && *end == '\0' && n >= 0)
    return json_integer(n);
  return json_null();
}

/* Name of the device: the driver's name, else the type ("cpu", "meta"), else --device. */
static json_t *describe_name(const char *device, json_t *info) {
  const char *name = json_string_value(json_object_get(info, "name"));
  if (!name)
    name = json_string_value(json_object_get(info, "type"));
  return json_string(name ? name : device);
}

/* The value of key in info when it has type want, else null (a new reference). */
static json_t *info_field(json_t *info, const char *key, json_type want) {
  json_t *v = json_object_get(info, key);
  return (v && json_typeof(v) == want) ? json_deep_copy(v) : json_null();
}

json_t *supervisor_describe(struct supervisor *sv) {
  pthread_mutex_lock(&sv->lock);
  json_t *info = sv->device_info ? json_deep_copy(sv->device_info) : json_object();
  json_t *out = json_pack(
      "{s:s,s:o,s:o,s:o,s:o,s:s,s:I,s:o,s:o,s:o}", "device", sv->device,
      "index", describe_index(sv->device, info), "name", describe_name(sv->device, info),
      "capability", info_field(info, "capability", JSON_STRING),
      "memory_bytes", info_field(info, "memory_bytes", JSON_INTEGER),
      "state", supervisor_state_name(sv->state),
      "restarts", (json_int_t)atomic_load(&sv->restarts),
      "current_task", sv->current_task ? json_string(sv->current_task) : json_null(),
      "pid", sv->shown_pid > 0 ? json_integer(sv->shown_pid) : json_null(),
      "last_error", sv->last_error ? json_string(sv->last_error) : json_null());
  pthread_mutex_unlock(&sv->lock);
  if (out && info && json_object_set_new(out, "info", info) == 0)
    return out;
  json_decref(info);
  json_decref(out);
  return NULL;
}

/* ---- shutdown ---- */

/* Asks politely (shutdown request, then EOF on stdin, then SIGTERM), then SIGKILLs the
 * group and reaps. Each polite step gets shutdown_deadline_s. */
static void sv_stop(struct supervisor *sv) {
  double grace = sv->cfg.shutdown_deadline_s;
  json_int_t id = sv->next_id++;
  size_t len;
  char *line = request_line("shutdown", NULL, id, &len);
  bool answered = false;
  if (line && sv->len == 0) {
    json_t *reply = NULL;
    char why[256];
    answered = sv_exchange(sv, line, len, id, now_s() + grace, &reply, why, sizeof why) ==
               EX_REPLY;
    json_decref(reply);
  }
  free(line);
  close_fd(&sv->to_child);
  bool exited = answered && wait_exit_nowait(sv->pid, grace, NULL);
  if (!exited) {
    kill(-sv->pid, SIGTERM);
    wait_exit_nowait(sv->pid, grace, NULL);
  }
  sv_kill_and_reap(sv);
}

void supervisor_free(struct supervisor *sv) {
  if (!sv)
    return;
  if (sv->pid > 0)
    sv_stop(sv);
  reap_pending(sv, 5.0);
  if (sv->n_pending > 0)
    sv_log(sv, "%zu killed evaluator processes could not be reaped", sv->n_pending);
  close_fd(&sv->to_child);
  close_fd(&sv->from_child);
  close_fd(&sv->pidfd);
  free(sv->buf);
  json_decref(sv->last_load);
  json_decref(sv->device_info);
  free(sv->current_task);
  free(sv->last_error);
  free(sv->python);
  free(sv->evaluator_path);
  free(sv->gpu_lib_path);
  free(sv->cache_dir);
  free(sv->device);
  free(sv->stderr_path);
  pthread_mutex_destroy(&sv->lock);
  free(sv);
}

/* ---- pool ---- */

struct supervisor_pool {
  struct supervisor **items;
  size_t count, cap;
};

struct supervisor_pool *supervisor_pool_new(void) {
  return calloc(1, sizeof(struct supervisor_pool));
}

int supervisor_pool_add(struct supervisor_pool *pool, struct supervisor *sv) {
  if (!pool || !sv) {
    supervisor_free(sv);
    return -EINVAL;
  }
  if (pool->count == pool->cap) {
    size_t cap = pool->cap ? pool->cap * 2 : 4;
    struct supervisor **grown = realloc(pool->items, cap * sizeof *grown);
    if (!grown) {
      supervisor_free(sv);
      return -ENOMEM;
    }
    pool->items = grown;
    pool->cap = cap;
  }
  pool->items[pool->count++] = sv;
  return 0;
}

size_t supervisor_pool_count(const struct supervisor_pool *pool) {
  return pool ? pool->count : 0;
}

struct supervisor *supervisor_pool_get(const struct supervisor_pool *pool, size_t i) {
  return (pool && i < pool->count) ? pool->items[i] : NULL;
}

json_t *supervisor_pool_describe(struct supervisor_pool *pool) {
  static const char *const keys[] = {"index", "name", "capability", "memory_bytes",
                                     "state", "restarts", "current_task"};
  json_t *devices = json_array();
  json_t *out = json_pack("{s:o}", "devices", devices);
  if (!out)
    return NULL;
  for (size_t i = 0; i < supervisor_pool_count(pool); i++) {
    json_t *full = supervisor_describe(pool->items[i]);
    json_t *row = json_object();
    for (size_t k = 0; full && row && k < sizeof keys / sizeof keys[0]; k++)
      json_object_set(row, keys[k], json_object_get(full, keys[k]));
    json_decref(full);
    if (!full || !row || json_array_append_new(devices, row) < 0) {
      json_decref(out);
      return NULL;
    }
  }
  return out;
}

unsigned long supervisor_pool_restarts(struct supervisor_pool *pool) {
  unsigned long total = 0;
  for (size_t i = 0; i < supervisor_pool_count(pool); i++)
    total += supervisor_restarts(pool->items[i]);
  return total;
}

void supervisor_pool_free(struct supervisor_pool *pool) {
  if (!pool)
    return;
  for (size_t i = 0; i < pool->count; i++)
    supervisor_free(pool->items[i]);
  free(pool->items);
  free(pool);
}

/* ---- discovery and defaults ---- */

int supervisor_count_gpus(void) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return 0;
  int (*cu_init)(unsigned int) = NULL;
  int (*cu_count)(int *) = NULL;
  void *sym = dlsym(lib, "cuInit");
  memcpy(&cu_init, &sym, sizeof sym);  /* object-to-function pointer, ISO-clean */
  sym = dlsym(lib, "cuDeviceGetCount");
  memcpy(&cu_count, &sym, sizeof sym);
  int n = 0;
  if (!cu_init || !cu_count || cu_init(0) != 0 || cu_count(&n) != 0 || n < 0)
    n = 0;
  /* The library stays loaded: unloading the driver after cuInit is not supported. */
  return n;
}

static bool file_exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* Directory of the running executable into out; false when unknown. */
static bool exe_dir(char *out, size_t outlen) {
  char path[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0)
    return false;
  path[n] = '\0';
  char *slash = strrchr(path, '/');
  if (!slash)
    return false;
  *slash = '\0';
  return snprintf(out, outlen, "%s", path) < (int)outlen;
}

/* The first of dir + suffixes[i] that exists (caller frees), or NULL. */
static char *first_existing(const char *dir, const char *const *suffixes, size_t n) {
  char path[PATH_MAX];
  for (size_t i = 0; i < n; i++) {
    int w = snprintf(path, sizeof path, "%s%s", dir, suffixes[i]);
    if (w > 0 && (size_t)w < sizeof path && file_exists(path))
      return strdup(path);
  }
  return NULL;
}

char *supervisor_default_python(void) {
  const char *env = getenv("OPFORGE_PYTHON");
  if (env && env[0])
    return strdup(env);
  const char *home = getenv("HOME");
  char path[PATH_MAX];
  if (home && home[0]) {
    int w = snprintf(path, sizeof path, "%s/.cache/opforge/venv/bin/python", home);
    if (w > 0 && (size_t)w < sizeof path && access(path, X_OK) == 0)
      return strdup(path);
  }
  return strdup("python3");
}

/* Source dir of the meson build dir that holds the executable, from meson-info. */
static char *meson_source_dir(const char *dir) {
  char path[PATH_MAX];
  int w = snprintf(path, sizeof path, "%s/meson-info/meson-info.json", dir);
  if (w <= 0 || (size_t)w >= sizeof path)
    return NULL;
  json_t *info = json_load_file(path, 0, NULL);
  const char *src = json_string_value(
      json_object_get(json_object_get(info, "directories"), "source"));
  char *out = src ? strdup(src) : NULL;
  json_decref(info);
  return out;
}

char *supervisor_default_evaluator(void) {
  const char *env = getenv("OPFORGE_EVALUATOR");
  if (env && env[0])
    return strdup(env);
  char dir[PATH_MAX];
  if (!exe_dir(dir, sizeof dir))
    return NULL;
  static const char *const suffixes[] = {"/../share/opforge/evaluator.py",
                                         "/../gpu/evaluator.py", "/../../gpu/evaluator.py"};
  char *found = first_existing(dir, suffixes, sizeof suffixes / sizeof suffixes[0]);
  if (found)
    return found;
  char *src = meson_source_dir(dir);
  static const char *const in_src[] = {"/gpu/evaluator.py"};
  found = src ? first_existing(src, in_src, 1) : NULL;
  free(src);
  return found;
}

char *supervisor_default_gpu_lib(void) {
  const char *env = getenv("OPFORGE_GPU_LIB");
  if (env && env[0])
    return strdup(env);
  char dir[PATH_MAX];
  if (!exe_dir(dir, sizeof dir))
    return NULL;
  static const char *const suffixes[] = {"/gpu/libopforge_gpu.so",
                                         "/../lib/opforge/libopforge_gpu.so",
                                         "/../lib/libopforge_gpu.so"};
  return first_existing(dir, suffixes, sizeof suffixes / sizeof suffixes[0]);
}
