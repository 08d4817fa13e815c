/* Declarations of the builtin family modules and the order the registry tries them in.
 * A module engine/builtin/<name>.c defines `const struct builtin_family
 * builtin_family_<name>`; add its extern here and its entry to BUILTIN_FAMILY_LIST. GEMM
 * comes first (a GEMM with a row tail is one task), pointwise last (it matches any
 * remaining elementwise chain). */
#ifndef OPFORGE_BUILTIN_FAMILIES_H
#define OPFORGE_BUILTIN_FAMILIES_H

#include "engine/builtin/builtin.h"

extern const struct builtin_family builtin_family_gemm;
extern const struct builtin_family builtin_family_pointwise;

#define BUILTIN_FAMILY_LIST \
  &builtin_family_gemm, \
  &builtin_family_pointwise,

#endif
