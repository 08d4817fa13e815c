/* Strict parsing of an LLM's answer into a candidate: a large step's one CUDA block and
 * one JSON plan block, a small step's old/new edits applied to the parent's source. Any
 * other shape is a parse failure that names what was wrong:
 * {"stage":"parse","class":"parse/<what>","message"}. */
#ifndef OPFORGE_LLM_ANSWER_H
#define OPFORGE_LLM_ANSWER_H

#include <jansson.h>
#include <stddef.h>

#define LLM_MAX_SOURCE (256u * 1024u) /* bytes of a candidate's source */
#define LLM_MAX_EDITS 64

/* What went wrong: a failure class and a message. */
struct answer_error {
  char cls[40];
  char message[512];
};

/* A fenced block of an answer: ```lang ... ```. Pointers into the answer. */
struct answer_block {
  enum { BLOCK_OTHER, BLOCK_CUDA, BLOCK_JSON } kind;
  const char *body;
  size_t len;
};

/* Finds the fenced blocks of text, at most max, in order; returns how many there are
 * (which may exceed max), or -1 when a fence is left open (err set). An untagged block
 * counts as JSON when it starts with '{', as CUDA when it holds __global__. */
long answer_blocks(const char *text, struct answer_block *ret, size_t max,
                   struct answer_error *err);

/* One old/new edit; both owned (answer_edits_free). */
struct answer_edit {
  char *old_text;
  char *new_text;
};

/* Reads the <old_str_N>...</old_str_N> <new_str_N>...</new_str_N> pairs of text, in order,
 * each stripped of newlines at both ends. Returns the count (>= 1) and *ret_edits (caller
 * frees with answer_edits_free), or -1 with err: no edit (parse/no_edits), a tag without
 * its pair or an empty old_str (parse/bad_edit), more than LLM_MAX_EDITS. */
long answer_edits(const char *text, struct answer_edit **ret_edits, struct answer_error *err);
void answer_edits_free(struct answer_edit *edits, size_t n);

/* Applies the n edits in order to source: each old_text must occur exactly once in the
 * text as the edits before it left it. Returns the new text (caller frees), or NULL with
 * err: parse/edit_not_found, parse/edit_not_unique, or a result over LLM_MAX_SOURCE. */
char *answer_apply_edits(const char *source, const struct answer_edit *edits, size_t n,
                         struct answer_error *err);

/* Checks a plan block (borrowed) against the region's profile (its input:k, param:* and
 * output:k tensors) and source (its extern "C" __global__ kernels): the shape the
 * evaluator's plan validator requires, and every output passed to some launch. The block
 * is {"launches", "buffers"?, "options"?}. Returns 0 with *ret_plan ({"buffers",
 * "launches"}) and *ret_options (an array) (caller owns both), or -1 with err
 * (parse/bad_plan, parse/unknown_tensor, parse/unknown_buffer, parse/kernel_missing,
 * parse/output_not_written). */
int answer_check_plan(json_t *block, json_t *profile, const char *source, json_t **ret_plan,
                      json_t **ret_options, struct answer_error *err);

/* The names of the extern "C" __global__ functions of source, as a JSON array of strings
 * (caller owns); NULL when out of memory. */
json_t *answer_kernel_names(const char *source);

/* A large step's answer to a candidate {"source","options","plan"} (caller owns), or NULL
 * with err: parse/no_source, parse/no_plan, parse/two_plans, parse/bad_json, or what
 * answer_check_plan says. */
json_t *answer_parse_large(const char *text, json_t *profile, struct answer_error *err);

/* A small step's answer applied to parent ({"source","options","plan"}, borrowed): its
 * edits, and its plan block when it has one (else the parent's plan, checked against the
 * new source). Returns the candidate (caller owns) or NULL with err; an answer that
 * changes nothing is parse/no_change. */
json_t *answer_parse_small(const char *text, json_t *parent, json_t *profile,
                           struct answer_error *err);

#endif
