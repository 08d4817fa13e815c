/* Helpers shared by the builtin-family unit tests (test_builtin_*.c); see builtin_testlib.c. */
#ifndef OPFORGE_TESTS_UNIT_BUILTIN_TESTLIB_H
#define OPFORGE_TESTS_UNIT_BUILTIN_TESTLIB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

#include <jansson.h>

/* ---- environment: source tree, KernelBench, the venv's python ---- */

/* KernelBench's directory (static storage), or NULL with a printed reason. */
const char *kernelbench_dir(void);

/* The evaluator's python (static storage), or NULL with a printed reason. */
const char *python_path(void);

/* The whole file at path (caller frees), or NULL. */
char *read_file(const char *path);

/* Writes text to path, replacing it; fails the running test on any error. */
void write_file(const char *path, const char *text);

/* A small task's source (caller frees): source itself when not NULL, else the KernelBench
 * file (a path relative to kernelbench_dir()) followed by sizes, assignments that override
 * its size constants. Fails the running test when the file cannot be read. The arguments
 * stay the caller's. */
char *task_source(const char *source, const char *file, const char *sizes);

/* ---- one evaluator process speaking JSON lines (docs/architecture.md, "Evaluator protocol") ---- */

struct evaluator {
  pid_t pid;
  FILE *to, *from;
  int next_id;
};

/* Starts `python gpu/evaluator/main.py --device meta` into *ev; false (printing why) when the
 * venv or the source tree is missing. The caller stops a started one with evaluator_stop. */
bool evaluator_start(struct evaluator *ev);

/* Sends one request (stolen); the reply's result (caller owns), or NULL on an error
 * reply (printed). */
json_t *evaluator_call(struct evaluator *ev, json_t *req);

/* The profile of a task source (caller owns), or NULL. name and source stay the caller's. */
json_t *evaluator_profile(struct evaluator *ev, const char *name, const char *source);

/* Shuts down the evaluator started by evaluator_start and releases its pipes and process. */
void evaluator_stop(struct evaluator *ev);

/* The one evaluator process a test program's tests share, and whether it runs: cmocka
 * group fixtures that start it (when KernelBench and the venv are there) and stop it. */
extern struct evaluator g_ev;
extern bool g_have_ev;
int builtin_group_setup(void **state);
int builtin_group_teardown(void **state);

/* The profile of a public KernelBench file ("level1/NAME.py") at its real size, made by
 * g_ev once and cached until builtin_group_teardown (the cache owns it: the caller must
 * not free it), or NULL without the evaluator. Fails the test when no profile comes. */
json_t *public_profile(const char *file);

/* Calls fn(file, ctx) for every .py file of a KernelBench level ("level1"), file being
 * "level1/NAME.py"; returns how many. The caller owns ctx. */
typedef void (*public_task_fn)(const char *file, void *ctx);
size_t for_each_public_task(const char *level, public_task_fn fn, void *ctx);

/* ---- a family's matcher on small task sources ---- */

/* True when the shared evaluator runs; else prints why the test skips. */
bool need_evaluator(void);

/* A graph a family matches (rc 1, text its summary), refuses (-1, text the reason) or
 * leaves to others (0, text the reason). */
struct match_case {
  const char *name, *src;
  int rc;
  const char *text;
};

/* A family's match function (struct builtin_family's match). */
typedef int (*family_match_fn)(json_t *profile, json_t **ret_match, char *why, size_t whylen);

/* match on the profile of c's source (from the shared evaluator): its return code, the
 * match (caller owns, NULL unless 1) and the reason in why. */
int match_case_run(family_match_fn match, const struct match_case *c, json_t **ret_match,
                   char *why, size_t whylen);

/* Runs match on each of the n cases, printing a line each, and fails the running test
 * unless every return code is the case's and its summary or reason equals the case's text
 * (contains it, when exact is false). Takes nothing over. */
void expect_match_cases(family_match_fn match, const struct match_case *cases, size_t n,
                        bool exact);

/* The match of the case named name among the n cases (caller owns); fails the running
 * test unless there is one and it matches. */
json_t *match_case_named(family_match_fn match, const struct match_case *cases, size_t n,
                         const char *name);

/* ---- knob checks ---- */

struct builtin_family;
struct knob_set;

/* One knob move a family's check must refuse: KNOB set to value, and the exact reason. */
struct knob_refusal {
  const char *knob;
  int value;
  const char *why;
};

/* Applies each of the n moves of refused to a copy of k0 and fails the running test
 * unless f's check refuses it on match m with exactly its reason. Takes nothing over. */
void expect_knob_refusals(const struct builtin_family *f, json_t *m, const struct knob_set *k0,
                          const struct knob_refusal *refused, size_t n);

/* The CPU-emulation harness is shared by the pointwise and reduce tests only; the others
 * have their own helpers of the same names, so they leave BUILTIN_TESTLIB_EMULATOR unset. */
#ifdef BUILTIN_TESTLIB_EMULATOR

/* Python, one line per string (NULL-terminated): each task's inputs, parameters, eager
 * output and float64 output as raw files in their own dtypes. */
extern const char *const ref_script[];

/* The size in bytes of one element of dtype. */
size_t dtype_size(const char *dtype);

/* Copies n into out (len bytes, NUL-terminated) with every non-alphanumeric replaced by
 * '_'. The caller owns both buffers. */
void sanitize(const char *n, char *out, size_t len);

/* Writes candidate cand of profile as a namespace ns whose run() executes the plan on the
 * files of dir and saves the output to result. Takes nothing over. */
void write_candidate(FILE *f, const char *ns, json_t *profile, json_t *cand, const char *dir,
                     const char *result);

/* The whole raw file at path (caller frees) and its size in bytes; fails the running test
 * when it cannot be read. */
void *read_raw(const char *path, size_t *ret_bytes);

/* Whether result matches the references of dir under the evaluator's rules, with the
 * comparison described in msg (len bytes, caller's buffer). Takes nothing over. */
bool compare_result(const char *dir, const char *result, const char *dtype, char *msg,
                    size_t len);

/* Task i of a test's table, as prepare_tasks reads it: its name (the table's storage) into
 * *ret_name, and its source, which the caller frees. */
typedef char *(*task_source_fn)(size_t i, const char **ret_name);

/* Writes the source of each of the n tasks (task(i)) to tmp/<name>/task.py, then runs
 * ref_script over them all, which writes each task's reference data beside its source.
 * Fails the running test on any error. tmp stays the caller's. */
void prepare_tasks(const char *tmp, size_t n, task_source_fn task);

/* Compares every emulated run of runs (objects {"dir", "result", "dtype", "what"}, "what"
 * the knob variant, "" for the defaults) with its references, printing a line per run with
 * the task (the last component of dir) name_width and the variant what_width characters
 * wide; fails the running test on a mismatch. Takes nothing over. */
void check_runs(json_t *runs, int name_width, int what_width);

/* A C++ prelude, one line per string (NULL-terminated), that runs the CUDA kernels of the
 * builtin templates on the CPU: the ofg_emu_launch, ofg_emu_ptr, ofg_emu_load/alloc/save
 * that write_candidate's run() calls. Threads are ucontext fibers of one OS thread per
 * block; __syncthreads is a block barrier, shuffles and __syncwarp warp barriers; a
 * cluster's blocks run on OS threads at once. */
extern const char *const emu_cuda_prelude[];

/* ---- NVRTC ---- */

/* Compiles every candidate of cands ({"source", "options", "tag"}; borrowed) for sm_90a
 * with two threads, printing each failure with its tag; returns how many failed. */
size_t compile_all(json_t *cands);

#endif /* BUILTIN_TESTLIB_EMULATOR */

#endif /* OPFORGE_TESTS_UNIT_BUILTIN_TESTLIB_H */
