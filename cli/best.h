/* `opforge best`: fetches a task's best correct candidate. */
#ifndef OPFORGE_CLI_BEST_H
#define OPFORGE_CLI_BEST_H

/* `opforge best ID [--format cuda|kernelbench] [-o FILE] [--server URL]`: argv[0] is
 * "best". Writes GET /v1/tasks/ID/best to FILE (created or replaced only on success) or
 * to stdout: with format cuda (the default) the JSON {"task_id","candidate_id","speedup",
 * "time_ms","source","options","plan"}, with format kernelbench the Python file defining
 * ModelNew. A line naming the candidate and its speed-up goes to stderr. Returns the exit
 * status: 0 written; 1 refused (e.g. `error: no_correct_candidate: ...`), unreachable,
 * or the file could not be written; 2 bad usage. */
int cli_best_main(int argc, char **argv);

#endif
