/* Declarations of the builtin family modules and the order the registry tries them in.
 * A module proposers/builtin/<name>.c defines `const struct builtin_family
 * builtin_family_<name>`; add its extern here and its entry to BUILTIN_FAMILY_LIST. GEMM
 * comes first (a GEMM with a row tail is one task) after attention (which only matches
 * an attention call, and is learned under the name "gemm"), pointwise last (it matches
 * any remaining elementwise chain). The convolution family follows pooling, which takes
 * the depthwise convolutions it can do. */
#ifndef OPFORGE_BUILTIN_FAMILIES_H
#define OPFORGE_BUILTIN_FAMILIES_H

#include "proposers/builtin/builtin.h"

extern const struct builtin_family builtin_family_attention;
extern const struct builtin_family builtin_family_gemm;
extern const struct builtin_family builtin_family_scan;
extern const struct builtin_family builtin_family_pooling;
extern const struct builtin_family builtin_family_conv;
extern const struct builtin_family builtin_family_loss;
extern const struct builtin_family builtin_family_softmax;
extern const struct builtin_family builtin_family_norm;
extern const struct builtin_family builtin_family_reduction;
extern const struct builtin_family builtin_family_pointwise;

#define BUILTIN_FAMILY_LIST \
  &builtin_family_attention, \
  &builtin_family_gemm, \
  &builtin_family_scan, \
  &builtin_family_pooling, \
  &builtin_family_conv, \
  &builtin_family_loss, \
  &builtin_family_softmax, \
  &builtin_family_norm, \
  &builtin_family_reduction, \
  &builtin_family_pointwise,

#endif
