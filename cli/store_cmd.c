/* `opforge store copy` (see cli/store_cmd.h): moves a single host's SQLite data into
 * PostgreSQL, so that several GPU hosts can share it. The source's data directory lock
 * (server/data_lock.h) is held for the whole copy, so no server runs on it meanwhile;
 * the copy itself is store_copy's, in one transaction on the destination. The
 * destination's location may hold a password: only store_display's redacted form is
 * ever printed. */
#include "cli/store_cmd.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/args.h"
#include "cli/client.h"
#include "server/data_lock.h"
#include "store/conninfo.h"
#include "store/copy.h"
#include "store/store.h"

/* The longest PostgreSQL password read from --to-password-file, plus its NUL. */
#define STORE_CMD_PASSWORD_MAX 1024

struct store_cmd_opts {
  const char *from;          /* sqlite:DIR */
  const char *to;            /* postgresql://... (may hold a password: never printed) */
  const char *password_file; /* --to-password-file, or NULL */
};

/* Prints the help text of `opforge store copy` on out. */
static void usage(FILE *out) {
  fputs("usage: opforge store copy --from sqlite:DIR --to postgresql://... "
        "[--to-password-file F]\n"
        "Copies one host's SQLite store into a PostgreSQL database that several servers\n"
        "are to share: every task with its events, candidates and search tree, every\n"
        "memory namespace with its statistics and evidence, the skill memory and the\n"
        "idempotency keys, in one transaction. Ids, task numbers, timestamps and the order\n"
        "of every list are kept; the servers registered in the source are not copied\n"
        "(tasks it was running resume once their lease runs out).\n"
        "  --from sqlite:DIR       the data directory (--data) holding opforge.db. No\n"
        "                          server may run on it: the copy holds its lock\n"
        "                          (DIR/opforge.lock) meanwhile. It is migrated to this\n"
        "                          opforge's schema first, as `opforge serve` would.\n"
        "  --to URL                the PostgreSQL database (postgresql:// or postgres://;\n"
        "                          its tables are created when it has none). It must hold\n"
        "                          no task, skill or idempotency key, no server may be\n"
        "                          using it, and its memory must be the untouched seed\n"
        "                          that `opforge serve` loads (or none): the source's\n"
        "                          memory replaces it. Anything else is refused.\n"
        "  --to-password-file F    file whose first line is the PostgreSQL password (else\n"
        "                          the URL's, or libpq's PGPASSFILE)\n"
        "  --help                  show this text\n"
        "Prints one line per table (`tasks: 300 rows`) and a summary. Exit status: 0\n"
        "copied, 1 refused or failed (nothing is written then), 2 bad usage or an\n"
        "unusable file.\n",
        out);
}

enum { OPT_FROM = 256, OPT_TO, OPT_PASSWORD_FILE, OPT_HELP };

static const struct option long_opts[] = {
    {"from", required_argument, NULL, OPT_FROM},
    {"to", required_argument, NULL, OPT_TO},
    {"to-password-file", required_argument, NULL, OPT_PASSWORD_FILE},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Stores one parsed option in opts (a struct store_cmd_opts). Returns 0, or -1 for a code
 * it does not know. */
static int apply_opt(void *opts, int code, const char *arg) {
  struct store_cmd_opts *o = opts;
  switch (code) {
  case OPT_FROM: o->from = arg; return 0;
  case OPT_TO: o->to = arg; return 0;
  case OPT_PASSWORD_FILE: o->password_file = arg; return 0;
  default: return -1;
  }
}

static const struct cli_options store_options = {
    .shortopts = ":", .longopts = long_opts, .help = OPT_HELP, .usage = usage,
    .apply = apply_opt,
};

/* Parses `copy [options]` (argv[0] is "copy") and checks the values' forms. Returns -1
 * to go on, else the exit status. The --to value is never echoed. */
static int parse_copy(int argc, char **argv, struct store_cmd_opts *o) {
  int rc = cli_parse_options(argc, argv, &store_options, o);
  if (rc >= 0)
    return rc;
  if (optind < argc || !o->from || !o->to) {
    fprintf(stderr, "error: %s\n", optind < argc ? "store copy takes no operands"
                                   : !o->from    ? "--from is required"
                                                 : "--to is required");
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  const char *why = NULL;
  if (strncmp(o->from, "sqlite:", 7) != 0 || !o->from[7])
    why = "--from: expected sqlite:DIR, the data directory holding opforge.db";
  else if (!store_location_is_pg(o->to))
    why = "--to: expected a postgresql:// or postgres:// URL";
  if (!why)
    return -1;
  fprintf(stderr, "error: %s\n", why);
  return CLI_EXIT_USAGE;
}

/* Reads the first line of path into buf (STORE_CMD_PASSWORD_MAX bytes). Returns 0, or
 * -1 after printing why (the file's content never). */
static int read_password(const char *path, char *buf) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fprintf(stderr, "error: --to-password-file: cannot open '%s': %s\n", path, strerror(errno));
    return -1;
  }
  char *line = fgets(buf, STORE_CMD_PASSWORD_MAX, f);
  fclose(f);
  size_t len = line ? strcspn(line, "\r\n") : 0;
  if (!line || len == 0 || len == STORE_CMD_PASSWORD_MAX - 1) {
    memset(buf, 0, STORE_CMD_PASSWORD_MAX);
    fprintf(stderr, "error: --to-password-file: '%s' must hold the password on its first line "
            "(1..%d bytes)\n", path, STORE_CMD_PASSWORD_MAX - 2);
    return -1;
  }
  buf[len] = '\0';
  return 0;
}

/* Takes dir's data directory lock after checking that dir holds a database. Returns 0
 * and *ret_lock (the caller releases it), or the exit status after printing why. */
static int lock_source(const char *dir, struct data_lock **ret_lock) {
  char db[4096];
  struct stat st;
  if ((size_t)snprintf(db, sizeof db, "%s/opforge.db", dir) >= sizeof db) {
    fprintf(stderr, "error: --from: the path '%s' is too long\n", dir);
    return CLI_EXIT_USAGE;
  }
  errno = 0;
  int missing = stat(db, &st) != 0 ? errno : 0;
  if (missing || !S_ISREG(st.st_mode)) {
    fprintf(stderr, "error: --from: %s: %s\n", db, missing ? strerror(missing) : "not a file");
    return CLI_EXIT_USAGE;
  }
  char err[4096 + 256];
  pid_t holder = 0;
  if (data_lock_acquire(dir, ret_lock, &holder, err, sizeof err) == 0)
    return 0;
  if (strstr(err, "in use by another opforge server")) {
    if (holder > 0)
      fprintf(stderr, "error: --from: %s is in use by a running opforge server (pid %ld); stop "
              "it first\n", dir, (long)holder);
    else
      fprintf(stderr, "error: --from: %s is in use by a running opforge server; stop it "
              "first\n", dir);
  } else {
    const char *msg = strncmp(err, "--data: ", 8) == 0 ? err + 8 : err;
    fprintf(stderr, "error: --from: %s\n", msg);
  }
  return CLI_EXIT_FAIL;
}

/* store_copy's progress: one line per table as it is copied. */
static void print_progress(void *arg, const char *table, int64_t rows) {
  (void)arg;
  if (!table)
    printf("the destination was busy: starting over\n");
  else
    printf("%s: %" PRId64 " row%s\n", table, rows, rows == 1 ? "" : "s");
  fflush(stdout);
}

/* Opens both stores and copies; the source's lock is held by the caller. */
static int copy_stores(const char *dir, const char *to, const char *password) {
  char err[2048];
  struct store *src = NULL, *dst = NULL;
  if (store_open(dir, &src, err, sizeof err) != STORE_OK) {
    fprintf(stderr, "error: --from: %s\n", err);
    return CLI_EXIT_FAIL;
  }
  if (store_open_pg(to, password, &dst, err, sizeof err) != STORE_OK) {
    fprintf(stderr, "error: --to: %s\n", err);
    store_close(src);
    return CLI_EXIT_FAIL;
  }
  int64_t rows = 0;
  int status = store_copy(src, dst, print_progress, NULL, &rows, err, sizeof err);
  if (status == STORE_OK)
    printf("copied %" PRId64 " row%s from %s to %s (schema version %d)\n", rows,
           rows == 1 ? "" : "s", store_display(src), store_display(dst),
           store_schema_version(dst));
  else
    fprintf(stderr, "error: %s\n", err);
  store_close(dst);
  store_close(src);
  return status == STORE_OK ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

/* `opforge store copy`, after the command word. */
static int store_copy_main(int argc, char **argv) {
  struct store_cmd_opts o = {0};
  int rc = parse_copy(argc, argv, &o);
  if (rc >= 0)
    return rc;
  static char password[STORE_CMD_PASSWORD_MAX];
  if (o.password_file && read_password(o.password_file, password) != 0)
    return CLI_EXIT_USAGE;
  const char *dir = o.from + 7;
  struct data_lock *lock = NULL;
  rc = lock_source(dir, &lock);
  if (rc == 0) {
    rc = copy_stores(dir, o.to, o.password_file ? password : NULL);
    data_lock_release(lock);
  }
  memset(password, 0, sizeof password);
  return rc;
}

int cli_store_main(int argc, char **argv) {
  if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
      strcmp(argv[1], "help") == 0) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
  }
  if (strcmp(argv[1], "copy") != 0) {
    fprintf(stderr, "error: unknown store command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_EXIT_USAGE;
  }
  return store_copy_main(argc - 1, argv + 1);
}
