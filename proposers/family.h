/* A first classification of a task from its profile, by the ops its graph names: op
 * family and bound. Proposers that match no family themselves name the family with it. */
#ifndef OPFORGE_FAMILY_H
#define OPFORGE_FAMILY_H

#include <jansson.h>

/* The op family of the profiled FX graph (one of htam_families), by the most telling op
 * it contains: gemm > softmax > norm > scan > pooling > loss > reduction > pointwise.
 * Returns a static string; "pointwise" when nothing else matches or there is no graph. */
const char *family_of_profile(json_t *profile);

/* "compute" when FLOPs per byte of minimal traffic exceed the fp32 machine balance of a
 * Hopper GPU (about 15), else "memory". Static string. */
const char *bound_of_profile(json_t *profile);

#endif
