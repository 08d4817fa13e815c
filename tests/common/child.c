/* Helpers of the tests that run the opforge binary as a child (tests/cli): its output,
 * its server on port 0, and plain HTTP requests to that server. */
#include "tests/common/child.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <curl/curl.h>

/* cmocka needs these first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/api/harness.h"

#define STOP_TIMEOUT_MS 10000L

/* ---- the test's surroundings ---- */

const char child_reference_ok[] =
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "class Model(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "\n"
    "    def forward(self, x):\n"
    "        return torch.relu(x)\n"
    "\n"
    "def get_inputs():\n"
    "    return [torch.randn(16, 1024)]\n"
    "\n"
    "def get_init_inputs():\n"
    "    return []\n";

void child_isolate(void) {
  unsetenv("OPFORGE_SERVER");
  unsetenv("OPFORGE_TOKEN");
  unsetenv("OPFORGE_TOKEN_FILE");
  setenv("NO_PROXY", "*", 1);
  signal(SIGPIPE, SIG_IGN);
  curl_global_init(CURL_GLOBAL_DEFAULT);
}

int child_group_teardown(pid_t pid, const char *dir) {
  int rc = 0;
  if (pid > 0 && child_server_stop(pid) != 0) {
    print_error("the server did not exit 0 on SIGTERM\n");
    rc = -1;
  }
  harness_remove_tree(dir);
  curl_global_cleanup();
  return rc;
}

bool child_is_uuid_v4(const char *s, size_t len) {
  if (len != 36)
    return false;
  for (size_t i = 0; i < 36; i++) {
    bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? s[i] != '-' : !strchr("0123456789abcdef", s[i]))
      return false;
  }
  return s[14] == '4' && strchr("89ab", s[19]);
}

int child_dead_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof sa;
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
  close(fd);
  return ntohs(sa.sin_port);
}

/* ---- text ---- */

void text_add(struct text *t, const char *p, size_t n) {
  if (t->len + n + 1 > t->cap) {
    t->cap = (t->len + n + 1) * 2;
    t->s = realloc(t->s, t->cap);
    assert_non_null(t->s);
  }
  memcpy(t->s + t->len, p, n);
  t->len += n;
  t->s[t->len] = '\0';
}

const char *text_str(const struct text *t) {
  return t->s ? t->s : "";
}

/* ---- the server ---- */

pid_t child_server_start(const char *bin, const char *data, const char *const *extra,
                         char *base, long timeout_ms) {
  if (mkdir(data, 0700) != 0 && errno != EEXIST) {
    print_error("cannot make %s: %s\n", data, strerror(errno));
    return -1;
  }
  const char *argv[32] = {bin, "serve", "--listen", "127.0.0.1:0", "--data", data};
  size_t n = 6;
  for (size_t i = 0; extra && extra[i] && n < 31; i++)
    argv[n++] = extra[i];
  argv[n] = NULL;
  char log_path[PATH_MAX + 16];
  snprintf(log_path, sizeof log_path, "%s/server.log", data);
  pid_t pid = -1;
  int out_fd = -1;
  if (harness_spawn(argv, NULL, log_path, &pid, &out_fd) != 0)
    return -1;
  int rc = harness_wait_listening(out_fd, timeout_ms, base, 64);
  close(out_fd); /* the server prints nothing more on stdout */
  if (rc != 0) {
    print_error("server did not start; its log is %s\n", log_path);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
  }
  return pid;
}

int child_server_stop(pid_t pid) {
  kill(pid, SIGTERM);
  int st = harness_wait_exit(pid, STOP_TIMEOUT_MS);
  if (st == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return -1;
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- running the CLI ---- */

void proc_start(struct proc *p, const char *bin, const char *const *args,
                const char *const *env, bool pty) {
  const char *argv[48] = {bin};
  int n = 1;
  for (; args[n - 1] && n < 47; n++)
    argv[n] = args[n - 1];
  argv[n] = NULL;
  memset(p, 0, sizeof *p);
  int out[2], err[2];
  if (pty) {
    p->pid = forkpty(&p->out_fd, NULL, NULL, NULL);
    p->err_fd = -1;
  } else {
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(err), 0);
    p->pid = fork();
  }
  assert_true(p->pid >= 0);
  if (p->pid == 0) {
    if (!pty) {
      dup2(out[1], STDOUT_FILENO);
      dup2(err[1], STDERR_FILENO);
      close(out[0]), close(err[0]), close(out[1]), close(err[1]);
    }
    for (int i = 0; env && env[i]; i += 2)
      setenv(env[i], env[i + 1], 1);
    execv(bin, (char *const *)argv);
    _exit(127);
  }
  if (!pty) {
    close(out[1]), close(err[1]);
    p->out_fd = out[0];
    p->err_fd = err[0];
  }
}

bool proc_pump(struct proc *p, const char *needle, int timeout_ms) {
  for (int waited = 0; waited < timeout_ms;) {
    if (needle && strstr(text_str(&p->out), needle))
      return true;
    if (p->out_fd < 0 && p->err_fd < 0)
      return needle == NULL;
    struct pollfd pfd[2] = {{.fd = p->out_fd, .events = POLLIN},
                            {.fd = p->err_fd, .events = POLLIN}};
    int ready = poll(pfd, 2, 100);
    if (ready == 0)
      waited += 100;
    for (int i = 0; i < 2 && ready > 0; i++) {
      if (!pfd[i].revents)
        continue;
      char buf[4096];
      ssize_t n = read(pfd[i].fd, buf, sizeof buf);
      int *fd = i == 0 ? &p->out_fd : &p->err_fd;
      if (n > 0) {
        text_add(i == 0 ? &p->out : &p->err, buf, (size_t)n);
      } else if (n == 0 || errno != EINTR) { /* a pty master reads EIO at the end */
        close(*fd);
        *fd = -1;
      }
    }
  }
  return false;
}

int proc_finish(struct proc *p, int timeout_ms) {
  bool done = proc_pump(p, NULL, timeout_ms);
  if (!done)
    kill(p->pid, SIGKILL);
  int st = 0;
  waitpid(p->pid, &st, 0);
  if (p->out_fd >= 0)
    close(p->out_fd);
  if (p->err_fd >= 0)
    close(p->err_fd);
  return done && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

void proc_clear(struct proc *p) {
  if (!p)
    return;
  free(p->out.s);
  free(p->err.s);
}

/* ---- plain HTTP ---- */

/* libcurl write callback: appends to a struct text. */
static size_t sink_cb(char *ptr, size_t size, size_t nmemb, void *user) {
  text_add(user, ptr, size * nmemb);
  return size * nmemb;
}

long child_http(const char *base, const char *method, const char *path, json_t **ret_body) {
  char url[512];
  snprintf(url, sizeof url, "%s%s", base, path);
  struct text body = {0};
  CURL *easy = curl_easy_init();
  assert_non_null(easy);
  curl_easy_setopt(easy, CURLOPT_URL, url);
  curl_easy_setopt(easy, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, sink_cb);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT, 30L);
  assert_int_equal(curl_easy_perform(easy), CURLE_OK);
  long status = 0;
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
  curl_easy_cleanup(easy);
  *ret_body = body.len ? json_loadb(body.s, body.len, 0, NULL) : NULL;
  free(body.s);
  return status;
}
