/* The builtin proposer's entry points for the loop and the `opforge propose` command. */
#ifndef OPFORGE_BUILTIN_PROPOSE_H
#define OPFORGE_BUILTIN_PROPOSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "proposers/builtin/builtin.h"

/* Finds the first family whose matcher accepts the profile (borrowed). Returns 0 with
 * *ret_family and *ret_match (caller owns), or -1 with why naming the unmatched ops. */
int builtin_match(json_t *profile, const struct builtin_family **ret_family, json_t **ret_match,
                  char *why, size_t whylen);

/* Proposes a candidate (caller owns) for the profile: the family defaults, or the knobs of
 * parent_options (a small step's parent -D options, may be NULL), then knob_move (may be
 * NULL). Returns 0, or -1 with why; *ret_unsupported tells a task no family handles
 * from a move that does not fit the task. */
int builtin_propose_knobs(json_t *profile, const json_t *knob_move, json_t *parent_options,
                          json_t **ret_candidate, char *why, size_t whylen, bool *ret_unsupported);

#endif
