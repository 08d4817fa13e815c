/* A small graph with a library convolution followed by a pointwise chain, shared by the
 * partition unit test and the scripted evaluator of the engine tests (docs/architecture.md,
 * "Channels-last convolutions"). */
#ifndef OPFORGE_TESTS_CONV_TAIL_H
#define OPFORGE_TESTS_CONV_TAIL_H

#include <jansson.h>

/* The FX graph, as the evaluator profiles it, of x [2,3,8,8] -> conv (a Conv2d module)
 * [2,4,6,6] -> relu -> add the parameter b [4,1,1] -> output. Caller owns. */
json_t *conv_tail_graph(void);

#endif
