/* The skill memory's prompts (AdaExplore): the extraction prompt turns one failure log into
 * one "You cannot ..." rule or "no guidance", the dedup prompt asks whether that rule
 * repeats a kept one. Templates proposers/llm/prompts/skill_extract.txt and
 * skill_dedup.txt; the calls themselves are the LLM proposer's reflect operation
 * (proposers/llm/proposer.c). */
#ifndef OPFORGE_LLM_SKILLS_H
#define OPFORGE_LLM_SKILLS_H

#include <jansson.h>
#include <stddef.h>

#include "proposers/proposer.h"

#define LLM_SKILL_SOURCE_MAX (8u * 1024u)   /* bytes of the failed kernel shown */
#define LLM_SKILL_FAILURE_MAX (4u * 1024u)  /* bytes of the failure log shown */
#define LLM_SKILL_DEDUP_MAX 40              /* kept rules shown to the dedup prompt */
#define LLM_SKILL_MAX_TOKENS 2048           /* completion cap of either call */

/* The extraction prompt's user message for req (caller frees *ret_user). Returns 0, or -1
 * with err. */
int llm_skill_extract_prompt(const struct skill_reflection *req, char **ret_user, char *err,
                             size_t errlen);

/* Reads an extraction answer: 1 with the rule in ret (a sentence "You cannot ... ." of at
 * most PROPOSAL_RULE_MAX bytes: the answer's last non-empty line, without quotes,
 * backticks or a list marker; a missing final period is added), 0 for "no guidance" or an
 * answer that is no such sentence. */
int llm_skill_parse_rule(const char *answer, char ret[PROPOSAL_RULE_MAX + 1]);

/* The dedup prompt's user message for rule against rules (the first LLM_SKILL_DEDUP_MAX,
 * numbered from 1); caller frees *ret_user. Returns 0, or -1 with err. */
int llm_skill_dedup_prompt(const char *rule, json_t *rules, char **ret_user, char *err,
                           size_t errlen);

/* Reads a dedup answer: the 1-based number of the matched rule (1..n), or 0 when the rule
 * is new, the answer is not the JSON object asked for, or its confidence is under 0.5. */
size_t llm_skill_parse_dedup(const char *answer, size_t n);

/* The index in rules of a rule whose text equals rule (case aside), or -1. */
long llm_skill_same_text(const char *rule, json_t *rules);

#endif
