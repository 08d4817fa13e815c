/* `opforge tune --export DIR`: each succeeded task's KernelBench file (defining ModelNew,
 * from GET /v1/tasks/{id}/best?format=kernelbench) as DIR/NAME_new.py, and its best
 * kernel's CUDA source (format=cuda) as DIR/NAME.cu, NAME being the program's file name
 * without .py. A best that is a program (library steps, or several regions) has no one
 * kernel's source: the task's note says so, and the run does not fail for it. */
#ifndef OPFORGE_CLI_TUNE_EXPORT_H
#define OPFORGE_CLI_TUNE_EXPORT_H

#include <stddef.h>

#include "cli/client.h"
#include "cli/tune_task.h"

enum tune_export_result {
  TUNE_EXPORT_OK = 0,          /* written, or a missing file explained in t's note */
  TUNE_EXPORT_UNREACHABLE = 1, /* the server could not be reached (printed) */
  TUNE_EXPORT_FAILED = 2,      /* a file could not be written, or an answer was broken
                                  (printed, and in t's note) */
};

/* Creates dir and its missing parents. Returns 0, or -1 after printing why. */
int tune_export_prepare(const char *dir);

/* Writes the path of t's file in dir into out (outlen bytes): NAME_new.py when kernel is
 * false, NAME.cu when it is true. */
void tune_export_path(const char *dir, const struct tune_task *t, bool kernel, char *out,
                      size_t outlen);

/* Exports succeeded task t under dir through client; sets t's exported_* and note. */
enum tune_export_result tune_export_task(struct cli_client *client, struct tune_task *t,
                                         const char *dir);

#endif
