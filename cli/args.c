/* What the subcommands share before they reach a server: the option loop, the FILE.py
 * operand, reading a program, and filling a JSON body. */
#include "cli/args.h"
#include "cli/client.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_parse_options(int argc, char **argv, const struct cli_options *spec, void *opts) {
  opterr = 0;
  optind = 0; /* glibc: start afresh, whatever parsed argv before us */
  int c;
  while ((c = getopt_long(argc, argv, spec->shortopts, spec->longopts, NULL)) != -1) {
    if (c == spec->help) {
      spec->usage(stdout);
      return CLI_EXIT_OK;
    }
    if (c == ':') {
      fprintf(stderr, "error: %s needs a value\n", argv[optind - 1]);
      return CLI_EXIT_USAGE;
    }
    if (c == '?') {
      fprintf(stderr, "error: unknown option '%s'\n", argv[optind - 1]);
      spec->usage(stderr);
      return CLI_EXIT_USAGE;
    }
    if (spec->apply(opts, c, optarg) != 0)
      return CLI_EXIT_USAGE;
  }
  return -1;
}

int cli_parse_file_args(int argc, char **argv, const struct cli_options *spec, void *opts,
                        const char **ret_file) {
  int rc = cli_parse_options(argc, argv, spec, opts);
  if (rc >= 0)
    return rc;
  if (optind != argc - 1) {
    fprintf(stderr, "error: %s\n", optind >= argc ? "missing FILE.py" : "expected one FILE.py");
    spec->usage(stderr);
    return CLI_EXIT_USAGE;
  }
  *ret_file = argv[optind];
  return -1;
}

/* Opens path for reading, refusing a directory. Returns the descriptor (the caller closes
 * it), or -1 after printing why. */
static int open_program(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    fprintf(stderr, "error: cannot read %s: %s\n", path, strerror(errno));
    if (fd >= 0)
      close(fd);
    return -1;
  }
  if (S_ISDIR(st.st_mode)) {
    fprintf(stderr, "error: cannot read %s: %s\n", path, strerror(EISDIR));
    close(fd);
    return -1;
  }
  return fd;
}

/* Reads fd into data (max + 1 bytes) until the end or one byte past max, so that a pipe
 * or a growing file is caught too. Returns the length, or -1 with errno set. */
static ssize_t read_upto(int fd, char *data, size_t max) {
  size_t len = 0;
  while (len <= max) {
    ssize_t n = read(fd, data + len, max + 1 - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -1;
    if (n == 0)
      break;
    len += (size_t)n;
  }
  return (ssize_t)len;
}

int cli_read_program(const char *path, size_t max, const char *limit_name, json_t **ret_text) {
  int fd = open_program(path);
  if (fd < 0)
    return -1;
  char *data = malloc(max + 1);
  ssize_t n = data ? read_upto(fd, data, max) : 0;
  int err = errno;
  close(fd);
  size_t len = n > 0 ? (size_t)n : 0;
  json_t *text = NULL;
  if (!data || n < 0)
    fprintf(stderr, "error: cannot read %s: %s\n", path, !data ? "out of memory" : strerror(err));
  else if (len > max && limit_name)
    fprintf(stderr, "error: %s is larger than %zu bytes (%zu KiB), the limit for %s\n", path,
            max, max / 1024, limit_name);
  else if (len > max)
    fprintf(stderr, "error: %s is larger than %zu bytes\n", path, max);
  else if (len == 0)
    fprintf(stderr, "error: %s is empty\n", path);
  else if (!(text = json_stringn(data, len)))
    fprintf(stderr, "error: %s is not valid UTF-8 text\n", path);
  free(data);
  if (!text)
    return -1;
  *ret_text = text;
  return 0;
}

int cli_json_put(json_t *obj, const char *key, json_t *value) {
  return value ? json_object_set_new(obj, key, value) : -1;
}
