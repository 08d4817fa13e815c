/* A scripted stand-in for the evaluator package (gpu/evaluator/): speaks the JSON-lines
 * protocol and misbehaves on request, so that tests/supervisor can drive every failure
 * path of the supervisor.
 *
 * Arguments are those the supervisor passes (--device, --lib, ...); behaviour comes from
 * the environment:
 *   FAKE_RECORD=path       append "start <pid> <args...>" and every request line
 *   FAKE_READY_DELAY_MS=n  sleep before the ready line
 *   FAKE_BEFORE_READY=exit|garbage|hang   exit 3 / write a non-ready line / never answer
 *   FAKE_MODE=hang|segv|abort|exit7|garbage|wrong_id|fatal|huge|extra|slow|close_stdout
 *                          (extra: answer, then write a stray line; slow: answer late;
 *                          fail: ok:false with FAKE_FAIL_STAGE / FAKE_FAIL_CLASS, default
 *                          "load" / "load/ValueError", and a two-line traceback)
 *   FAKE_OP=op             the request op that triggers FAKE_MODE (required with it)
 *   FAKE_ONCE=path         trigger only while path does not exist; create it on trigger
 *   FAKE_AFTER=n           let the first n matching requests of each process pass
 *   FAKE_FROM_START=n      trigger only in the nth and later processes (counted by the
 *                          "start" lines of FAKE_RECORD)
 *   FAKE_GRANDCHILD=path   fork a child that sleeps forever, write its pid to path
 *   FAKE_IGNORE_TERM=1     ignore SIGTERM
 *   FAKE_HUGE_BYTES=n      size of the "huge" line (default 4 MiB)
 *   FAKE_SLOW_MS=n         delay of "slow" before answering (default 500)
 *   FAKE_HELLO=1           print "fake evaluator <pid> starting" on fd 1 (= stderr)
 * Normal replies: load_task -> {"loaded":true,"name":<name>}; profile -> {"task":<name of
 * the task loaded in this process>,"pid":N} or ok:false stage "profile" when none is
 * loaded; evaluate -> {"correct":true}; echo -> the request; shutdown -> {"bye":true},
 * exit 0. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static FILE *proto;          /* the protocol stream (fd 1) */
static char *loaded_name;    /* name of the task loaded in this process */
static long generation;      /* 1 for the first process of a test, 2 for the next... */
static long matched;         /* requests of this process that matched FAKE_OP */

static long env_long(const char *name, long fallback) {
  const char *v = getenv(name);
  if (!v || !*v)
    return fallback;
  char *end;
  errno = 0;
  long n = strtol(v, &end, 10);
  return (errno || *end) ? fallback : n;
}

static void sleep_ms(long ms) {
  struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
  }
}

static void hang(void) {
  for (;;)
    pause();
}

/* Appends text (already ending in a newline) to FAKE_RECORD. */
static void record(const char *text) {
  const char *path = getenv("FAKE_RECORD");
  if (!path)
    return;
  FILE *f = fopen(path, "a");
  if (!f)
    return;
  fputs(text, f);
  fclose(f);
}

static void record_start(int argc, char **argv) {
  char line[2048];
  int n = snprintf(line, sizeof line, "start %ld", (long)getpid());
  for (int i = 1; i < argc && n > 0 && (size_t)n < sizeof line; i++)
    n += snprintf(line + n, sizeof line - (size_t)n, " %s", argv[i]);
  if (n > 0 && (size_t)n < sizeof line - 1)
    memcpy(line + n, "\n", 2);
  record(line);
  const char *path = getenv("FAKE_RECORD");
  FILE *f = path ? fopen(path, "r") : NULL;
  char row[2048];
  while (f && fgets(row, sizeof row, f))
    generation += strncmp(row, "start ", 6) == 0;
  if (f)
    fclose(f);
}

static void spawn_grandchild(void) {
  const char *path = getenv("FAKE_GRANDCHILD");
  if (!path)
    return;
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGTERM, SIG_IGN);  /* only the group SIGKILL may end it */
    hang();
  }
  FILE *f = fopen(path, "w");
  if (f) {
    fprintf(f, "%ld\n", (long)pid);
    fclose(f);
  }
}

/* Writes one JSON value as a line and frees it. */
static void send_line(json_t *v) {
  char *text = json_dumps(v, JSON_COMPACT);
  fprintf(proto, "%s\n", text);
  fflush(proto);
  free(text);
  json_decref(v);
}

static void ready(void) {
  const char *before = getenv("FAKE_BEFORE_READY");
  sleep_ms(env_long("FAKE_READY_DELAY_MS", 0));
  if (before && strcmp(before, "exit") == 0)
    exit(3);
  if (before && strcmp(before, "hang") == 0)
    hang();
  if (before && strcmp(before, "garbage") == 0) {
    fprintf(proto, "Traceback (most recent call last): oops\n");
    fflush(proto);
    hang();
  }
  send_line(json_pack("{s:s,s:i,s:{s:s,s:i,s:s,s:I}}", "event", "ready", "pid",
                      (int)getpid(), "device", "name", "Fake H200", "index", 0,
                      "capability", "9.0", "memory_bytes", (json_int_t)150000000000LL));
}

/* True when FAKE_MODE applies to op now (FAKE_ONCE: only the first time ever). */
static int triggered(const char *op) {
  const char *want = getenv("FAKE_OP");
  const char *mode = getenv("FAKE_MODE");
  if (!mode || !want || strcmp(want, op) != 0)
    return 0;
  if (matched++ < env_long("FAKE_AFTER", 0) || generation < env_long("FAKE_FROM_START", 0))
    return 0;
  const char *once = getenv("FAKE_ONCE");
  if (once) {
    int fd = open(once, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
      return 0;
    close(fd);
  }
  return 1;
}

/* Acts out mode for request id; returns 1 when that already answered the request. */
static int misbehave(const char *mode, json_int_t id) {
  if (strcmp(mode, "hang") == 0)
    hang();
  /* Default dispositions first: a sanitizer build would catch the signal and exit 1. */
  if (strcmp(mode, "segv") == 0) {
    signal(SIGSEGV, SIG_DFL);
    raise(SIGSEGV);
  }
  if (strcmp(mode, "abort") == 0) {
    signal(SIGABRT, SIG_DFL);
    abort();
  }
  if (strcmp(mode, "exit7") == 0)
    exit(7);
  if (strcmp(mode, "close_stdout") == 0) {
    fclose(proto);
    hang();
  }
  if (strcmp(mode, "garbage") == 0) {
    fprintf(proto, "this is not json\n");
    fflush(proto);
    hang();
  }
  if (strcmp(mode, "wrong_id") == 0) {
    send_line(json_pack("{s:I,s:b,s:{}}", "id", id + 100, "ok", 1, "result"));
    hang();
  }
  if (strcmp(mode, "huge") == 0) {
    long n = env_long("FAKE_HUGE_BYTES", 4L << 20);
    fprintf(proto, "{\"id\":%lld,\"ok\":true,\"result\":{\"pad\":\"", (long long)id);
    for (long i = 0; i < n; i++)
      fputc('x', proto);
    fprintf(proto, "\"}}\n");
    fflush(proto);
    hang();
  }
  if (strcmp(mode, "fail") == 0) {
    const char *stage = getenv("FAKE_FAIL_STAGE");
    const char *cls = getenv("FAKE_FAIL_CLASS");
    send_line(json_pack("{s:I,s:b,s:{s:s,s:s,s:s,s:s},s:b}", "id", id, "ok", 0, "error",
                        "stage", stage ? stage : "load", "class",
                        cls ? cls : "load/ValueError", "message", "ValueError: boom",
                        "traceback", "Traceback (most recent call last):\nValueError: boom\n",
                        "fatal", 0));
    return 1;
  }
  if (strcmp(mode, "fatal") == 0) {
    send_line(json_pack("{s:I,s:b,s:{s:s,s:s,s:s,s:s},s:b}", "id", id, "ok", 0, "error",
                        "stage", "launch", "class", "cuda/CUDA_ERROR_ILLEGAL_ADDRESS",
                        "message", "an illegal memory access was encountered",
                        "traceback", "", "fatal", 1));
    exit(0);
  }
  return 0;
}

/* The reply of a well-behaved evaluator (caller sends it). */
static json_t *normal_reply(const char *op, json_t *req, json_int_t id) {
  if (strcmp(op, "load_task") == 0) {
    const char *name = json_string_value(json_object_get(req, "name"));
    free(loaded_name);
    loaded_name = strdup(name ? name : "");
    return json_pack("{s:I,s:b,s:{s:b,s:s}}", "id", id, "ok", 1, "result", "loaded", 1,
                     "name", loaded_name);
  }
  if (strcmp(op, "profile") == 0) {
    if (!loaded_name)
      return json_pack("{s:I,s:b,s:{s:s,s:s,s:s},s:b}", "id", id, "ok", 0, "error",
                       "stage", "profile", "class", "profile/no_task", "message",
                       "no task loaded", "fatal", 0);
    return json_pack("{s:I,s:b,s:{s:s,s:i}}", "id", id, "ok", 1, "result", "task",
                     loaded_name, "pid", (int)getpid());
  }
  if (strcmp(op, "evaluate") == 0)
    return json_pack("{s:I,s:b,s:{s:b}}", "id", id, "ok", 1, "result", "correct", 1);
  if (strcmp(op, "echo") == 0)
    return json_pack("{s:I,s:b,s:O}", "id", id, "ok", 1, "result", req);
  if (strcmp(op, "shutdown") == 0)
    return json_pack("{s:I,s:b,s:{s:b}}", "id", id, "ok", 1, "result", "bye", 1);
  return json_pack("{s:I,s:b,s:{s:s,s:s,s:s},s:b}", "id", id, "ok", 0, "error", "stage",
                   "protocol", "class", "protocol/unknown_op", "message", op, "fatal", 0);
}

static void serve(void) {
  char *line = NULL;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&line, &cap, stdin)) > 0) {
    record(line);
    json_t *req = json_loads(line, 0, NULL);
    const char *op = json_string_value(json_object_get(req, "op"));
    json_int_t id = json_integer_value(json_object_get(req, "id"));
    if (!op)
      op = "";
    const char *mode = triggered(op) ? getenv("FAKE_MODE") : "";
    if (strcmp(mode, "slow") == 0)
      sleep_ms(env_long("FAKE_SLOW_MS", 500));
    int answered = misbehave(mode, id);
    int bye = strcmp(op, "shutdown") == 0;
    if (!answered)
      send_line(normal_reply(op, req, id));
    if (strcmp(mode, "extra") == 0) {
      fprintf(proto, "stray line\n");
      fflush(proto);
    }
    json_decref(req);
    if (bye)
      exit(0);
  }
  free(line);
}

int main(int argc, char **argv) {
  /* Like the real evaluator: keep the protocol on a private fd, point fd 1 at stderr. */
  int fd = dup(1);
  dup2(2, 1);
  proto = fdopen(fd, "w");
  if (!proto)
    return 2;
  if (env_long("FAKE_IGNORE_TERM", 0))
    signal(SIGTERM, SIG_IGN);
  record_start(argc, argv);
  if (env_long("FAKE_HELLO", 0)) {
    printf("fake evaluator %ld starting\n", (long)getpid());  /* fd 1 is stderr now */
    fflush(stdout);
  }
  spawn_grandchild();
  ready();
  serve();
  return 0;
}
