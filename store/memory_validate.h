/* The rules of memory records: their bounds, what can be wrong with one, the checks of
 * a node body, an edge body and a whole import document, and ids made from names. */
#ifndef OPFORGE_STORE_MEMORY_VALIDATE_H
#define OPFORGE_STORE_MEMORY_VALIDATE_H

#include <jansson.h>
#include <stdbool.h>

/* Node ids: ^[a-z][a-z0-9_]{1,63}$. */
#define MEMORY_ID_MAX 64
#define MEMORY_NAME_MAX 128        /* name: 1..128 characters (code points) */
#define MEMORY_TEXT_MAX 4096       /* intent, edit_pattern, rationale, when: 0..4096 */
#define MEMORY_ITEM_MAX 512        /* one string of objectives/triggers/risks/checks */
#define MEMORY_LIST_MAX 32         /* items in one such list */
#define MEMORY_PRIOR_ABS_MAX 5.0   /* prior in [-5, 5] (reward units: ln speed-up) */
#define MEMORY_KNOB_VALUE_MAX 1024 /* knob_move.value: 1..1024, or [a-z0-9_]{1,64} for set */
#define MEMORY_OUTCOME_MAX 64      /* evidence outcome: 1..64 characters */
#define MEMORY_NOTE_MAX 1024       /* evidence note: 0..1024 characters */
#define MEMORY_REF_MAX 64          /* evidence task_id / candidate_id: 1..64 characters */
#define MEMORY_EVIDENCE_KEEP 50    /* newest evidence rows kept per local node */
#define MEMORY_MAX_GLOBALS 256     /* what an import may hold */
#define MEMORY_MAX_LOCALS 4096
#define MEMORY_MAX_EDGES 65536

/* What is wrong with a document or a field. */
enum memory_problem {
  MEMORY_PROBLEM_INVALID = 1, /* wrong type, out of bounds, malformed, read-only */
  MEMORY_PROBLEM_UNKNOWN,     /* a key the shape does not have */
  MEMORY_PROBLEM_MISSING,     /* a required key is absent */
  MEMORY_PROBLEM_REFERENCE,   /* an id that names no node (or edge) */
  MEMORY_PROBLEM_DUPLICATE,   /* an id (or from/to pair) that is already taken */
};

/* The first problem found: its kind, the JSON path of the field ("locals[3].global",
 * "prior"; "" for the whole document) and a sentence for the client. */
struct memory_invalid {
  enum memory_problem problem;
  char field[128];
  char message[256];
};

/* Which shape a node body is checked against. */
enum memory_mode {
  MEMORY_CREATE, /* POST: id optional (made from the name), name required */
  MEMORY_PATCH,  /* PATCH: every key optional; id, stats and timestamps read-only */
  MEMORY_IMPORT, /* import: id (and local global / edge from, to) required; stats,
                    evidence and timestamps allowed */
};

/* True when id matches ^[a-z][a-z0-9_]{1,63}$. */
bool memory_id_valid(const char *id);

/* Fills why for the field key under prefix (their JSON path, "document" when both are
 * empty) with the message fmt, and returns -1. */
__attribute__((format(printf, 5, 6))) int memory_invalid_at(struct memory_invalid *why,
                                                            enum memory_problem problem,
                                                            const char *prefix,
                                                            const char *key, const char *fmt,
                                                            ...);

/* One key of a record's schema: kind is the checker's own enum; modes[m] is its presence
 * in enum memory_mode m: 'R' required, 'O' optional, 'X' read-only (present is an error
 * that says so), '-' unknown. */
struct memory_field {
  const char *key;
  int kind;
  char modes[4];
};

/* Checks one value of kind at prefix.key; 0, or -1 with why filled. */
typedef int (*memory_value_check)(const json_t *v, int kind, const char *prefix,
                                  const char *key, struct memory_invalid *why);

/* Checks obj against fields (ended by a NULL key) in mode: unknown and read-only keys
 * first, in the body's order, then every field in table order through check, so the field
 * reported does not depend on the client's key order beyond which unknown key comes
 * first. Memory records and skill rules share it. 0, or -1 with why filled. */
int memory_check_fields(const json_t *obj, const struct memory_field *fields,
                        enum memory_mode mode, const char *prefix, memory_value_check check,
                        struct memory_invalid *why);

/* Checks v as an array of at most max records (what names them in the message), each
 * against fields in MEMORY_IMPORT mode at prefix.key[i]: evidence rows, skill examples.
 * 0, or -1 with why filled. */
int memory_check_records(const json_t *v, size_t max, const char *what,
                         const struct memory_field *fields, const char *prefix,
                         const char *key, memory_value_check check,
                         struct memory_invalid *why);

/* True when v is a time as store_time_now writes it (YYYY-MM-DDTHH:MM:SS.mmmZ) and a real
 * instant (month lengths and leap years, years 0001-9999). */
bool memory_time_valid(const json_t *v);

/* True when v is a string without NUL of min..max characters (UTF-8 code points). */
bool memory_string_valid(const json_t *v, size_t min, size_t max);

/* Checks a global node body (borrowed) for mode. prefix is the path of obj in its
 * document ("" for a request body, "globals[2]" in an import) and starts every field
 * path. Returns 0, or -1 with *ret_why filled. */
int memory_check_global(const json_t *obj, enum memory_mode mode, const char *prefix,
                        struct memory_invalid *ret_why);

/* Checks a local node body. In MEMORY_CREATE "global" is not allowed (the path names the
 * parent); in MEMORY_PATCH it moves the node; in MEMORY_IMPORT it is required. */
int memory_check_local(const json_t *obj, enum memory_mode mode, const char *prefix,
                       struct memory_invalid *ret_why);

/* Checks an edge body. "from" and "to" are required in MEMORY_CREATE and MEMORY_IMPORT
 * and read-only in MEMORY_PATCH. */
int memory_check_edge(const json_t *obj, enum memory_mode mode, const char *prefix,
                      struct memory_invalid *ret_why);

/* Checks a whole import document: version, every record, unique ids and edge pairs,
 * every reference resolving, the count bounds. Returns 0, -1 with *ret_why filled, or
 * -ENOMEM (logged) when the scratch space for the uniqueness checks cannot be had. */
int memory_check_document(const json_t *doc, struct memory_invalid *ret_why);

/* Makes an id candidate from a display name: lower case, runs of other characters as
 * one '_', a leading digit prefixed with "n_", at most 59 bytes (room for a "_NNN"
 * suffix), "node" when nothing is left, "<slug>_x" when it is 1 byte. out has at least
 * MEMORY_ID_MAX + 1 bytes. */
void memory_slug(const char *name, char out[MEMORY_ID_MAX + 1]);

/* Fills why (may be NULL) with the problem, the field path and a formatted message. */
void memory_why(struct memory_invalid *why, enum memory_problem problem, const char *field,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
