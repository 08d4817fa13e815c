/* The partition of a task's graph into regions: runs of consecutive call nodes that the
 * task's proposer can write as a whole (generated regions), and single nodes that stay
 * library steps, each with the reason (docs/architecture.md, "Programs"). */
#ifndef OPFORGE_PARTITION_H
#define OPFORGE_PARTITION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "gpu/opforge_gpu.h"
#include "proposers/proposer.h"

#define PARTITION_MAX_REGION_NODES 32 /* longest run of call nodes tried as one region */
/* Generated regions one program may have: the GPU library prepares every region of a
 * program at once, and holds at most this many; later nodes stay library steps. */
#define PARTITION_MAX_GENERATED OFG_MAX_PREPARED_CANDIDATES

struct region {
  bool generated;        /* a proposer writes it; else a library step */
  char family[24];       /* generated: the op family HTAM learns under */
  json_t *nodes;         /* owned: the call nodes' names, in graph order */
  json_t *profile;       /* owned, generated only: the region's sub-profile, in which the
                            values it reads are input:k and the value it writes output:0 */
  json_t *io;            /* owned, generated only: {local name: global name} for each
                            input:k and output:0 of the sub-profile */
  json_t *reads;         /* owned: global names of the values it reads from outside */
  json_t *writes;        /* owned: global names of the values it makes for later steps */
  bool whole;            /* it is the whole graph: local names are the task's own */
  bool library_first;    /* generated, but programs start with its library step: a dense
                            convolution, which cuDNN usually runs faster (docs: "Convolutions") */
  char reason[256];      /* library: why no proposer writes it */
  double bytes;          /* minimal traffic: what it reads and writes, once */
  double flops;          /* sum of its nodes' "flops" where the profile has them */
};

struct partition {
  struct region *regions; /* owned, in graph order */
  size_t n;
  json_t *values;         /* owned: {node name: global value name} (docs: "Values") */
  json_t *graph;          /* owned reference to the task profile's graph */
  bool whole_model;       /* the graph is unknown: one library step runs the model */
};

/* Cuts profile's graph (borrowed) into regions, asking p whether it supports each
 * candidate run (longest first, greedily from the front). Fills *ret (release with
 * partition_clear). Returns 0, or -1 when out of memory. */
int partition_build(json_t *profile, struct proposer *p, struct partition *ret);
/* partition_build with at most max_generated generated regions (partition_build's is
 * PARTITION_MAX_GENERATED); the nodes after the last one it allows stay library steps
 * whose reason says so. */
int partition_build_limited(json_t *profile, struct proposer *p, size_t max_generated,
                            struct partition *ret);

/* True when call node (a profile graph node) is a 2-D or 3-D convolution that cuDNN can
 * run in channels-last memory order: a Conv2d/Conv3d/ConvTranspose2d/ConvTranspose3d
 * module, the torch and functional conv2d/conv3d/conv_transpose2d/conv_transpose3d, or
 * their aten ops. The export uses it too; gpu/evaluator/layout.py keeps the same lists
 * (docs/architecture.md, "Channels-last convolutions"). */
bool partition_is_conv_2d_3d(const json_t *node);

/* True when call node is a convolution of any rank, transposed or not (modules, torch and
 * functional calls): partition_is_conv_2d_3d's ops and the 1-D ones. */
bool partition_is_conv(const json_t *node);

/* Frees what pt owns and zeroes it. Accepts a zeroed partition. */
void partition_clear(struct partition *pt);

/* How the partition reads for a user (caller owns): [{"index", "kind":
 * "generated"|"library", "family", "nodes", "reason"}]; a library-first region is
 * generated with "starts": "library" and a reason saying so. */
json_t *partition_describe(const struct partition *pt);

/* The number of generated regions. */
size_t partition_generated(const struct partition *pt);

#endif
