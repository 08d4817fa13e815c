/* The PostgreSQL driver of store/db.h, through libpq (docs/architecture.md, "Store
 * backends"). A statement keeps its SQL with ?N rewritten to $N and runs with
 * PQexecParams when first stepped; its rows are then read from the result one step at a
 * time, as SQLite hands them out. SQLSTATEs map to the SQLite codes the store already
 * reads: a serialization failure or deadlock is DB_BUSY (the transaction is retried), a
 * broken connection DB_UNAVAILABLE (the next call connects again). */
#include "store/db.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* Type OIDs of the parameters the store binds (pg_type.h is a server header). */
#define PG_OID_INT8 20
#define PG_OID_FLOAT8 701
#define PG_OID_NUMERIC 1700
#define PG_OID_INT2 21
#define PG_OID_INT4 23
#define PG_OID_FLOAT4 700
#define PG_OID_TEXT 25

/* The most parameters one statement may number (far above the store's dozen). */
#define DB_PG_MAX_PARAMS 256

#define PG_ERR_LEN 512
/* The least time between two attempts to reconnect one connection. */
#define PG_RETRY_MS 1000

struct pg_db {
  struct db base;
  PGconn *conn;
  int64_t changes;
  int tx_failure; /* the first failure inside the open transaction (DB_OK: none) */
  bool tx_open;   /* between a BEGIN that succeeded and its COMMIT or ROLLBACK */
  long long next_attempt_ms; /* no reconnect before this (monotonic ms) */
  char err[PG_ERR_LEN];
};

/* The digits of a bound number. */
struct pg_number {
  char text[32];
};

struct pg_stmt {
  struct db_stmt base;
  char *text; /* the SQL with $N markers */
  int nparams;
  bool *used;                /* per parameter: whether the SQL names it */
  bool *typed;               /* per parameter: sent typed (first named in an IS test) */
  const char **values;       /* per parameter: its text, NULL for SQL NULL */
  Oid *types;                /* per parameter: 0 lets the server infer it (text) */
  struct pg_number *numbers; /* per parameter: where a bound number's text lives */
  PGresult *res; /* NULL until stepped */
  int row;       /* the current row of res; -1 before the first */
  bool readonly;
};

static struct pg_db *PG(struct db *db) { return (struct pg_db *)db; }

/* Notices ("relation already exists, skipping") are not errors: dropped. */
static void ignore_notice(void *arg, const char *message) {
  (void)arg, (void)message;
}

/* Drops the line ends libpq puts after its messages. */
static void trim_line_ends(char *text) {
  size_t n = strlen(text);
  while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == ' '))
    text[--n] = '\0';
}
static struct pg_stmt *ST(struct db_stmt *st) { return (struct pg_stmt *)st; }

static void set_err(struct pg_db *db, const char *msg) {
  snprintf(db->err, sizeof db->err, "%s", msg && *msg ? msg : "unknown PostgreSQL error");
  trim_line_ends(db->err);
}

/* ---------------------------------------------------------------- codes */

static bool sqlstate_is(const char *state, const char *prefix) {
  return state && strncmp(state, prefix, strlen(prefix)) == 0;
}

/* The SQLite code of a SQLSTATE (class 08 and the shutdown codes: unavailable). */
static int code_of_sqlstate(const char *state) {
  static const struct {
    const char *state;
    int code;
  } table[] = {
      {"23505", DB_CONSTRAINT_UNIQUE}, {"23503", DB_CONSTRAINT_FOREIGNKEY},
      {"23514", DB_CONSTRAINT_CHECK},  {"23502", DB_CONSTRAINT_NOTNULL},
      {"23", DB_CONSTRAINT},           {"40001", DB_BUSY},
      {"40P01", DB_BUSY},              {"55P03", DB_BUSY},
      {"53100", DB_FULL},              {"53200", DB_NOMEM},
      {"22001", DB_TOOBIG},            {"54", DB_TOOBIG},
      {"22003", DB_RANGE},             {"22", DB_MISMATCH},
      {"08", DB_UNAVAILABLE},          {"57P01", DB_UNAVAILABLE},
      {"57P02", DB_UNAVAILABLE},       {"57P03", DB_UNAVAILABLE},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (sqlstate_is(state, table[i].state))
      return table[i].code;
  return DB_ERROR;
}

/* The code of a failed result (res may be NULL: no answer at all). Inside a transaction
 * the first failure is remembered: PostgreSQL refuses every later statement of it
 * (25P02) and turns its COMMIT into a ROLLBACK, and both report that first failure, so a
 * serialization failure is retried whichever statement meets it. */
static int failure(struct pg_db *db, const PGresult *res) {
  const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
  int code = PQstatus(db->conn) == CONNECTION_BAD ? DB_UNAVAILABLE : code_of_sqlstate(state);
  const char *constraint = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;
  size_t clen = constraint ? strlen(constraint) : 0;
  if (code == DB_CONSTRAINT_UNIQUE && clen > 5 && strcmp(constraint + clen - 5, "_pkey") == 0)
    code = DB_CONSTRAINT_PRIMARYKEY; /* SQLite tells the primary key from other keys */
  if (sqlstate_is(state, "25P02") && db->tx_failure != DB_OK)
    return db->tx_failure;
  set_err(db, res ? PQresultErrorMessage(res) : PQerrorMessage(db->conn));
  if (db->tx_failure == DB_OK && PQtransactionStatus(db->conn) == PQTRANS_INERROR)
    db->tx_failure = code;
  return code;
}

/* A broken connection outside a transaction is opened again (PQreset keeps its
 * parameters); DB_UNAVAILABLE when the server still cannot be reached. */
static long long monotonic_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Never inside a transaction: a new connection would run the rest of it outside,
 * committing each statement alone. Attempts are at least PG_RETRY_MS apart, so threads
 * meeting a server that is down answer at once instead of each waiting out a connect. */
static int ensure_connected(struct pg_db *db) {
  if (PQstatus(db->conn) == CONNECTION_OK)
    return DB_OK;
  if (db->tx_open || monotonic_ms() < db->next_attempt_ms)
    return DB_UNAVAILABLE;
  PQreset(db->conn);
  if (PQstatus(db->conn) == CONNECTION_OK) {
    PQsetNoticeProcessor(db->conn, ignore_notice, NULL);
    return DB_OK;
  }
  db->next_attempt_ms = monotonic_ms() + PG_RETRY_MS;
  set_err(db, PQerrorMessage(db->conn));
  return DB_UNAVAILABLE;
}

/* A connection that was fine until this statement found it broken (the server
 * restarted since its last use): connects again at once, outside a transaction, not
 * waiting for the retry interval. True when it is connected again. */
static bool reconnect_after_loss(struct pg_db *db) {
  if (PQstatus(db->conn) != CONNECTION_BAD || db->tx_open)
    return false;
  db->next_attempt_ms = 0;
  return ensure_connected(db) == DB_OK;
}

/* Runs one command with no rows expected; COMMIT that came back as ROLLBACK reports the
 * transaction's first failure. */
static int run_command(struct pg_db *db, const char *sql) {
  bool begins = strncasecmp(sql, "BEGIN", 5) == 0;
  bool ends = strcasecmp(sql, "COMMIT") == 0 || strcasecmp(sql, "ROLLBACK") == 0;
  int rc = ensure_connected(db);
  if (rc != DB_OK) {
    if (ends) { /* the server rolled the transaction back when the connection broke */
      db->tx_open = false;
      db->tx_failure = DB_OK;
    }
    return rc;
  }
  PGresult *res = PQexec(db->conn, sql);
  ExecStatusType status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (status == PGRES_FATAL_ERROR && (begins || strcmp(sql, "SELECT 1") == 0) &&
      reconnect_after_loss(db)) { /* nothing was done yet: send it again */
    PQclear(res);
    res = PQexec(db->conn, sql);
    status = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  }
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) {
    rc = DB_OK;
    if (strcasecmp(sql, "COMMIT") == 0 && strcmp(PQcmdStatus(res), "ROLLBACK") == 0) {
      rc = db->tx_failure != DB_OK ? db->tx_failure : DB_ERROR;
      set_err(db, "the transaction failed and was rolled back");
    }
  } else {
    rc = failure(db, res);
  }
  PQclear(res);
  if (begins && rc == DB_OK)
    db->tx_open = true;
  if (ends || PQtransactionStatus(db->conn) == PQTRANS_IDLE) {
    db->tx_open = false;
    db->tx_failure = DB_OK;
  }
  return rc;
}

/* ---------------------------------------------------------------- statements */

/* sql with every ?N marker written $N (a bare ? takes the next number, as in SQLite);
 * quoted text is copied as it is. *ret_n gets the highest number. Caller frees. */
static char *translate(const char *sql, int *ret_n, bool used[], bool typed[]) {
  size_t len = strlen(sql);
  char *out = malloc(len * 2 + 1);
  if (!out)
    return NULL;
  char *o = out;
  int highest = 0;
  char quote = 0;
  for (const char *p = sql; *p; p++) {
    if (quote) {
      quote = *p == quote ? 0 : quote;
      *o++ = *p;
    } else if (*p == '\'' || *p == '"') {
      quote = *p;
      *o++ = *p;
    } else if (*p == '?') {
      int n = 0;
      while (p[1] >= '0' && p[1] <= '9')
        n = n * 10 + (*++p - '0');
      if (n == 0)
        n = highest + 1;
      highest = n > highest ? n : highest;
      if (used && n <= DB_PG_MAX_PARAMS) {
        /* First named in "?N IS [NOT] NULL", the server cannot infer its type: it is
         * then sent with the type of the value bound (text for text and NULL). */
        const char *after = p + 1;
        while (*after == ' ')
          after++;
        if (!used[n - 1] && strncasecmp(after, "IS ", 3) == 0)
          typed[n - 1] = true;
        used[n - 1] = true;
      }
      o += sprintf(o, "$%d", n);
    } else {
      *o++ = *p;
    }
  }
  *o = '\0';
  *ret_n = highest;
  return out;
}

static bool starts_with_word(const char *sql, const char *word) {
  while (*sql == ' ' || *sql == '\n' || *sql == '(')
    sql++;
  return strncasecmp(sql, word, strlen(word)) == 0;
}

static void pg_finalize(struct db_stmt *base);
static void pg_reset(struct db_stmt *base);

static int pg_prepare(struct db *db, const char *sql, struct db_stmt **ret) {
  struct pg_stmt *st = calloc(1, sizeof *st);
  if (!st)
    return DB_NOMEM;
  st->text = translate(sql, &st->nparams, NULL, NULL);
  size_t n = (size_t)st->nparams + 1;
  st->used = calloc(n, sizeof *st->used);
  st->typed = calloc(n, sizeof *st->typed);
  if (st->text && st->used && st->typed && st->nparams <= DB_PG_MAX_PARAMS) {
    free(st->text);
    st->text = translate(sql, &st->nparams, st->used, st->typed);
  }
  st->values = calloc(n, sizeof *st->values);
  st->types = calloc(n, sizeof *st->types);
  st->numbers = calloc(n, sizeof *st->numbers);
  if (!st->text || !st->used || !st->typed || !st->values || !st->types || !st->numbers ||
      st->nparams > DB_PG_MAX_PARAMS) {
    pg_finalize(&st->base);
    return DB_NOMEM;
  }
  st->base.db = db;
  st->base.sql = sql;
  pg_reset(&st->base);
  st->readonly = starts_with_word(sql, "SELECT");
  *ret = &st->base;
  return DB_OK;
}

static void pg_reset(struct db_stmt *base) {
  struct pg_stmt *st = ST(base);
  PQclear(st->res);
  st->res = NULL;
  st->row = -1;
  for (int i = 0; i < st->nparams; i++) {
    st->values[i] = NULL;
    st->types[i] = st->used[i] && !st->typed[i] ? 0 : PG_OID_TEXT; /* NULL, or skipped */
  }
}

static void pg_finalize(struct db_stmt *base) {
  struct pg_stmt *st = ST(base);
  PQclear(st->res);
  free(st->used);
  free(st->typed);
  free(st->values);
  free(st->types);
  free(st->numbers);
  free(st->text);
  free(st);
}

/* Runs the statement with its bindings; DB_ROW or DB_DONE, or a failure. */
static int execute(struct pg_stmt *st) {
  struct pg_db *db = PG(st->base.db);
  int rc = ensure_connected(db);
  if (rc != DB_OK)
    return rc;
  st->res = PQexecParams(db->conn, st->text, st->nparams, st->types, st->values, NULL, NULL, 0);
  ExecStatusType status = st->res ? PQresultStatus(st->res) : PGRES_FATAL_ERROR;
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK && st->readonly &&
      reconnect_after_loss(db)) { /* a read is safe to send again */
    PQclear(st->res);
    st->res = PQexecParams(db->conn, st->text, st->nparams, st->types, st->values, NULL, NULL,
                           0);
    status = st->res ? PQresultStatus(st->res) : PGRES_FATAL_ERROR;
  }
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    rc = failure(db, st->res);
    PQclear(st->res);
    st->res = NULL;
    return rc;
  }
  const char *tuples = PQcmdTuples(st->res);
  if (!st->readonly)
    db->changes = tuples && *tuples ? strtoll(tuples, NULL, 10) : 0;
  st->row = -1;
  return DB_OK;
}

static int pg_step(struct db_stmt *base) {
  struct pg_stmt *st = ST(base);
  if (!st->res) {
    int rc = execute(st);
    if (rc != DB_OK)
      return rc;
  }
  if (st->row + 1 < PQntuples(st->res)) {
    st->row++;
    return DB_ROW;
  }
  st->row = PQntuples(st->res);
  return DB_DONE;
}

/* Binds parameter idx (1-based) to text of the given type. */
static int bind(struct db_stmt *base, int idx, const char *text, Oid type) {
  struct pg_stmt *st = ST(base);
  if (idx < 1 || idx > st->nparams)
    return DB_RANGE;
  st->values[idx - 1] = text;
  st->types[idx - 1] = !st->used[idx - 1] || (type == 0 && st->typed[idx - 1]) ? PG_OID_TEXT : type;
  return DB_OK;
}

static int pg_bind_int64(struct db_stmt *st, int idx, int64_t v) {
  if (idx < 1 || idx > ST(st)->nparams)
    return DB_RANGE;
  char *digits = ST(st)->numbers[idx - 1].text;
  snprintf(digits, sizeof ST(st)->numbers[0].text, "%lld", (long long)v);
  return bind(st, idx, digits, PG_OID_INT8);
}

/* %.17g round-trips every finite double; the store binds no NaN or infinity. */
static int pg_bind_double(struct db_stmt *st, int idx, double v) {
  if (idx < 1 || idx > ST(st)->nparams)
    return DB_RANGE;
  char *digits = ST(st)->numbers[idx - 1].text;
  snprintf(digits, sizeof ST(st)->numbers[0].text, "%.17g", v);
  return bind(st, idx, digits, PG_OID_FLOAT8);
}

static int pg_bind_text(struct db_stmt *st, int idx, const char *text) {
  return bind(st, idx, text, 0);
}

static int pg_bind_null(struct db_stmt *st, int idx) { return pg_bind_text(st, idx, NULL); }
static int pg_param_count(struct db_stmt *st) { return ST(st)->nparams; }

/* ---------------------------------------------------------------- columns */

static bool has_value(struct pg_stmt *st, int col) {
  return st->res && st->row >= 0 && st->row < PQntuples(st->res) && col >= 0 &&
         col < PQnfields(st->res) && !PQgetisnull(st->res, st->row, col);
}

static int pg_column_count(struct db_stmt *st) {
  return ST(st)->res ? PQnfields(ST(st)->res) : 0;
}

static int pg_column_type(struct db_stmt *base, int col) {
  struct pg_stmt *st = ST(base);
  if (!has_value(st, col))
    return DB_NULL;
  switch (PQftype(st->res, col)) {
  case PG_OID_INT2:
  case PG_OID_INT4:
  case PG_OID_INT8:
    return DB_INTEGER;
  case PG_OID_FLOAT4:
  case PG_OID_FLOAT8:
  case PG_OID_NUMERIC:
    return DB_FLOAT;
  default:
    return DB_TEXT;
  }
}

static const char *pg_column_text(struct db_stmt *base, int col) {
  struct pg_stmt *st = ST(base);
  return has_value(st, col) ? PQgetvalue(st->res, st->row, col) : NULL;
}

/* As SQLite converts: a real is truncated, text that is no number reads 0. */
static int64_t pg_column_int64(struct db_stmt *base, int col) {
  const char *text = pg_column_text(base, col);
  if (!text)
    return 0;
  if (strpbrk(text, ".eE"))
    return (int64_t)strtod(text, NULL);
  return strtoll(text, NULL, 10);
}

static double pg_column_double(struct db_stmt *base, int col) {
  const char *text = pg_column_text(base, col);
  return text ? strtod(text, NULL) : 0.0;
}

static const char *pg_column_name(struct db_stmt *base, int col) {
  struct pg_stmt *st = ST(base);
  return st->res && col >= 0 && col < PQnfields(st->res) ? PQfname(st->res, col) : NULL;
}

static bool pg_readonly(struct db_stmt *st) { return ST(st)->readonly; }

/* ---------------------------------------------------------------- connection */

static void pg_close(struct db *db) {
  PQfinish(PG(db)->conn);
  free(db);
}

static int pg_exec(struct db *db, const char *sql) { return run_command(PG(db), sql); }
static int pg_begin(struct db *db, bool serializable) {
  return run_command(PG(db), serializable ? "BEGIN ISOLATION LEVEL SERIALIZABLE"
                                          : "BEGIN ISOLATION LEVEL READ COMMITTED");
}
static int64_t pg_changes(struct db *db) { return PG(db)->changes; }
static bool pg_in_transaction(struct db *db) { return PG(db)->tx_open; }
static const char *pg_errmsg(struct db *db) { return PG(db)->err; }

static const struct db_driver pg_driver = {
    .backend = DB_BACKEND_POSTGRESQL,
    .close = pg_close,
    .exec = pg_exec,
    .begin = pg_begin,
    .prepare = pg_prepare,
    .finalize = pg_finalize,
    .step = pg_step,
    .reset = pg_reset,
    .bind_int64 = pg_bind_int64,
    .bind_double = pg_bind_double,
    .bind_text = pg_bind_text,
    .bind_null = pg_bind_null,
    .param_count = pg_param_count,
    .column_count = pg_column_count,
    .column_type = pg_column_type,
    .column_int64 = pg_column_int64,
    .column_double = pg_column_double,
    .column_text = pg_column_text,
    .column_name = pg_column_name,
    .readonly = pg_readonly,
    .changes = pg_changes,
    .in_transaction = pg_in_transaction,
    .errmsg = pg_errmsg,
};


struct db *db_pg_open(const char *conninfo, const char *password, char *err, size_t errlen) {
  struct pg_db *db = calloc(1, sizeof *db);
  if (!db) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  db->base.drv = &pg_driver;
  /* Later keywords win: the URL overrides the defaults, the password file the URL. A
   * lock waited for longer than lock_timeout fails (55P03, busy) like SQLite's busy
   * timeout, and the transaction runner retries it. */
  const char *keys[] = {"application_name", "connect_timeout", "options", "dbname", "password",
                        NULL};
  const char *values[] = {"opforge", "10", "-c lock_timeout=5000", conninfo, password, NULL};
  char *parse_error = NULL;
  PQconninfoOption *parsed = PQconninfoParse(conninfo, &parse_error);
  if (!parsed) {
    snprintf(err, errlen, "%s", parse_error ? parse_error : "out of memory");
    trim_line_ends(err);
    PQfreemem(parse_error);
    free(db);
    return NULL;
  }
  PQconninfoFree(parsed);
  db->conn = PQconnectdbParams(keys, values, 1);
  if (!db->conn) {
    snprintf(err, errlen, "out of memory");
    free(db);
    return NULL;
  }
  /* A server that cannot be reached now is tried again at first use (ensure_connected):
   * the connection is kept, with the reason in db_errmsg. */
  if (PQstatus(db->conn) == CONNECTION_OK)
    PQsetNoticeProcessor(db->conn, ignore_notice, NULL);
  else
    set_err(db, PQerrorMessage(db->conn));
  return &db->base;
}
