/* `opforge tune --junit FILE`: the results as JUnit XML (one <testsuite>, one <testcase>
 * per task), the report GitLab, GitHub (through a JUnit action) and Jenkins show. A task
 * that failed, was cancelled or came in under --fail-under is a <failure>, a refused or
 * lost one an <error>, an unfinished one <skipped>; each carries its speed-up, its stop
 * reason and its URL as <properties> and in <system-out>. */
#ifndef OPFORGE_CLI_TUNE_JUNIT_H
#define OPFORGE_CLI_TUNE_JUNIT_H

#include <stddef.h>
#include <stdio.h>

#include "cli/tune_report.h"

/* Writes s to f escaped for XML 1.0 character data and attribute values: & < > " ' as
 * entities, tab, newline and carriage return as character references, every other
 * character XML cannot hold (control characters, U+FFFE, U+FFFF, bytes that are not
 * UTF-8) as '?'. */
void tune_xml_escape(FILE *f, const char *s);

/* Writes the report r to f. */
void tune_junit_write(FILE *f, const struct tune_report *r);

/* Writes the report r to path. Returns 0, or -1 after printing why. */
int tune_junit_write_file(const char *path, const struct tune_report *r);

#endif
