/* The servers table: register, renew, remove, list, and who can run a device class. */
#include "store/servers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/connection.h"
#include "store/statements.h"
#include "store/util.h"

static const char SQL_UPSERT[] =
    "INSERT INTO servers (instance, host, pid, version, devices, gpus, slots, started_at,"
    " renewed_ms, data_dir) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
    " ON CONFLICT (instance) DO UPDATE SET devices = excluded.devices, gpus = excluded.gpus,"
    " slots = excluded.slots, renewed_ms = excluded.renewed_ms";
static const char SQL_DELETE[] = "DELETE FROM servers WHERE instance = ?1";
/* Rows of servers gone for ten leases are dropped, so the table does not grow. */
static const char SQL_PRUNE[] = "DELETE FROM servers WHERE renewed_ms < ?1";
static const char SQL_LIVE[] =
    "SELECT instance, host, pid, version, devices, gpus, slots, started_at, renewed_ms"
    " FROM servers WHERE renewed_ms >= ?1 ORDER BY started_at, instance";
static const char SQL_TASKS_OF[] =
    "SELECT id FROM tasks WHERE claim_instance = ?1 AND claimed_by IS NOT NULL ORDER BY seq";

bool store_device_class_normalize(char *name) {
  size_t len = strlen(name);
  if (len == 0 || len > STORE_DEVICE_CLASS_MAX)
    return false;
  for (char *c = name; *c; c++) {
    if (*c >= 'a' && *c <= 'z')
      *c = (char)(*c - 'a' + 'A');
    if (!((*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' ||
          *c == '-'))
      return false;
  }
  return true;
}

/* Writes this instance's row from a copy of s->server (taken under its lock, which is
 * not held here: a claim takes that lock inside its transaction, so holding it while
 * waiting for the database would deadlock). */
static int write_row(struct store *s) {
  struct store_server_row r;
  pthread_mutex_lock(&s->server.lock);
  r = s->server;
  r.gpus = s->server.gpus ? strdup(s->server.gpus) : NULL;
  pthread_mutex_unlock(&s->server.lock);
  if (!r.registered) {
    free(r.gpus);
    return STORE_OK;
  }
  struct db_stmt *st = store_stmt(s, SQL_UPSERT);
  if (!st) {
    free(r.gpus);
    return STORE_ERROR;
  }
  char host[STORE_INSTANCE_MAX], renewed[24];
  snprintf(host, sizeof host, "%.*s", (int)strcspn(s->instance, ":"), s->instance);
  store_epoch_ms_text(renewed, 0);
  bool bound = st_bind_text(st, 1, s->instance) && st_bind_text(st, 2, host) &&
               db_bind_int64(st, 3, (long long)getpid()) == DB_OK &&
               st_bind_text(st, 4, r.version) && st_bind_text(st, 5, r.devices) &&
               st_bind_text(st, 6, r.gpus ? r.gpus : "[]") &&
               db_bind_int(st, 7, r.slots) == DB_OK && st_bind_text(st, 8, r.started_at) &&
               db_bind_int64(st, 9, strtoll(renewed, NULL, 10)) == DB_OK &&
               st_bind_text(st, 10, r.data_dir);
  int status = STORE_ERROR;
  if (bound) {
    int rc = st_step(st);
    status = rc == DB_DONE ? STORE_OK : st_fail(st, rc);
  }
  st_done(st);
  free(r.gpus);
  return status;
}

/* ",A,B," from the classes, each normalized; false when one is not a class name. */
static bool devices_text(const struct server_info *info, char out[STORE_DEVICES_TEXT_MAX]) {
  size_t used = (size_t)snprintf(out, STORE_DEVICES_TEXT_MAX, ",");
  for (size_t i = 0; i < info->n_devices && i < STORE_DEVICE_CLASSES; i++) {
    char name[STORE_DEVICE_CLASS_MAX + 1];
    if (strlen(info->devices[i]) > STORE_DEVICE_CLASS_MAX)
      return false;
    snprintf(name, sizeof name, "%s", info->devices[i]);
    if (!store_device_class_normalize(name))
      return false;
    used += (size_t)snprintf(out + used, STORE_DEVICES_TEXT_MAX - used, "%s,", name);
  }
  return true;
}

void store_server_set_data_dir(struct store *s, const char *data_dir) {
  pthread_mutex_lock(&s->server.lock);
  snprintf(s->server.data_dir, sizeof s->server.data_dir, "%s", data_dir);
  pthread_mutex_unlock(&s->server.lock);
}

int store_server_register(struct store *s, const struct server_info *info) {
  char devices[STORE_DEVICES_TEXT_MAX];
  if (!s || !info || !devices_text(info, devices))
    return STORE_INVALID;
  char *gpus = info->gpus ? st_json_dumps(info->gpus) : st_strdup("[]");
  if (!gpus)
    return STORE_ERROR;
  pthread_mutex_lock(&s->server.lock);
  struct store_server_row *r = &s->server;
  if (!r->registered && !store_time_now(r->started_at))
    snprintf(r->started_at, sizeof r->started_at, "1970-01-01T00:00:00.000Z");
  snprintf(r->devices, sizeof r->devices, "%s", devices);
  snprintf(r->version, sizeof r->version, "%s", info->version ? info->version : "");
  free(r->gpus);
  r->gpus = gpus;
  r->slots = info->slots;
  r->registered = true;
  pthread_mutex_unlock(&s->server.lock);
  return write_row(s);
}

int store_server_renew(struct store *s) {
  int status = write_row(s);
  if (status == STORE_OK) {
    char old[24];
    store_epoch_ms_text(old, 0);
    long long cutoff = strtoll(old, NULL, 10) - 10LL * 1000 * s->lease_s;
    snprintf(old, sizeof old, "%lld", cutoff);
    st_run(s, SQL_PRUNE, old, NULL, NULL, NULL, NULL);
  }
  return status;
}

int store_server_remove(struct store *s) {
  pthread_mutex_lock(&s->server.lock);
  bool registered = s->server.registered;
  s->server.registered = false;
  pthread_mutex_unlock(&s->server.lock);
  return registered ? st_run(s, SQL_DELETE, s->instance, NULL, NULL, NULL, NULL) : STORE_OK;
}

/* The oldest renewal time that still counts as live, as text. */
static void live_cutoff(const struct store *s, char out[24]) {
  char now[24];
  store_epoch_ms_text(now, 0);
  snprintf(out, 24, "%lld", strtoll(now, NULL, 10) - 1000LL * s->lease_s);
}

/* ",A,B," as a JSON array of the names. Caller owns it. */
static json_t *classes_array(const char *text) {
  json_t *a = st_json_array();
  for (const char *p = text; a && *p;) {
    size_t n = strcspn(p, ",");
    if (n > 0 && st_json_array_append_new(a, json_stringn(p, n)) != 0) {
      json_decref(a);
      return NULL;
    }
    p += n + (p[n] == ',');
  }
  return a;
}

/* The ids of the tasks an instance holds. Caller owns *ret_ids. */
static int tasks_of(struct store *s, const char *instance, json_t **ret_ids) {
  struct db_stmt *st = store_stmt(s, SQL_TASKS_OF);
  json_t *ids = st ? st_json_array() : NULL;
  if (!ids || !st_bind_text(st, 1, instance)) {
    if (st)
      st_done(st);
    json_decref(ids);
    return STORE_ERROR;
  }
  int rc;
  while ((rc = st_step(st)) == DB_ROW)
    if (st_json_array_append_new(ids, json_string(db_column_text(st, 0))) != 0)
      break;
  int status = rc == DB_DONE ? STORE_OK : rc == DB_ROW ? STORE_ERROR : st_fail(st, rc);
  st_done(st);
  if (status != STORE_OK)
    json_decref(ids);
  else
    *ret_ids = ids;
  return status;
}

/* One row of SQL_LIVE in API shape; NULL on failure (logged). */
static json_t *server_from_row(struct store *s, struct db_stmt *st) {
  const char *gpus_text = db_column_text(st, 5);
  json_t *gpus = gpus_text ? st_json_loads(gpus_text) : NULL;
  json_t *devices = classes_array(db_column_text(st, 4) ? db_column_text(st, 4) : ",");
  long long renewed_ms = db_column_int64(st, 8);
  char renewed[STORE_TIME_LEN] = "";
  store_time_of_epoch_ms(renewed_ms, renewed);
  const char *instance = db_column_text(st, 0);
  return st_json_pack("{s:s, s:s, s:I, s:s, s:o, s:o, s:i, s:s, s:s, s:b}", "instance",
                      instance ? instance : "", "host",
                      db_column_text(st, 1) ? db_column_text(st, 1) : "", "pid",
                      (json_int_t)db_column_int64(st, 2), "version",
                      db_column_text(st, 3) ? db_column_text(st, 3) : "", "devices", devices,
                      "gpus", gpus ? gpus : json_array(), "slots", db_column_int(st, 6),
                      "started_at", db_column_text(st, 7) ? db_column_text(st, 7) : "",
                      "renewed_at", renewed, "this",
                      instance && strcmp(instance, s->instance) == 0);
}

/* The live rows, without their task lists. Caller owns *ret_items. */
static int live_rows(struct store *s, json_t **ret_items) {
  char cutoff[24];
  live_cutoff(s, cutoff);
  struct db_stmt *st = store_stmt(s, SQL_LIVE);
  json_t *items = st ? st_json_array() : NULL;
  if (!items || db_bind_int64(st, 1, strtoll(cutoff, NULL, 10)) != DB_OK) {
    if (st)
      st_done(st);
    json_decref(items);
    return STORE_ERROR;
  }
  int rc;
  while ((rc = st_step(st)) == DB_ROW) {
    json_t *item = server_from_row(s, st);
    if (!item || st_json_array_append_new(items, item) != 0)
      break;
  }
  int status = rc == DB_DONE ? STORE_OK : rc == DB_ROW ? STORE_ERROR : st_fail(st, rc);
  st_done(st);
  if (status != STORE_OK)
    json_decref(items);
  else
    *ret_items = items;
  return status;
}

int store_servers_list(struct store *s, json_t **ret_items) {
  json_t *items = NULL;
  int status = live_rows(s, &items);
  size_t i;
  json_t *item;
  json_array_foreach(items, i, item) {
    json_t *ids = NULL;
    if (status == STORE_OK)
      status = tasks_of(s, json_string_value(json_object_get(item, "instance")), &ids);
    if (status == STORE_OK && json_object_set_new(item, "tasks", ids) != 0)
      status = STORE_ERROR;
  }
  if (status != STORE_OK) {
    json_decref(items);
    return status;
  }
  *ret_items = items;
  return STORE_OK;
}

/* strcmp for qsort over an array of C strings. */
static int compare_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int store_servers_can_run(struct store *s, const char *device, bool *ret_yes,
                          json_t **ret_classes) {
  json_t *items = NULL;
  int status = live_rows(s, &items);
  if (status != STORE_OK)
    return status;
  const char *names[256];
  size_t n = 0;
  bool yes = false;
  size_t i, k;
  json_t *item, *name;
  json_array_foreach(items, i, item) {
    if (json_integer_value(json_object_get(item, "slots")) <= 0)
      continue; /* a server without workers runs nothing */
    yes |= device == NULL;
    json_array_foreach(json_object_get(item, "devices"), k, name) {
      const char *text = json_string_value(name);
      yes |= device && strcmp(text, device) == 0;
      bool seen = false;
      for (size_t j = 0; j < n; j++)
        seen |= strcmp(names[j], text) == 0;
      if (!seen && n < sizeof names / sizeof names[0])
        names[n++] = text;
    }
  }
  qsort(names, n, sizeof names[0], compare_names);
  json_t *classes = st_json_array();
  for (size_t j = 0; classes && j < n; j++)
    if (st_json_array_append_new(classes, json_string(names[j])) != 0) {
      json_decref(classes);
      classes = NULL;
    }
  json_decref(items);
  if (!classes)
    return STORE_ERROR;
  *ret_yes = yes;
  if (ret_classes)
    *ret_classes = classes;
  else
    json_decref(classes);
  return STORE_OK;
}
