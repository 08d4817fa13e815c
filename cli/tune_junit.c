/* `opforge tune --junit FILE`: the results as JUnit XML. */
#include "cli/tune_junit.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/utf8.h"
#include "cli/client.h"

#define NOTE_MAX 600

/* Writes one character of valid UTF-8 (len bytes at p) escaped. */
static void escape_char(FILE *f, const unsigned char *p, size_t len) {
  unsigned char c = p[0];
  if (len == 1) {
    switch (c) {
    case '&': fputs("&amp;", f); return;
    case '<': fputs("&lt;", f); return;
    case '>': fputs("&gt;", f); return;
    case '"': fputs("&quot;", f); return;
    case '\'': fputs("&apos;", f); return;
    case '\t': fputs("&#9;", f); return;
    case '\n': fputs("&#10;", f); return;
    case '\r': fputs("&#13;", f); return;
    default: fputc(c < 0x20 || c == 0x7f ? '?' : c, f); return;
    }
  }
  /* U+FFFE and U+FFFF (EF BF BE, EF BF BF) are not XML characters. */
  if (len == 3 && c == 0xEF && p[1] == 0xBF && (p[2] == 0xBE || p[2] == 0xBF)) {
    fputc('?', f);
    return;
  }
  fwrite(p, 1, len, f);
}

/* The length of the UTF-8 sequence led by c (1 for ASCII and for what utf8_sanitize
 * left: it replaced every invalid byte). */
static size_t seq_len(unsigned char c) {
  return c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
}

void tune_xml_escape(FILE *f, const char *s) {
  char *clean = utf8_sanitize(s, strlen(s));
  if (!clean) {
    fputc('?', f);
    return;
  }
  const unsigned char *p = (const unsigned char *)clean;
  while (*p) {
    size_t len = seq_len(*p);
    escape_char(f, p, len);
    p += len;
  }
  free(clean);
}

/* Writes `<property name="name" value="value"/>`. */
static void property(FILE *f, const char *name, const char *value) {
  fputs("        <property name=\"", f);
  tune_xml_escape(f, name);
  fputs("\" value=\"", f);
  tune_xml_escape(f, value);
  fputs("\"/>\n", f);
}

/* Writes the element that says a task did not pass (<failure>, <error>, <skipped>), or
 * nothing for one that passed. */
static void verdict(FILE *f, const struct tune_report *r, const struct tune_task *t) {
  char note[NOTE_MAX], message[NOTE_MAX + 64];
  tune_task_note(r, t, note, sizeof note);
  const char *element = NULL, *type = NULL;
  if (t->state == TUNE_SUCCEEDED && !tune_task_passes(t, r->fail_under)) {
    element = "failure", type = "under_threshold";
    snprintf(message, sizeof message, "best speed-up %.2fx is under --fail-under %.2fx",
             t->best_speedup, r->fail_under);
  } else if (t->state == TUNE_FAILED || t->state == TUNE_CANCELLED) {
    element = "failure", type = tune_state_name(t->state);
    snprintf(message, sizeof message, "%s", t->state == TUNE_FAILED ? note : "cancelled");
  } else if (t->state == TUNE_REFUSED || t->state == TUNE_LOST) {
    element = "error", type = tune_state_name(t->state);
    snprintf(message, sizeof message, "%s", note);
  } else if (!tune_state_is_final(t->state)) {
    element = "skipped";
    snprintf(message, sizeof message, "unfinished (%s) when opforge stopped following it",
             tune_state_name(t->state));
  }
  if (!element)
    return;
  fprintf(f, "      <%s", element);
  if (type) {
    fputs(" type=\"", f);
    tune_xml_escape(f, type);
    fputc('"', f);
  }
  fputs(" message=\"", f);
  tune_xml_escape(f, message);
  fputs("\"/>\n", f);
}

/* Writes one <testcase>. */
static void testcase(FILE *f, const struct tune_report *r, const struct tune_task *t) {
  char url[CLI_MAX_URL + 96], speedup[32] = "", ms[32] = "";
  char text[sizeof url + 2 * sizeof t->stop_reason + 128];
  tune_task_url(r->server, t, url, sizeof url);
  if (!isnan(t->best_speedup))
    snprintf(speedup, sizeof speedup, "%.4f", t->best_speedup);
  if (!isnan(t->best_ms))
    snprintf(ms, sizeof ms, "%.6g", t->best_ms);
  double wall = tune_task_wall_s(t, r->now_s);
  fputs("    <testcase classname=\"opforge.tune\" name=\"", f);
  tune_xml_escape(f, t->name);
  fputs("\" file=\"", f);
  tune_xml_escape(f, t->file);
  fprintf(f, "\" time=\"%.3f\">\n", isnan(wall) || wall < 0 ? 0.0 : wall);
  fputs("      <properties>\n", f);
  property(f, "status", tune_state_name(t->state));
  property(f, "speedup", speedup);
  property(f, "best_ms", ms);
  property(f, "stop_reason", t->stop_reason);
  property(f, "url", url);
  fputs("      </properties>\n", f);
  verdict(f, r, t);
  snprintf(text, sizeof text, "%s: speed-up over eager %s%s, stop %s, origin %s, %s",
           tune_state_name(t->state), speedup[0] ? speedup : "-", speedup[0] ? "x" : "",
           t->stop_reason[0] ? t->stop_reason : "-", tune_origin_name(t->origin),
           url[0] ? url : "not submitted");
  fputs("      <system-out>", f);
  tune_xml_escape(f, text);
  fputs("</system-out>\n    </testcase>\n", f);
}

void tune_junit_write(FILE *f, const struct tune_report *r) {
  size_t failures = 0, errors = 0, skipped = 0;
  double total = 0;
  for (size_t i = 0; i < r->n; i++) {
    const struct tune_task *t = &r->tasks[i];
    failures += t->state == TUNE_FAILED || t->state == TUNE_CANCELLED ||
                (t->state == TUNE_SUCCEEDED && !tune_task_passes(t, r->fail_under));
    errors += t->state == TUNE_REFUSED || t->state == TUNE_LOST;
    skipped += !tune_state_is_final(t->state);
    double wall = tune_task_wall_s(t, r->now_s);
    total += isnan(wall) || wall < 0 ? 0 : wall;
  }
  fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
  fprintf(f, "<testsuites name=\"opforge tune\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" "
             "skipped=\"%zu\" time=\"%.3f\">\n", r->n, failures, errors, skipped, total);
  fprintf(f, "  <testsuite name=\"opforge tune\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" "
             "skipped=\"%zu\" time=\"%.3f\">\n", r->n, failures, errors, skipped, total);
  for (size_t i = 0; i < r->n; i++)
    testcase(f, r, &r->tasks[i]);
  fputs("  </testsuite>\n</testsuites>\n", f);
}

int tune_junit_write_file(const char *path, const struct tune_report *r) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  tune_junit_write(f, r);
  bool ok = !ferror(f);
  ok = fclose(f) == 0 && ok;
  if (!ok)
    fprintf(stderr, "error: cannot write %s: %s\n", path, strerror(errno));
  return ok ? 0 : -1;
}
