/* The evaluator's environment: an allowlist of what the interpreter, CUDA and PyTorch
 * read, never a blocklist, and on top of it a rule that drops anything named like a
 * secret whatever the lists say. */
#include "gpu/sandbox/internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whole names passed through. */
static const char *const ALLOWED_NAMES[] = {
    "PATH", "LANG", "LANGUAGE", "TZ", "LD_LIBRARY_PATH", "CUBLAS_WORKSPACE_CONFIG",
};

/* Prefixes passed through: locale, the interpreter, CUDA and the driver, PyTorch and its
 * compilers, and the CPU math libraries' thread settings. */
static const char *const ALLOWED_PREFIXES[] = {
    "LC_", "PYTHON", "CUDA_", "NVIDIA_", "TORCH", "PYTORCH_", "TRITON_",
    "OMP_", "MKL_", "OPENBLAS_", "KMP_", "CUDNN_",
};

/* Words that make a name a secret (compared without case). */
static const char *const SECRET_WORDS[] = {"KEY", "TOKEN", "SECRET", "PASSW", "CREDENTIAL",
                                           "AUTH"};

/* The value of name in env (NULL-terminated NAME=VALUE list), or NULL. */
static const char *lookup(char *const *env, const char *name) {
  size_t len = strlen(name);
  for (char *const *e = env; e && *e; e++)
    if (strncmp(*e, name, len) == 0 && (*e)[len] == '=')
      return *e + len + 1;
  return NULL;
}

/* Variables the sandbox sets itself (the server's values are never passed). */
static const char *const OWN_NAMES[] = {"HOME", "TMPDIR", "TMP", "TEMP", "USER", "LOGNAME",
                                        "CUDA_VISIBLE_DEVICES", "PYTHONDONTWRITEBYTECODE",
                                        "PYTHONNOUSERSITE"};

/* True when the len bytes of name contain word, ignoring case. */
static bool contains_word(const char *name, size_t len, const char *word) {
  size_t wl = strlen(word);
  for (size_t i = 0; i + wl <= len; i++) {
    size_t j = 0;
    while (j < wl && toupper((unsigned char)name[i + j]) == word[j])
      j++;
    if (j == wl)
      return true;
  }
  return false;
}

bool sandbox_env_is_secret(const char *name, size_t len) {
  if (len >= 8 && strncmp(name, "OPFORGE_", 8) == 0)
    return true;
  for (size_t i = 0; i < sizeof SECRET_WORDS / sizeof SECRET_WORDS[0]; i++)
    if (contains_word(name, len, SECRET_WORDS[i]))
      return true;
  return false;
}

/* True when the len bytes of name match entry (NAME exactly, or PREFIX*). */
static bool matches(const char *name, size_t len, const char *entry) {
  size_t el = strlen(entry);
  if (el > 0 && entry[el - 1] == '*')
    return len >= el - 1 && strncmp(name, entry, el - 1) == 0;
  return len == el && strncmp(name, entry, len) == 0;
}

/* True when name is one the sandbox sets itself. */
static bool is_own(const char *name, size_t len) {
  for (size_t i = 0; i < sizeof OWN_NAMES / sizeof OWN_NAMES[0]; i++)
    if (matches(name, len, OWN_NAMES[i]))
      return true;
  return false;
}

bool sandbox_env_allowed(const struct sandbox_settings *s, const char *name, size_t len) {
  if (len == 0 || sandbox_env_is_secret(name, len) || is_own(name, len))
    return false;
  for (size_t i = 0; i < sizeof ALLOWED_NAMES / sizeof ALLOWED_NAMES[0]; i++)
    if (matches(name, len, ALLOWED_NAMES[i]))
      return true;
  for (size_t i = 0; i < sizeof ALLOWED_PREFIXES / sizeof ALLOWED_PREFIXES[0]; i++)
    if (len >= strlen(ALLOWED_PREFIXES[i]) &&
        strncmp(name, ALLOWED_PREFIXES[i], strlen(ALLOWED_PREFIXES[i])) == 0)
      return true;
  for (int i = 0; s && i < s->n_env; i++)
    if (matches(name, len, s->env[i]))
      return true;
  return false;
}

char **sandbox_environment(const struct sandbox_settings *s, char *const *env,
                           const char *user, const char *visible_devices) {
  struct strv out = {0};
  for (char *const *e = env; e && *e; e++) {
    const char *eq = strchr(*e, '=');
    if (eq && sandbox_env_allowed(s, *e, (size_t)(eq - *e)))
      strv_add(&out, *e);
  }
  strv_add(&out, "HOME=" SANDBOX_HOME);
  strv_add(&out, "TMPDIR=" SANDBOX_SCRATCH);
  strv_add(&out, "PYTHONDONTWRITEBYTECODE=1");
  strv_add(&out, "PYTHONNOUSERSITE=1");
  if (user && user[0]) {
    strv_addf(&out, "USER=%s", user);
    strv_addf(&out, "LOGNAME=%s", user);
  }
  if (visible_devices) {
    strv_addf(&out, "CUDA_VISIBLE_DEVICES=%s", visible_devices);
  } else {
    const char *cvd = lookup(env, "CUDA_VISIBLE_DEVICES");
    if (cvd)
      strv_addf(&out, "CUDA_VISIBLE_DEVICES=%s", cvd);
  }
  return strv_take(&out);
}
