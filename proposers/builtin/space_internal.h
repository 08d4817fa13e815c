/* What space.c asks of the per-family grids (proposers/builtin/space_grids.c). */
#ifndef OPFORGE_BUILTIN_SPACE_INTERNAL_H
#define OPFORGE_BUILTIN_SPACE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>

#include "proposers/builtin/space.h"

/* Fills s->dims (and s->ndims) with the grid of s->module for s->match. */
void space_grid_build(struct builtin_space *s);

/* The rules of the space besides the family's check(): the tiled kernels' thread counts
 * (which check() implies, tested first because it is cheap), the device's registers per
 * thread (a module's estimate of what a thread keeps against the cap that BLOCK or the
 * tiles' threads and MINB leave), and the points NVRTC spills for although their
 * registers fit (calibrated by tests/unit/test_space.c). False with why when k breaks
 * one. */
bool space_grid_prefilter(const struct builtin_space *s, const struct knob_set *k, char *why,
                          size_t whylen);

#endif
