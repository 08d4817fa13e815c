/* Programs: the candidate a task evaluates, composed from one choice per region of its
 * partition (library, or a generated candidate in the region's local names), and read
 * back into those choices (docs/architecture.md, "Programs"). */
#ifndef OPFORGE_PROGRAM_H
#define OPFORGE_PROGRAM_H

#include <jansson.h>

#include "engine/partition.h"

/* The candidate of a program (caller owns). choices[k] (borrowed) is NULL to run region
 * k as library steps, else its generated candidate {"source","options","plan"} in the
 * region's local names. graph is "auto", "true" or "false". A partition of one whole
 * generated region with a choice gives that candidate itself (no "program" key), so
 * single-kernel tasks are evaluated as before; anything else gives {"program": {"graph",
 * "steps"}}. Returns NULL when out of memory. */
json_t *program_compose(const struct partition *pt, json_t *const *choices, const char *graph);

/* The reference program: every region as library steps, "graph": "auto" (the evaluator
 * times stream order and the CUDA-graph replay and keeps the faster; its per-step times
 * are stream order either way). Caller owns. */
json_t *program_reference(const struct partition *pt);

/* The whole model as its one library step, replayed as a CUDA graph where that is faster
 * ("graph": "auto"): eager's own time or better, the floor of every task (caller owns). */
json_t *program_whole_model(void);

/* Reads candidate (borrowed) back into one choice per region: ret_choices[k] (caller owns
 * each; NULL for a library region) in the region's local names. ret_choices has pt->n
 * entries. A candidate that does not fit the partition gives all NULL. */
void program_choices(const struct partition *pt, json_t *candidate, json_t **ret_choices);

/* Releases the n choices of program_choices (each may be NULL). */
void program_choices_clear(json_t **choices, size_t n);

/* The time of each region in an evaluation result (borrowed) of candidate: ret_ms[k] is
 * the sum of its steps' "steps_ms", or the whole median for a single-kernel candidate;
 * -1 where unknown. ret_ms has pt->n entries. */
void program_region_times(const struct partition *pt, json_t *candidate, json_t *result,
                          double *ret_ms);

/* The floor of region k in ms: max(bytes / copy bandwidth, flops / fp32 peak) from the
 * profile's floor basis; the task's floor_ms for a whole-graph region; 0 when unknown. */
double program_region_floor(const struct partition *pt, json_t *profile, size_t k);

/* How many of candidate's steps are library steps (0 for a single-kernel candidate). */
size_t program_library_steps(json_t *candidate);

#endif
