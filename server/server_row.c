/* This server's row in the servers table: version, GPUs, slots, device classes. */
#include "server/server_row.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "base/log.h"
#include "gpu/supervisor.h"
#include "server/app.h"
#include "server/config.h"
#include "store/servers.h"

#ifndef OPFORGE_VERSION
#define OPFORGE_VERSION "0.1.0"
#endif

void server_row_device_class(const char *gpu_name, char *out, size_t outlen) {
  static const char *const vendor[] = {"NVIDIA", "GeForce", "Tesla", "Quadro", NULL};
  const char *p = gpu_name ? gpu_name : "";
  for (bool skipped = true; skipped;) {
    skipped = false;
    p += strspn(p, " ");
    for (const char *const *v = vendor; *v; v++)
      if (strncasecmp(p, *v, strlen(*v)) == 0 && (p[strlen(*v)] == ' ')) {
        p += strlen(*v);
        skipped = true;
      }
  }
  size_t n = strcspn(p, " -");
  char word[STORE_DEVICE_CLASS_MAX + 1] = "";
  if ((n == 3 && (strncasecmp(p, "RTX", 3) == 0 || strncasecmp(p, "GTX", 3) == 0)) &&
      p[3] == ' ')
    snprintf(word, sizeof word, "%.3s%.*s", p, (int)strcspn(p + 4, " -"), p + 4);
  else
    snprintf(word, sizeof word, "%.*s", (int)(n < STORE_DEVICE_CLASS_MAX ? n : STORE_DEVICE_CLASS_MAX), p);
  if (!store_device_class_normalize(word))
    word[0] = '\0';
  snprintf(out, outlen, "%s", word);
}

/* The GPUs as the servers list shows them: index, name, state and current task. */
static json_t *gpus_of(const json_t *described) {
  json_t *gpus = json_array();
  size_t i;
  const json_t *d;
  json_array_foreach(json_object_get(described, "devices"), i, d) {
    json_t *g = json_pack("{s:O?, s:O?, s:O?, s:O?}", "index", json_object_get(d, "index"),
                          "name", json_object_get(d, "name"), "state",
                          json_object_get(d, "state"), "current_task",
                          json_object_get(d, "current_task"));
    if (!g || json_array_append_new(gpus, g) != 0) {
      json_decref(gpus);
      return NULL;
    }
  }
  return gpus;
}

/* Adds class to info unless it is there already or empty; class is kept in storage. */
static void add_class(struct server_info *info, char storage[][STORE_DEVICE_CLASS_MAX + 1],
                      const char *class) {
  if (!class[0] || info->n_devices >= STORE_DEVICE_CLASSES)
    return;
  for (size_t i = 0; i < info->n_devices; i++)
    if (strcmp(info->devices[i], class) == 0)
      return;
  snprintf(storage[info->n_devices], STORE_DEVICE_CLASS_MAX + 1, "%s", class);
  info->devices[info->n_devices] = storage[info->n_devices];
  info->n_devices++;
}

int server_row_refresh(struct app *app) {
  json_t *described = supervisor_pool_describe(app->supervisors);
  json_t *gpus = described ? gpus_of(described) : NULL;
  struct server_info info = {.version = OPFORGE_VERSION, .gpus = gpus};
  char storage[STORE_DEVICE_CLASSES][STORE_DEVICE_CLASS_MAX + 1];
  size_t n = supervisor_pool_count(app->supervisors);
  for (size_t i = 0; i < n; i++)
    info.slots += supervisor_state(supervisor_pool_get(app->supervisors, i)) !=
                  SUPERVISOR_DISABLED;
  for (int i = 0; i < app->cfg->n_device_classes; i++)
    add_class(&info, storage, app->cfg->device_classes[i]);
  size_t k;
  const json_t *g;
  json_array_foreach(app->cfg->n_device_classes ? NULL : gpus, k, g) {
    char class[STORE_DEVICE_CLASS_MAX + 1];
    server_row_device_class(json_string_value(json_object_get(g, "name")), class, sizeof class);
    add_class(&info, storage, class);
  }
  int rc = gpus ? store_server_register(app->store, &info) : STORE_ERROR;
  json_decref(gpus);
  json_decref(described);
  if (rc != STORE_OK)
    log_warn("cannot write this server's row in the servers table (store status %d)", rc);
  return rc == STORE_OK ? 0 : -1;
}
