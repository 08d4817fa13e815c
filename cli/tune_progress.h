/* How `opforge tune` and `opforge submit --wait` show tasks as they run: on a terminal a
 * live block with one line per task (a bar, step and budget, best speed-up, elapsed time
 * and an estimate of the time left), redrawn in place; off a terminal one readable line
 * per event, for logs (no carriage return, no escape code); with --events the raw event
 * JSON, one per line. */
#ifndef OPFORGE_CLI_TUNE_PROGRESS_H
#define OPFORGE_CLI_TUNE_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "cli/tune_task.h"

enum tune_view_mode {
  TUNE_VIEW_LIVE,   /* a terminal: the live block */
  TUNE_VIEW_LINES,  /* a log: one line per event */
  TUNE_VIEW_EVENTS, /* --events: the event JSON */
};

struct tune_view {
  FILE *out;           /* borrowed */
  enum tune_view_mode mode;
  bool wrap_events;    /* TUNE_VIEW_EVENTS: {"task","id","event"} per line, else the event */
  size_t block_lines;  /* lines of the live block now on screen */
};

/* Sets v up to write to out (borrowed): EVENTS when events is set, else LIVE when out is
 * a terminal and LINES when it is not. wrap_events: see struct tune_view. */
void tune_view_init(struct tune_view *v, FILE *out, bool events, bool wrap_events);

/* An event of task t arrived and t has taken it: LINES prints its line (quiet: only the
 * finished line), EVENTS its JSON; LIVE prints the finished line above the block. event
 * is borrowed. */
void tune_view_event(struct tune_view *v, const struct tune_task *t, const json_t *event,
                     bool quiet);

/* A line of the run's own (submitted, reused, a note): printed above the live block, as
 * is in LINES mode; not in EVENTS mode unless always. */
void tune_view_say(struct tune_view *v, bool always, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Redraws the live block (LIVE only): the tasks not yet final, running ones first, as
 * many as the terminal has rows for. now_s is Unix seconds. */
void tune_view_redraw(struct tune_view *v, const struct tune_task *tasks, size_t n,
                      double now_s);

/* Removes the live block, so that other output can follow. */
void tune_view_clear(struct tune_view *v);

/* Writes t's live line into out (outlen bytes): name padded to name_width, a bar, step
 * and budget, best speed-up, elapsed time and the time left. now_s is Unix seconds.
 * Exposed for tests of the format. */
void tune_format_live(const struct tune_task *t, int name_width, double now_s, char *out,
                      size_t outlen);

/* Writes t's finished line ("[name] succeeded: best 4.00x (0.5000 ms) after 3 steps, stop
 * space_exhausted") into out. */
void tune_format_finished(const struct tune_task *t, char *out, size_t outlen);

#endif
