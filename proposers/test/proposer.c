/* The test proposer: replays fixture candidates from a directory, in file-name order,
 * whatever the step kind, so the engine's tests control exactly what gets evaluated. */
#include "proposers/proposer.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proposers/family.h"

struct fixtures {
  char *dir;
};

static int failure(json_t **ret_failure, const char *cls, const char *message) {
  *ret_failure = json_pack("{s:s, s:s, s:s}", "stage", "parse", "class", cls, "message", message);
  return -1;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists the *.json files of dir, sorted. Caller frees each name and the array. */
static char **list_fixtures(const char *dir, size_t *ret_n) {
  DIR *d = opendir(dir);
  if (!d)
    return NULL;
  char **names = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
      continue;
    if (n == cap) {
      size_t want = cap ? cap * 2 : 16;
      char **grown = realloc(names, want * sizeof *names);
      if (!grown)
        break;
      names = grown;
      cap = want;
    }
    if (!(names[n] = strdup(e->d_name)))
      break;
    n++;
  }
  closedir(d);
  if (n)
    qsort(names, n, sizeof *names, by_name);
  *ret_n = n;
  return names;
}

static int test_propose(void *self, const struct proposal_request *req, json_t **ret_candidate,
                        json_t **ret_failure) {
  struct fixtures *f = self;
  char dir[4096], path[4352], message[4608];
  snprintf(dir, sizeof dir, "%s/%s", f->dir, req->task_name);
  size_t n = 0;
  char **names = list_fixtures(dir, &n);
  if (!names || n == 0) {
    free(names);
    snprintf(message, sizeof message, "no fixture candidates (*.json) in %s", dir);
    return failure(ret_failure, "parse/no_fixtures", message);
  }
  snprintf(path, sizeof path, "%s/%s", dir, names[(size_t)(req->step - 1) % n]);
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
  json_error_t jerr;
  json_t *candidate = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
  if (!json_is_object(candidate) || !json_is_string(json_object_get(candidate, "source")) ||
      !json_is_object(json_object_get(candidate, "plan"))) {
    json_decref(candidate);
    snprintf(message, sizeof message, "%s: not a candidate object with source and plan (%s)",
             path, jerr.text);
    return failure(ret_failure, "parse/bad_fixture", message);
  }
  *ret_candidate = candidate;
  return 0;
}

/* Every task is supported; the family is the first guess from the graph. */
static int test_supports(void *self, json_t *profile, const char **ret_family, char *why,
                         size_t whylen) {
  (void)self, (void)why, (void)whylen;
  *ret_family = family_of_profile(profile);
  return 0;
}

static void test_free(void *self) {
  struct fixtures *f = self;
  if (!f)
    return;
  free(f->dir);
  free(f);
}

int proposer_test_new(const char *fixtures_dir, struct proposer *ret) {
  struct fixtures *f = calloc(1, sizeof *f);
  if (!f || !(f->dir = strdup(fixtures_dir ? fixtures_dir : ""))) {
    free(f);
    return -1;
  }
  *ret = (struct proposer){.name = "test", .self = f, .starts_every_region = true,
                           .supports = test_supports,
                           .propose_large = test_propose, .propose_small = test_propose,
                           .free = test_free};
  return 0;
}

