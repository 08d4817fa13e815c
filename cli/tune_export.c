/* `opforge tune --export DIR`: the KernelBench file and the kernel source of each
 * succeeded task. */
#include "cli/tune_export.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <curl/curl.h>

#define CONNECT_TIMEOUT_S 10L
#define REQUEST_TIMEOUT_S 120L

int tune_export_prepare(const char *dir) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path) {
    fprintf(stderr, "error: --export %s: the path is too long\n", dir);
    return -1;
  }
  for (char *p = path + 1;; p++) {
    bool end = *p == '\0';
    if (*p != '/' && !end)
      continue;
    *p = '\0';
    if (mkdir(path, 0777) != 0 && errno != EEXIST) {
      fprintf(stderr, "error: cannot create %s: %s\n", path, strerror(errno));
      return -1;
    }
    if (end)
      break;
    *p = '/';
  }
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    fprintf(stderr, "error: --export %s is not a directory\n", dir);
    return -1;
  }
  return 0;
}

void tune_export_path(const char *dir, const struct tune_task *t, bool kernel, char *out,
                      size_t outlen) {
  size_t len = strlen(dir);
  snprintf(out, outlen, "%s%s%s%s", dir, len && dir[len - 1] == '/' ? "" : "/", t->name,
           kernel ? ".cu" : "_new.py");
}

/* Writes len bytes to path. Returns 0, or -1 after printing why. */
static int write_file(const char *path, const char *data, size_t len) {
  FILE *f = fopen(path, "w");
  bool ok = f && fwrite(data, 1, len, f) == len;
  ok = f && fclose(f) == 0 && ok;
  if (!ok)
    fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
  return ok ? 0 : -1;
}

/* ---- the KernelBench file: a text reply ---- */

struct reply {
  char *data;
  size_t len, cap;
};

/* libcurl write callback: appends to a struct reply (at most CLI_MAX_REPLY_BYTES). */
static size_t collect(char *ptr, size_t size, size_t nmemb, void *user) {
  struct reply *r = user;
  size_t n = size * nmemb;
  if (n > CLI_MAX_REPLY_BYTES - r->len)
    return 0;
  if (r->len + n + 1 > r->cap) {
    size_t cap = r->cap ? r->cap : 65536;
    while (cap < r->len + n + 1)
      cap *= 2;
    char *grown = realloc(r->data, cap);
    if (!grown)
      return 0;
    r->data = grown;
    r->cap = cap;
  }
  memcpy(r->data + r->len, ptr, n);
  r->len += n;
  r->data[r->len] = '\0';
  return n;
}

/* GETs base + path into *r and *ret_status. Returns 0, 1 when the server could not be
 * reached, or -1 on any other transfer failure (both printed). */
static int fetch_text(const char *base, const char *path, struct reply *r, long *ret_status) {
  char url[CLI_MAX_URL], errbuf[CURL_ERROR_SIZE] = "";
  CURL *easy = curl_easy_init();
  struct curl_slist *headers = curl_slist_append(NULL, "Accept: text/x-python, application/json");
  if (!easy || !headers || snprintf(url, sizeof url, "%s%s", base, path) >= (int)sizeof url) {
    curl_slist_free_all(headers);
    curl_easy_cleanup(easy);
    fprintf(stderr, "error: cannot initialise libcurl\n");
    return -1;
  }
  curl_easy_setopt(easy, CURLOPT_URL, url);
  curl_easy_setopt(easy, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(easy, CURLOPT_USERAGENT, "opforge-cli/0.1");
  curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(easy, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
  curl_easy_setopt(easy, CURLOPT_TIMEOUT, REQUEST_TIMEOUT_S);
  curl_easy_setopt(easy, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(easy, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(easy, CURLOPT_WRITEFUNCTION, collect);
  curl_easy_setopt(easy, CURLOPT_WRITEDATA, r);
  CURLcode rc = curl_easy_perform(easy);
  curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, ret_status);
  curl_slist_free_all(headers);
  curl_easy_cleanup(easy);
  if (rc == CURLE_WRITE_ERROR)
    fprintf(stderr, "error: reply from %s exceeds %u bytes or memory ran out\n", url,
            CLI_MAX_REPLY_BYTES);
  else if (rc != CURLE_OK)
    fprintf(stderr, "error: cannot reach %s: %s\n", base,
            errbuf[0] ? errbuf : curl_easy_strerror(rc));
  return rc == CURLE_OK ? 0 : rc == CURLE_WRITE_ERROR ? -1 : 1;
}

/* The server's error message in a reply body (borrowed text), or a stand-in. */
static void refusal_note(const char *what, long status, const char *body, size_t len,
                         char *out, size_t outlen) {
  json_t *reply = body ? json_loadb(body, len, 0, NULL) : NULL;
  const json_t *err = json_object_get(reply, "error");
  const char *code = json_string_value(json_object_get(err, "code"));
  const char *message = json_string_value(json_object_get(err, "message"));
  if (code && message)
    snprintf(out, outlen, "no %s: %s: %s", what, code, message);
  else
    snprintf(out, outlen, "no %s: the server answered HTTP %ld", what, status);
  json_decref(reply);
}

/* Writes DIR/NAME_new.py. */
static enum tune_export_result export_model(struct cli_client *client, struct tune_task *t,
                                            const char *dir, const char *id_path) {
  char path[CLI_MAX_URL + 64], file[PATH_MAX];
  struct reply r = {NULL, 0, 0};
  long status = 0;
  snprintf(path, sizeof path, "%s?format=kernelbench", id_path);
  int rc = fetch_text(cli_client_base_url(client), path, &r, &status);
  enum tune_export_result result = TUNE_EXPORT_OK;
  if (rc != 0) {
    result = rc > 0 ? TUNE_EXPORT_UNREACHABLE : TUNE_EXPORT_FAILED;
  } else if (status != 200) {
    refusal_note("KernelBench file", status, r.data, r.len, t->export_note,
                 sizeof t->export_note);
  } else {
    tune_export_path(dir, t, false, file, sizeof file);
    if (write_file(file, r.data ? r.data : "", r.len) == 0)
      t->exported_model = true;
    else
      result = TUNE_EXPORT_FAILED;
  }
  free(r.data);
  return result;
}

/* ---- the kernel source: a JSON reply ---- */

/* Why a best has no one kernel's source, from format=cuda's 409. */
static void no_kernel_note(struct tune_task *t) {
  const char *why = t->library_share >= 1.0
                        ? "the best runs library steps only: it has no kernel source of its own"
                        : "the best is a program of several steps: its kernels are in the "
                          "KernelBench file";
  size_t used = strlen(t->export_note);
  snprintf(t->export_note + used, sizeof t->export_note - used, "%s%s", used ? "; " : "", why);
}

/* Writes DIR/NAME.cu. */
static enum tune_export_result export_kernel(struct cli_client *client, struct tune_task *t,
                                             const char *dir, const char *id_path) {
  char path[CLI_MAX_URL + 64], file[PATH_MAX];
  long status = 0;
  json_t *best = NULL;
  snprintf(path, sizeof path, "%s?format=cuda", id_path);
  if (cli_request(client, "GET", path, NULL, &status, &best) != 0)
    return cli_client_unreachable(client) ? TUNE_EXPORT_UNREACHABLE : TUNE_EXPORT_FAILED;
  const char *source = json_string_value(json_object_get(best, "source"));
  enum tune_export_result result = TUNE_EXPORT_OK;
  if (status == 409 && json_is_object(json_object_get(best, "error"))) {
    no_kernel_note(t);
  } else if (status != 200 || !source) {
    cli_print_server_error(status, best);
    result = TUNE_EXPORT_FAILED;
  } else {
    tune_export_path(dir, t, true, file, sizeof file);
    if (write_file(file, source, strlen(source)) == 0)
      t->exported_kernel = true;
    else
      result = TUNE_EXPORT_FAILED;
  }
  json_decref(best);
  return result;
}

enum tune_export_result tune_export_task(struct cli_client *client, struct tune_task *t,
                                         const char *dir) {
  char id_path[CLI_MAX_URL];
  char *esc = cli_escape(t->id);
  if (!esc) {
    fprintf(stderr, "error: out of memory\n");
    return TUNE_EXPORT_FAILED;
  }
  snprintf(id_path, sizeof id_path, "/v1/tasks/%s/best", esc);
  free(esc);
  enum tune_export_result result = export_model(client, t, dir, id_path);
  if (result == TUNE_EXPORT_OK)
    result = export_kernel(client, t, dir, id_path);
  if (result == TUNE_EXPORT_FAILED && !t->export_note[0])
    snprintf(t->export_note, sizeof t->export_note, "the export failed (see the log)");
  return result;
}
