/* Helpers of the tests that run the opforge binary as a child (tests/cli): its output,
 * its server on port 0, and plain HTTP requests to that server. Linked with
 * tests/api/harness.c, whose child-process functions start the server. */
#ifndef OPFORGE_TESTS_CHILD_H
#define OPFORGE_TESTS_CHILD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

/* A KernelBench reference the server accepts (torch.relu on a 16x1024 input). */
extern const char child_reference_ok[];

/* Keeps the children from picking up a developer's settings or a proxy (unsets
 * OPFORGE_SERVER, OPFORGE_TOKEN and OPFORGE_TOKEN_FILE, sets NO_PROXY=*), ignores SIGPIPE
 * and initializes libcurl (the caller ends with curl_global_cleanup). Call from a group
 * setup, before any child starts. */
void child_isolate(void);

/* Ends a group that child_isolate began: stops its shared server pid (when > 0) with
 * child_server_stop, removes the scratch directory dir and cleans libcurl up. Returns 0,
 * or -1 (printed) when the server did not exit 0. */
int child_group_teardown(pid_t pid, const char *dir);

/* True when the len bytes at s are a lowercase version-4 UUID. */
bool child_is_uuid_v4(const char *s, size_t len);

/* A loopback TCP port nobody listens on (bound, then released). */
int child_dead_port(void);

/* A growing NUL-terminated text; zero-initialized is empty. The caller frees s. */
struct text {
  char *s;
  size_t len, cap;
};

/* Appends n bytes of p; fails the running test when memory runs out. */
void text_add(struct text *t, const char *p, size_t n);

/* The text so far ("" when nothing was added); borrowed from t. */
const char *text_str(const struct text *t);

/* Starts `bin serve --listen 127.0.0.1:0 --data data [extra...]` (extra NULL-terminated,
 * may be NULL) in this process's environment, making data when it is absent, with stderr
 * appended to data/server.log. Waits up to timeout_ms for its listening line and writes
 * its base URL into base (64 bytes). Returns the pid (stop it with child_server_stop), or
 * -1 after printing why. The strings stay the caller's. */
pid_t child_server_start(const char *bin, const char *data, const char *const *extra,
                         char *base, long timeout_ms);

/* Stops a server with SIGTERM, killing it after 10 s. Returns its exit status, or -1 when
 * it died of a signal or had to be killed. */
int child_server_stop(pid_t pid);

/* A run of the CLI; out and err collect what it writes (the caller frees them with
 * proc_clear). */
struct proc {
  pid_t pid;
  int out_fd, err_fd; /* err_fd is -1 under a pty: both streams come through out_fd */
  struct text out, err;
};

/* Starts {bin, args...} (args NULL-terminated, at most 46) with stdout and stderr on pipes,
 * or both on one pseudo-terminal when pty. env, when not NULL, holds NAME, value pairs
 * (NULL-terminated) set in the child. Fails the running test when it cannot start. */
void proc_start(struct proc *p, const char *bin, const char *const *args,
                const char *const *env, bool pty);

/* Reads what the child writes until needle shows up on its stdout (NULL: until both
 * streams end) or timeout_ms pass. Returns whether the needle (or the end) came. */
bool proc_pump(struct proc *p, const char *needle, int timeout_ms);

/* Collects the rest of the output, waiting up to timeout_ms (then the child is killed),
 * and reaps the child. Returns its exit status, or -1 when it was killed or died of a
 * signal. */
int proc_finish(struct proc *p, int timeout_ms);

/* Frees the collected output (p itself stays the caller's); NULL is a no-op. */
void proc_clear(struct proc *p);

/* One request (no body) to base + path, failing the running test when it gets no answer.
 * Returns the HTTP status and sets *ret_body to the parsed reply (a new reference; NULL
 * when the reply was empty or not JSON). */
long child_http(const char *base, const char *method, const char *path, json_t **ret_body);

#endif
