/* Discovery and defaults (see supervisor.h): the number of CUDA devices, and where the
 * interpreter, the evaluator package and libopforge_gpu.so are when not configured. */
#include "gpu/supervisor.h"

#include <dlfcn.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* True when path names a regular file (following links). */
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
  static const char *const suffixes[] = {"/../share/opforge/evaluator/main.py",
                                         "/../gpu/evaluator/main.py",
                                         "/../../gpu/evaluator/main.py"};
  char *found = first_existing(dir, suffixes, sizeof suffixes / sizeof suffixes[0]);
  if (found)
    return found;
  char *src = meson_source_dir(dir);
  static const char *const in_src[] = {"/gpu/evaluator/main.py"};
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
