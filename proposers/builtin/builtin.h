/* The builtin proposer's shared contract: knob sets, knob moves, and the per-family
 * matchers and generators that turn a profiled FX graph into a CUDA candidate.
 *
 * A family module (proposers/builtin/<family>.c) exposes one struct builtin_family. The
 * proposer (proposers/builtin/proposer.c) asks each family in turn to match the profile;
 * the first match wins. A match is a JSON object owned by the family (its own schema,
 * documented in its header) with at least {"family": "...", "op": "...", "summary": "..."}.
 * generate() turns a match and a knob set into a candidate {"source","options","plan"}
 * whose plan follows docs/architecture.md, "Formats" (tensors input:i, param:<key>,
 * output:i). */
#ifndef OPFORGE_BUILTIN_H
#define OPFORGE_BUILTIN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Template knobs. Every template reads the ones it uses as -D macros (BLOCK, VEC,
 * ITEMS, ROWS, BM, BN, BK, TM, TN, STAGES, UNROLL, MINB, SPLIT, and MODE_<NAME>). A
 * value of 0 means "not used by this family". */
struct knob_set {
  int block;      /* threads per block */
  int vec;        /* elements per vector access: 1, 2, 4 */
  int items;      /* elements (or vectors) per thread */
  int rows;       /* rows per block (row-wise families) */
  int bm, bn, bk; /* GEMM block tile */
  int tm, tn;     /* GEMM register tile per thread */
  int stages;     /* cp.async pipeline stages (1 = none) */
  int unroll;     /* unroll factor of the main loop */
  int minb;       /* __launch_bounds__ min blocks per SM (0 = no bound) */
  int split;      /* split of the reduced dimension across blocks (1 = none) */
  char mode[24];  /* family-specific strategy name ("" = default), e.g. "warp_per_row",
                     "block_per_row", "online", "welford", "tf32x3", "decoupled" */
};

/* One family: name, matcher, default knobs, validity check, and generator. */
struct builtin_family {
  const char *name; /* pointwise, reduction, norm, softmax, scan, pooling, loss, gemm */
  /* Matches the profile (borrowed). Returns 1 and *ret_match (caller owns) on a match,
   * 0 when the graph is not of this family, -1 when it is but uses ops or shapes this
   * family cannot do (why says which, e.g. "unsupported op torch.nn.functional.unfold"). */
  int (*match)(json_t *profile, json_t **ret_match, char *why, size_t whylen);
  /* The starting knobs for a match. */
  void (*defaults)(json_t *match, struct knob_set *ret_knobs);
  /* 0 when the knobs are valid for the match's shapes (alignment, divisibility, shared
   * memory within 227 KiB, threads <= 1024...), else -1 with the reason in why. */
  int (*check)(json_t *match, const struct knob_set *knobs, char *why, size_t whylen);
  /* Generates the candidate (caller owns): template source with generated fragments,
   * options (the -D knobs), and the launch plan. -1 with why on failure. */
  int (*generate)(json_t *match, const struct knob_set *knobs, json_t **ret_candidate,
                  char *why, size_t whylen);
};

/* The registered families, ended by NULL (proposers/builtin/registry.c). */
extern const struct builtin_family *const builtin_families[];

/* Applies a seed-memory knob move {"knob","op":"set|mul|div","value"} to *knobs. Returns
 * 0, or -1 with the reason (unknown knob, value out of range) in why; *knobs is changed
 * only on success. The family's check() decides whether the result fits the shape. */
int knob_apply_move(struct knob_set *knobs, const json_t *move, char *why, size_t whylen);

/* The numeric knob named name ("BLOCK" ... "SPLIT") of *knobs, or NULL (MODE included:
 * it is no number). */
int *knob_slot(struct knob_set *knobs, const char *name);
/* The name of numeric knob i in knob_set order (BLOCK, VEC, ITEMS, ROWS, BM, BN, BK, TM,
 * TN, STAGES, UNROLL, MINB, SPLIT), NULL past the last. Static storage. */
const char *knob_name(size_t i);

/* The knobs as -D options ["-DBLOCK=256", ...] (caller owns), 0-valued knobs omitted. */
json_t *knob_options(const struct knob_set *knobs);

/* The knobs as a JSON object (caller owns), and back (0, or -1 on a malformed object). */
json_t *knob_to_json(const struct knob_set *knobs);
int knob_from_json(const json_t *obj, struct knob_set *ret_knobs);

/* The text of an embedded template (proposers/builtin/templates/<name>), NULL if unknown.
 * Static storage. */
const char *builtin_template(const char *name);

/* ---- helpers over the profile's FX graph (proposers/builtin/graph.c) ---- */

/* The node named name (borrowed), or NULL. */
json_t *graph_node(json_t *profile, const char *name);
/* The call nodes (call_function, call_method, call_module) in order, as an array of
 * borrowed nodes (caller owns the array). */
json_t *graph_calls(json_t *profile);
/* True when target (e.g. "torch.relu", "relu", "torch.nn.functional.relu", method
 * "relu") names op: compares the last dotted component. */
bool graph_target_is(json_t *node, const char *op);
/* Shape of a node as an int64 array of up to 8 dims; returns the rank, -1 if unknown. */
int graph_shape(json_t *node, long long dims[8]);
/* The product of dims[from] .. dims[to - 1] (1 when from >= to). */
long long graph_dims_prod(const long long *dims, int from, int to);

/* The node an argument {"node": name} refers to (borrowed from profile), or NULL. */
json_t *graph_ref(json_t *profile, json_t *arg);
/* True for call nodes (op call_function, call_method or call_module). */
bool graph_is_call(json_t *node);
/* True for call_module nodes. */
bool graph_is_module(json_t *node);
/* A call's argument: positional pos when the call has that many, else keyword kw (NULL
 * for none), else NULL. Borrowed from node. A JSON null comes back as it is, unlike
 * expr_arg, which treats it as absent. */
json_t *graph_arg(json_t *node, size_t pos, const char *kw);
/* A call_module node's attribute name (borrowed from node), or NULL. */
json_t *graph_attr(json_t *node, const char *name);
/* A parameter of a call: the attribute name of a module, else graph_arg(node, pos, name)
 * of a function or method (borrowed from node, NULL when absent). */
json_t *graph_param(json_t *node, size_t pos, const char *name);
/* The parameter tensor of a call_module node whose state_dict key ends with suffix after a
 * '.' or ':' ("weight" finds "param:fc.weight"; borrowed from node), or NULL. */
const char *graph_module_param(json_t *node, const char *suffix);
/* The parameter tensor ("param:<key>", borrowed from profile) of the get_attr node that a
 * call's argument pos (or keyword kw) refers to, or NULL when it refers to anything else
 * or is absent. */
const char *graph_arg_param(json_t *profile, json_t *node, size_t pos, const char *kw);
/* How many references to the node named name the graph's nodes hold in their args and
 * kwargs (the output node included). */
int graph_user_count(json_t *profile, const char *name);
/* The tensor name ("input:<i>", borrowed from node) of a placeholder node whose dtype is
 * dtype (any dtype when NULL, but one must be recorded), else NULL. */
const char *graph_input_tensor(json_t *node, const char *dtype);

/* ---- the device the profile was taken on ---- */

/* The multiprocessor count the families size grids, split-K and row splits for when the
 * profile does not say (CPU and meta profiles carry "sm_count": null, older stored
 * profiles no key): the H200's 132, the device the defaults are tuned for. */
#define BUILTIN_DEFAULT_SM_COUNT 132
/* The largest "sm_count" taken as given; a larger one is treated as malformed. */
#define BUILTIN_MAX_SM_COUNT 1024

/* The "sm_count" of obj, a profile or a match that recorded it (borrowed): its value when
 * it is an integer in [1, BUILTIN_MAX_SM_COUNT], else BUILTIN_DEFAULT_SM_COUNT. A family
 * whose choices depend on the SM count records builtin_sm_count(profile) in its match as
 * "sm_count", and its defaults, check and generate read it back from there. */
int builtin_sm_count(const json_t *obj);

/* The compute capability ("9.0") the profile's "gpu" facts name (borrowed from profile),
 * or NULL when it names none (CPU and meta profiles, and the engine's region profiles,
 * which keep no "gpu"). */
const char *builtin_capability(const json_t *profile);
/* The shared memory per block, opt-in, of the profile's "gpu" facts in bytes, or 0 when
 * they do not say (a value outside [16 KiB, 16 MiB] is treated as not said). */
long long builtin_smem_optin(const json_t *profile);

/* How a family's match() hands back the match object it built: takes over match and
 * stores it in *ret_match (the caller then owns it), returning 1; a NULL match (memory
 * ran out building it) returns -1 with "out of memory" in why. */
int graph_match_result(json_t *match, json_t **ret_match, char *why, size_t whylen);

/* An int or a list of 1 or n ints (a window's kernel_size, stride, padding, dilation)
 * into the last n of out[3]; absent, null or an empty list keeps out (the default).
 * Returns 0, or -1 when malformed or outside [lo, hi]. v stays the caller's. */
int builtin_read_tuple(json_t *v, int n, int lo, int hi, int out[3]);

/* Writes the printf-formatted reason into why (whylen bytes, the caller's) and returns -1:
 * how matchers and knob checks refuse. */
int builtin_refuse(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The integer at key k of a match or profile object o (0 when absent); o stays the
 * caller's. */
static inline long long jint(json_t *o, const char *k) {
  return json_integer_value(json_object_get(o, k));
}

#endif
