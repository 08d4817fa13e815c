/* The typed outcome of one evaluation: where a candidate failed (or that it passed), its
 * failure class and its time. The evaluator's JSON result is read into it once, and
 * everything after (HTAM rewards, tree results, result reuse, events) works on the enum. */
#ifndef OPFORGE_OUTCOME_H
#define OPFORGE_OUTCOME_H

#include <jansson.h>
#include <stdbool.h>

/* The stage of a failure, in the order a candidate meets them. The names (the evaluator
 * protocol's "stage" strings) are in eval_stage_name. */
enum eval_stage {
  EVAL_CORRECT,      /* no failure: compiled, ran, passed every check */
  EVAL_PARSE,        /* the proposer could not write a candidate */
  EVAL_COMPILE,      /* NVRTC refused the source or its options */
  EVAL_LOAD,         /* the module or plan could not be loaded */
  EVAL_LAUNCH,       /* a launch failed (plan limits, CUDA error) */
  EVAL_CORRECTNESS,  /* ran, but outputs differ from the reference */
  EVAL_CHECK,        /* a rule failed: inputs modified, repeat inconsistent, below floor */
  EVAL_TIMEOUT,      /* past its deadline; the evaluator was restarted */
  EVAL_CRASH,        /* the evaluator died or could not answer */
  EVAL_PROTOCOL,     /* the evaluator refused the request itself */
  EVAL_PROFILE,      /* profiling the reference failed (before a candidate could run) */
  EVAL_STAGE__COUNT
};

/* The protocol name of a stage ("correct", "parse", "compile", ...); static storage. */
const char *eval_stage_name(enum eval_stage stage);

/* Parses a protocol stage name. Returns 0 and sets *ret, or -1 for NULL or an unknown
 * name (*ret untouched). "correct" is not a failure stage and is refused too. */
int eval_stage_from_name(const char *name, enum eval_stage *ret);

/* True for stages that may be the machine's fault rather than the candidate's (crash,
 * timeout, load, protocol, profile): such a result is never reused for a repeated
 * candidate. */
bool eval_stage_environmental(enum eval_stage stage);

struct eval_outcome {
  enum eval_stage stage;  /* EVAL_CORRECT when it passed */
  char cls[96];           /* the failure class ("compile/syntax", ...); "" when correct */
  double time_ms;         /* median time; 0 when not timed */
};

/* Reads an evaluation result ({"correct", "failure": {"stage","class"}, "time":
 * {"median_ms"}}, borrowed) into *ret. A result that is not correct and names no known
 * stage counts as EVAL_CORRECTNESS. */
void eval_outcome_read(json_t *result, struct eval_outcome *ret);

#endif
