/* The export and import documents of the CLI (cli/document.h). */
#include "cli/document.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int cli_document_write(json_t *doc, const char *path) {
  if (path) {
    if (json_dump_file(doc, path, JSON_INDENT(2)) != 0) {
      fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
      return -1;
    }
    return 0;
  }
  if (json_dumpf(doc, stdout, JSON_INDENT(2)) != 0 || fputc('\n', stdout) == EOF ||
      fflush(stdout) != 0) {
    fprintf(stderr, "error: cannot write to standard output\n");
    return -1;
  }
  return 0;
}

int cli_document_read(const char *path, json_t **ret_doc) {
  struct stat st;
  bool is_stdin = strcmp(path, "-") == 0;
  if (!is_stdin && (stat(path, &st) != 0 || S_ISDIR(st.st_mode))) {
    fprintf(stderr, "error: cannot read %s: %s\n", path,
            strerror(S_ISDIR(st.st_mode) ? EISDIR : errno));
    return -1;
  }
  if (!is_stdin && st.st_size > CLI_DOCUMENT_MAX_BYTES) {
    fprintf(stderr, "error: %s is over %ld bytes\n", path, CLI_DOCUMENT_MAX_BYTES);
    return -1;
  }
  json_error_t jerr;
  json_t *doc = is_stdin ? json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr)
                         : json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
  if (!doc) {
    fprintf(stderr, "error: %s is not JSON: %s (line %d)\n", is_stdin ? "standard input" : path,
            jerr.text, jerr.line);
    return -1;
  }
  *ret_doc = doc;
  return 0;
}
