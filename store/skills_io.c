/* The whole skill memory at once: export and import. */
#include "store/skills.h"

#include <errno.h>
#include <stdlib.h>

#include "store/skills_rows.h"
#include "store/transaction.h"

static const char SQL_ALL[] = "SELECT " SKILL_COLUMNS " FROM skills s ORDER BY s.id";
static const char SQL_EXAMPLES[] =
    "SELECT " SKILL_EXAMPLE_COLUMNS " FROM skill_examples WHERE skill_id = ?1 ORDER BY id";
static const char SQL_DELETE_RULE_EXAMPLES[] =
    "DELETE FROM skill_examples WHERE skill_id IS NOT NULL";
static const char SQL_DELETE_RULES[] = "DELETE FROM skills";
static const char SQL_DELETE_LOOSE[] =
    "DELETE FROM skill_examples WHERE skill_id IS NULL AND candidate_id = ?1";

struct io {
  const json_t *doc;
  char now[STORE_TIME_LEN];
  json_t *result;
};

static int export_tx(struct store *s, void *arg) {
  struct io *io = arg;
  json_decref(io->result);
  io->result = NULL;
  json_t *skills = NULL;
  int status = sk_collect(s, SQL_ALL, NULL, 0, sk_skill_from_row, SKILL_ROW_EXPORT, &skills);
  size_t i;
  json_t *skill;
  json_array_foreach(skills, i, skill) {
    const struct sk_arg args[] = {SK_I(json_integer_value(json_object_get(skill, "id")))};
    json_t *examples = NULL;
    if (status == STORE_OK)
      status = sk_collect(s, SQL_EXAMPLES, args, 1, sk_example_from_row, 0, &examples);
    if (status == STORE_OK && json_object_set_new(skill, "examples", examples) != 0)
      status = STORE_ERROR;
  }
  if (status == STORE_OK) {
    io->result = st_json_pack("{s:i, s:s, s:o}", "version", 1, "exported_at", io->now,
                              "skills", skills);
    return io->result ? STORE_OK : STORE_ERROR;
  }
  json_decref(skills);
  return status;
}

int store_skills_export(struct store *s, json_t **ret_doc) {
  if (!s || !ret_doc)
    return STORE_INVALID;
  struct io io = {0};
  if (!store_time_now(io.now))
    return STORE_ERROR;
  int status = store_transaction(s, export_tx, &io);
  if (status == STORE_OK)
    *ret_doc = io.result;
  else
    json_decref(io.result);
  return status;
}

/* Inserts the examples of one imported rule. */
static int insert_examples(struct store *s, long long id, const json_t *examples,
                           const char *now) {
  size_t i;
  const json_t *ex;
  int status = STORE_OK;
  json_array_foreach(examples, i, ex) {
    struct skill_example e = {
      .task_id = json_string_value(json_object_get(ex, "task_id")),
      .candidate_id = json_string_value(json_object_get(ex, "candidate_id")),
      .failure_class = json_string_value(json_object_get(ex, "class")),
      .signature = json_string_value(json_object_get(ex, "signature")),
      .message = json_string_value(json_object_get(ex, "message")),
    };
    const struct sk_arg args[] = {SK_T(e.candidate_id)};
    if (status == STORE_OK && e.candidate_id)
      status = sk_exec(s, SQL_DELETE_LOOSE, args, 1, NULL);
    if (status == STORE_OK)
      status = sk_insert_example(s, id, false, &e,
                                 json_string_value(json_object_get(ex, "created_at")), now);
  }
  return status;
}

static int import_tx(struct store *s, void *arg) {
  struct io *io = arg;
  int status = sk_exec(s, SQL_DELETE_RULE_EXAMPLES, NULL, 0, NULL);
  if (status == STORE_OK)
    status = sk_exec(s, SQL_DELETE_RULES, NULL, 0, NULL);
  size_t i;
  const json_t *rec;
  json_array_foreach(json_object_get(io->doc, "skills"), i, rec) {
    long long id = 0;
    if (status == STORE_OK)
      status = sk_insert_skill(s, rec, MEMORY_IMPORT, NULL, NULL, io->now, &id);
    if (status == STORE_OK)
      status = insert_examples(s, id, json_object_get(rec, "examples"), io->now);
  }
  /* The document was checked, so a clash here is a bug the transaction contains. */
  return status == STORE_CONFLICT ? STORE_ERROR : status;
}

int store_skills_import(struct store *s, const json_t *doc, struct memory_invalid *ret_why,
                        json_t **ret_counts) {
  if (!s || !doc)
    return STORE_INVALID;
  struct memory_invalid why;
  int rc = skill_check_document(doc, &why);
  if (rc != 0) {
    if (rc != -ENOMEM && ret_why)
      *ret_why = why;
    return rc == -ENOMEM ? STORE_ERROR : STORE_INVALID;
  }
  json_int_t examples = 0;
  size_t i;
  const json_t *rec;
  json_array_foreach(json_object_get(doc, "skills"), i, rec)
    examples += (json_int_t)json_array_size(json_object_get(rec, "examples"));
  /* Made before the commit, so nothing can fail after it. */
  json_t *counts = ret_counts ? st_json_pack("{s:I, s:I}", "skills",
                                             (json_int_t)json_array_size(json_object_get(doc, "skills")),
                                             "examples", examples)
                              : NULL;
  struct io io = {.doc = doc};
  if ((ret_counts && !counts) || !store_time_now(io.now)) {
    json_decref(counts);
    return STORE_ERROR;
  }
  int status = store_transaction(s, import_tx, &io);
  if (status == STORE_OK && ret_counts)
    *ret_counts = counts;
  else
    json_decref(counts);
  return status;
}
