/* The GEMM family's knobs: the defaults for a match (SIMT tiles, split-K, and the 3xTF32
 * kernel when it fits) and the checks that refuse a knob set a shape cannot take. */
#include <stdio.h>
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/gemm.h"
#include "proposers/builtin/gemm_internal.h"

static bool pow2(long long v) {
  return v > 0 && (v & (v - 1)) == 0;
}

/* Split-K for problems whose tiles cannot fill the GPU: a power of two giving about
 * two blocks per SM, keeping at least 16 K steps per slice. */
static int default_split(const struct gm *g, const struct knob_set *k) {
  long long tiles = ((g->m + k->bm - 1) / k->bm) * ((g->n + k->bn - 1) / k->bn) * g->batch;
  int split = 1;
  while (tiles * split * 2 <= 2 * g->sm_count && g->k / (split * 2) >= 16LL * k->bk &&
         split < 256)
    split *= 2;
  return split;
}

static int check_tf32x3(const struct gm *g, const struct knob_set *k, char *why, size_t whylen);

/* Replaces the SIMT defaults in k by the 3xTF32 tensor-core kernel when it fits the
 * problem: 16-deep K steps in a 4-stage cp.async pipeline (fewer stages for short K),
 * the same block and warp tiles. It is preferred because it is faster than the SIMT kernel
 * on the GEMMs measured, with an error against float64 no larger than eager's. k is left
 * alone when the kernel does not fit. */
static void prefer_tf32x3(const struct gm *g, struct knob_set *k) {
  struct knob_set t = *k;
  snprintf(t.mode, sizeof t.mode, "tf32x3");
  t.bk = g->k >= 32 ? 16 : 8;
  long long steps = (g->k + t.bk - 1) / t.bk;
  t.stages = steps >= 4 ? 4 : (int)steps;
  t.split = 1;
  t.split = default_split(g, &t);
  /* Two blocks per SM (128 registers each): while one waits at a barrier the other
   * computes (a few percent faster than one block where measured). Only for tiles that
   * divide the problem without split-K (check_tf32x3 says why). */
  t.minb = 2;
  char why[256];
  if (t.stages < 2)
    return;
  if (check_tf32x3(g, &t, why, sizeof why) != 0)
    t.minb = 0;
  if (check_tf32x3(g, &t, why, sizeof why) == 0)
    *k = t;
}

void gemm_defaults(json_t *match, struct knob_set *ret_knobs) {
  struct knob_set k = {0};
  struct gm g;
  char why[64];
  if (gm_read(match, &g, why, sizeof why) != 0) {
    *ret_knobs = k;
    return;
  }
  if (op_is(&g, "gemm")) {
    /* 256 threads of 8 x 8 outputs, 8-deep K steps double-buffered by cp.async. MINB
     * stays 0 (the kernel's own default bound applies) so that MODE tf32x3, which needs
     * more registers per thread, remains one move away. */
    k.bm = k.bn = 128;
    k.bk = 8;
    k.tm = k.tn = 8;
    k.stages = 2;
    k.split = 1;
    /* Small M or N: a narrower tile side (16 threads along it, 2 outputs each at least,
     * which MODE tf32x3 needs) keeps blocks busy. */
    while (k.bm > 32 && g.m <= k.bm / 2)
      k.bm /= 2;
    while (k.bn > 32 && g.n <= k.bn / 2)
      k.bn /= 2;
    k.tm = k.bm / 16;
    k.tn = k.bn / 16;
    /* Short K: fewer, shallower K steps (the pipeline needs at least STAGES of them). */
    while (k.bk > 8 && g.k <= k.bk / 2)
      k.bk /= 2;
    if ((g.k + k.bk - 1) / k.bk < 2)
      k.stages = 1;
    k.split = default_split(&g, &k);
    prefer_tf32x3(&g, &k);
  } else if (op_is(&g, "gemv")) {
    k.block = 256;
    k.vec = g.k % 4 == 0 ? 4 : g.k % 2 == 0 ? 2 : 1;
    k.unroll = 4;
  } else {
    k.block = 256;
    k.vec = g.n % 4 == 0 ? 4 : g.n % 2 == 0 ? 2 : 1;
  }
  *ret_knobs = k;
}


/* Knobs an op does not read must stay 0 (a move on them would change nothing). */
static int check_unused(const char *op, const struct knob_set *k, const char *used, char *why,
                        size_t whylen) {
  const struct {
    const char *name;
    int v;
  } f[] = {{"BLOCK", k->block}, {"VEC", k->vec},       {"ITEMS", k->items},   {"ROWS", k->rows},
           {"BM", k->bm},       {"BN", k->bn},         {"BK", k->bk},         {"TM", k->tm},
           {"TN", k->tn},       {"STAGES", k->stages}, {"UNROLL", k->unroll}, {"MINB", k->minb},
           {"SPLIT", k->split}};
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    char pat[16];
    snprintf(pat, sizeof pat, ",%s,", f[i].name);
    bool ok = strstr(used, pat) != NULL || (strcmp(f[i].name, "SPLIT") == 0 && f[i].v == 1);
    if (f[i].v != 0 && !ok) {
      if (strcmp(f[i].name, "BLOCK") == 0 && strcmp(op, "gemm") == 0)
        return builtin_refuse(why, whylen,
                      "BLOCK: gemm derives its threads from the tiles, "
                      "(BM/TM)*(BN/TN); move BM, BN, TM or TN instead");
      return builtin_refuse(why, whylen, "%s is not used by %s", f[i].name, op);
    }
  }
  return 0;
}

static int check_mode_common(const struct gm *g, const struct knob_set *k, char *why,
                             size_t whylen) {
  if (mode_is(k, "fused_epilogue"))
    return builtin_refuse(why, whylen,
                  "fused_epilogue: the epilogue is always fused into the GEMM's "
                  "store (or the split-K reduction)");
  if (mode_is(k, "epilogue_partials"))
    return builtin_refuse(why, whylen,
                  "epilogue_partials: the row tail reads the GEMM output in a "
                  "second launch (under 1%% of the GEMM's time here)");
  if (mode_is(k, "ldg")) {
    size_t n = json_array_size(json_object_get(g->epi, "operands")) +
               json_array_size(json_object_get(g->tail, "operands")) +
               json_array_size(json_object_get(g->expand, "operands"));
    bool direct = !op_is(g, "gemm") || k->stages == 1;
    if (!direct && n == 0)
      return builtin_refuse(why, whylen,
                    "ldg: with cp.async (STAGES>1) the operands do not pass "
                    "through registers and the epilogue reads no tensors");
  }
  return 0;
}

/* The register cap of L's threads at k's MINB (255 at most), shared by the SIMT and the
 * 3xTF32 kernel: refuses knobs whose estimate regs (per kernel; tf32 picks the wording)
 * exceeds the cap, or whose MINB blocks do not fit one SM. Returns 0 and *ret_cap, or -1
 * with the reason in why. */
static int check_regs_fit(const struct knob_set *k, const struct layout *L, int regs, bool tf32,
                          int *ret_cap, char *why, size_t whylen) {
  int cap = 65536 / (L->nt * (k->minb > 0 ? k->minb : 1));
  if (cap > 255)
    cap = 255;
  if (regs > cap && tf32)
    return builtin_refuse(why, whylen,
                  "registers: TM*TN=%d outputs per thread need about %d "
                  "registers with 3xTF32, above the cap of %d (MINB=%d)",
                  k->tm * k->tn, regs, cap, k->minb);
  if (regs > cap)
    return builtin_refuse(why, whylen,
                  "registers: TM*TN=%d accumulators need about %d registers, "
                  "above the cap of %d (MINB=%d)",
                  k->tm * k->tn, regs, cap, k->minb);
  if (k->minb > 0 && (L->nt * k->minb > 2048 || L->smem * k->minb > 228LL * 1024))
    return builtin_refuse(why, whylen,
                  "MINB=%d blocks of %d threads and %lld bytes of shared memory "
                  "do not fit one SM",
                  k->minb, L->nt, L->smem);
  *ret_cap = cap;
  return 0;
}

/* The SIMT kernel's registers, occupancy, unroll, split and mode constraints. */
static int check_simt_budget(const struct gm *g, const struct knob_set *k, const struct layout *lp,
                             char *why, size_t whylen) {
  const struct layout L = *lp;
  if (k->minb > 0 && k->minb == L.minb_default)
    return builtin_refuse(why, whylen,
                  "MINB=%d is already the SIMT kernel's default for %d threads of %dx%d outputs",
                  k->minb, L.nt, k->tm, k->tn);
  int cap;
  if (check_regs_fit(k, &L, gemm_est_regs(k), false, &cap, why, whylen) != 0)
    return -1;
  if (k->unroll && (k->unroll >= k->bk || k->bk % k->unroll != 0))
    return builtin_refuse(why, whylen,
                  "UNROLL=%d: must divide BK=%d and be smaller (the default "
                  "unrolls BK fully)",
                  k->unroll, k->bk);
  int split = k->split ? k->split : 1;
  if (split > 1 && (split - 1) * L.kchunk >= g->k)
    return builtin_refuse(why, whylen, "SPLIT=%d leaves empty K slices (K=%lld, BK=%d)", split, g->k,
                  k->bk);
  if (k->stages > 1 && k->stages > L.nk)
    return builtin_refuse(why, whylen, "STAGES=%d exceeds the %lld K steps of BK=%d", k->stages, L.nk,
                  k->bk);
  if (g->batch * split > 65535)
    return builtin_refuse(why, whylen, "batch %lld x SPLIT %d exceeds the grid's z limit", g->batch, split);
  if (split > 1 && split * g->rows * g->n * 4 > (4LL << 30))
    return builtin_refuse(why, whylen, "SPLIT=%d: the partials buffer would exceed 4 GiB", split);
  if (mode_is(k, "persistent") && L.grid_x >= L.tiles)
    return builtin_refuse(why, whylen, "persistent: the %lld tiles already fit one wave", L.tiles);
  if (mode_is(k, "pad_smem") && !g->ta && g->tb)
    return builtin_refuse(why, whylen,
                  "pad_smem: both tiles are already padded (k-contiguous operands "
                  "are transposed into shared memory with a 4-float pad)");
  if (mode_is(k, "predicated_tail") && !L.even)
    return builtin_refuse(why, whylen,
                  "predicated_tail: the shape already uses the predicated path "
                  "(M, N or K not divisible by the tile)");
  if (mode_is(k, "idx64") && L.idx64)
    return builtin_refuse(why, whylen, "idx64: the operands already need 64-bit indexing");
  /* gemm_derive() keeps two blocks per SM off for these: under the resulting register cap
   * NVRTC spills (deeper K steps, more stages, 64-bit or batched addressing). */
  bool spills = k->bk > 8 || k->stages > 2 || L.idx64 || mode_is(k, "idx64") || g->batch > 1 ||
                (k->split ? k->split : 1) > 1;
  if (k->minb >= 2 && cap <= 128 && spills)
    return builtin_refuse(why, whylen,
                  "MINB=%d caps the SIMT kernel at %d registers, and with BK=%d, STAGES=%d, "
                  "batched, split or 64-bit addressing it spills under that cap",
                  k->minb, cap, k->bk, k->stages);
  return check_mode_common(g, k, why, whylen);
}

static int check_simt(const struct gm *g, const struct knob_set *k, char *why, size_t whylen) {
  static const char *const modes[] = {"",      "pad_smem", "ldg", "persistent", "predicated_tail",
                                      "idx64", NULL};
  if (mode_is(k, "fused_epilogue") || mode_is(k, "epilogue_partials"))
    return check_mode_common(g, k, why, whylen);
  if (!gemm_name_in(k->mode, modes))
    return builtin_refuse(why, whylen, "MODE %s does not apply to gemm", k->mode);
  if (!pow2(k->bm) || !pow2(k->bn) || k->bm < 16 || k->bn < 16)
    return builtin_refuse(why, whylen, "BM=%d, BN=%d: tile sides must be powers of two >= 16", k->bm,
                  k->bn);
  if (!pow2(k->tm) || !pow2(k->tn) || k->tm > 16 || k->tn > 16 || k->bm % k->tm || k->bn % k->tn)
    return builtin_refuse(why, whylen, "TM=%d, TN=%d: powers of two <= 16 that divide BM=%d, BN=%d", k->tm,
                  k->tn, k->bm, k->bn);
  if (k->bk < 4 || k->bk % 4 != 0 || (k->bk > 8 && k->bk % 8 != 0))
    return builtin_refuse(why, whylen, "BK=%d: must be 4 or a multiple of 8", k->bk);
  struct layout L;
  gemm_derive(g, k, &L);
  if (L.nt < 32 || L.nt > 1024 || L.nt % 32 != 0)
    return builtin_refuse(why, whylen,
                  "(BM/TM)*(BN/TN) = %d threads: must be a multiple of 32 in "
                  "[32, 1024]",
                  L.nt);
  if (k->stages < 1 || k->stages > 6)
    return builtin_refuse(why, whylen, "STAGES=%d outside [1, 6]", k->stages);
  if (L.smem > SMEM_LIMIT)
    return builtin_refuse(why, whylen,
                  "shared memory %lld bytes (STAGES x BK x (BM+BN+pads) x 4) "
                  "exceeds 227 KiB",
                  L.smem);
  if (k->vec && k->vec != 1 && k->vec != 2 && k->vec != 4)
    return builtin_refuse(why, whylen, "VEC=%d: gemm loads 1, 2 or 4 floats", k->vec);
  if (k->vec > 1 && L.va == 1 && L.vb == 1)
    return builtin_refuse(why, whylen, "VEC=%d applies to no operand: %s", k->vec,
                  k->stages > 1 ? "k-contiguous operands are copied one float at a time by "
                                  "cp.async (STAGES>1), and no M/N-contiguous operand has an "
                                  "extent divisible by it"
                                : "the contiguous extents are not divisible by it");
  if (k->vec == 1 && k->stages > 1 && g->tb && !g->ta)
    return builtin_refuse(why, whylen,
                  "VEC=1 changes nothing: both operands are k-contiguous and "
                  "cp.async copies them one float at a time");
  return check_simt_budget(g, k, &L, why, whylen);
}

/* MODE wgmma_tf32x3, the Hopper kernel (templates/gemm_wgmma.cu). It has never run on a
 * GPU, so no default and no grid of the space names it: it is checked only when a knob
 * set names it. It reads BM, BN, BK, STAGES and SPLIT; TM, TN and MINB, which a knob set
 * started from the family defaults carries (and --knobs cannot set to 0), are ignored.
 * Refuses, with the reason: a device that is not compute capability 9.0 (a profile that
 * names none, CPU, meta or a region's, is taken as the H200 the defaults are tuned for),
 * tiles outside the kernel's warpgroup shapes, shared memory over the device's limit,
 * and tiles that the shape leaves half empty. g and k are borrowed; why is the caller's. */
static int check_wgmma(const struct gm *g, const struct knob_set *k, char *why, size_t whylen) {
  if (g->capability && strcmp(g->capability, "9.0") != 0)
    return builtin_refuse(why, whylen,
                  "wgmma_tf32x3 needs compute capability 9.0 (sm_90a: wgmma, setmaxnreg); "
                  "the profile's device is %s", g->capability);
  if (k->bm != 64 && k->bm != 128)
    return builtin_refuse(why, whylen,
                  "wgmma_tf32x3: BM=%d must be 64 or 128 (64 rows per consumer warpgroup, "
                  "one or two consumers)", k->bm);
  if (k->bn != 32 && k->bn != 64 && k->bn != 128)
    return builtin_refuse(why, whylen,
                  "wgmma_tf32x3: BN=%d must be 32, 64 or 128 (the wgmma N; each consumer "
                  "thread holds BN/2 accumulators and BN/2 partials)", k->bn);
  if (k->bk != 8 && k->bk != 16 && k->bk != 32)
    return builtin_refuse(why, whylen, "wgmma_tf32x3: BK=%d must be 8, 16 or 32", k->bk);
  if (k->stages < 2)
    return builtin_refuse(why, whylen, "wgmma_tf32x3: STAGES=%d must be >= 2", k->stages);
  if (g->m <= k->bm / 2 || g->n <= k->bn / 2)
    return builtin_refuse(why, whylen,
                  "wgmma_tf32x3: the %lldx%lld output leaves half of a %dx%d tile empty; "
                  "take BM=64 (M <= 64) or a BN under N", g->m, g->n, k->bm, k->bn);
  struct layout L;
  gemm_derive_wgmma(g, k, &L);
  long long limit = g->smem_optin > 0 ? g->smem_optin : SMEM_LIMIT;
  if (L.smem > limit)
    return builtin_refuse(why, whylen,
                  "wgmma_tf32x3: shared memory %lld bytes (STAGES=%d stages of A's tile and "
                  "B's two parts, two raw B tiles, mbarriers) exceeds the device's %lld",
                  L.smem, k->stages, limit);
  if (k->stages > L.nk)
    return builtin_refuse(why, whylen, "STAGES=%d exceeds the %lld K steps of BK=%d", k->stages,
                  L.nk, k->bk);
  int split = k->split ? k->split : 1;
  if (split > 1 && (split - 1) * L.kchunk >= g->k)
    return builtin_refuse(why, whylen, "SPLIT=%d leaves empty K slices (K=%lld, BK=%d)", split, g->k,
                  k->bk);
  if (g->batch * split > 65535)
    return builtin_refuse(why, whylen, "batch %lld x SPLIT %d exceeds the grid's z limit", g->batch, split);
  if (split > 1 && split * g->rows * g->n * 4 > (4LL << 30))
    return builtin_refuse(why, whylen, "SPLIT=%d: the partials buffer would exceed 4 GiB", split);
  return 0;
}

int gemm_check(json_t *match, const struct knob_set *k, char *why, size_t whylen) {
  struct gm g;
  if (gm_read(match, &g, why, whylen) != 0)
    return -1;
  if (op_is(&g, "gemm")) {
    if (wgmma_mode(k))
      return check_wgmma(&g, k, why, whylen);
    if (tf32x3_mode(k)) {
      if (check_unused("gemm tf32x3", k, ",BM,BN,BK,TM,TN,STAGES,MINB,SPLIT,", why, whylen) != 0)
        return -1;
      return check_tf32x3(&g, k, why, whylen);
    }
    if (check_unused("gemm", k, ",BM,BN,BK,TM,TN,STAGES,VEC,UNROLL,MINB,SPLIT,", why, whylen) != 0)
      return -1;
    return check_simt(&g, k, why, whylen);
  }
  const char *op = g.op;
  bool gemv = op_is(&g, "gemv");
  if (check_unused(op, k, gemv ? ",BLOCK,VEC,UNROLL," : ",BLOCK,VEC,", why, whylen) != 0)
    return -1;
  if (k->mode[0] && !mode_is(k, "ldg"))
    return builtin_refuse(why, whylen, "MODE %s does not apply to %s", k->mode, op);
  if (k->block < 32 || k->block > 1024 || k->block % 32 != 0)
    return builtin_refuse(why, whylen, "BLOCK=%d: a multiple of 32 in [32, 1024]", k->block);
  long long ext = gemv ? g.k : g.n;
  if (k->vec != 1 && k->vec != 2 && k->vec != 4)
    return builtin_refuse(why, whylen, "VEC=%d: 1, 2 or 4", k->vec);
  if (ext % k->vec != 0)
    return builtin_refuse(why, whylen, "VEC=%d does not divide the contiguous length %lld", k->vec, ext);
  if (gemv && (k->unroll < 1 || k->unroll > 16))
    return builtin_refuse(why, whylen, "UNROLL=%d outside [1, 16]", k->unroll);
  return check_mode_common(&g, k, why, whylen);
}

/* Registers of the tensor-core kernel: the accumulators, the fragments of one operand
 * at a time, addressing. Calibrated on NVRTC for sm_90a: the 8 x 8 tile (64
 * accumulators) fits 128 registers, with at most 16 bytes spilled for B^T layouts. */
static int est_regs_tf32(const struct knob_set *k) {
  return k->tm * k->tn + 2 * k->tm + k->tn + 40;
}

static int check_tf32x3(const struct gm *g, const struct knob_set *k, char *why, size_t whylen) {
  if (!pow2(k->bm) || !pow2(k->bn) || k->bm < 16 || k->bn < 16)
    return builtin_refuse(why, whylen, "BM=%d, BN=%d: tile sides must be powers of two >= 16", k->bm,
                  k->bn);
  if (!pow2(k->tm) || !pow2(k->tn) || k->tm < 2 || k->tn < 2 || k->bm % (8 * k->tm) != 0 ||
      k->bn % (4 * k->tn) != 0)
    return builtin_refuse(why, whylen,
                  "tf32x3: TM=%d, TN=%d must be powers of two >= 2 with BM %% "
                  "(8*TM) == 0 and BN %% (4*TN) == 0 (warp tile 8*TM x 4*TN)",
                  k->tm, k->tn);
  if (k->bk < 8 || k->bk % 8 != 0)
    return builtin_refuse(why, whylen, "tf32x3: BK=%d must be a multiple of 8 (the mma k)", k->bk);
  if (k->stages < 2)
    return builtin_refuse(why, whylen, "tf32x3 pipelines with cp.async: STAGES must be >= 2");
  struct layout L;
  gemm_derive_tf32(g, k, &L);
  if (L.nt < 32 || L.nt > 1024)
    return builtin_refuse(why, whylen, "(BM/TM)*(BN/TN) = %d threads: must be in [32, 1024]", L.nt);
  if (L.smem > SMEM_LIMIT)
    return builtin_refuse(why, whylen, "shared memory %lld bytes exceeds 227 KiB", L.smem);
  if (k->stages > L.nk)
    return builtin_refuse(why, whylen, "STAGES=%d exceeds the %lld K steps of BK=%d", k->stages, L.nk,
                  k->bk);
  int cap;
  if (check_regs_fit(k, &L, est_regs_tf32(k), true, &cap, why, whylen) != 0)
    return -1;
  int split = k->split ? k->split : 1;
  /* Predicated edge tiles and split-K address math do not fit the 128 registers of two
   * blocks per SM: NVRTC spills them to local memory. */
  bool even = g->m % k->bm == 0 && g->n % k->bn == 0 && g->k % k->bk == 0;
  if ((!even || split > 1) && (cap <= 128 || k->bk > 16))
    return builtin_refuse(why, whylen,
                  "the 3xTF32 kernel spills with %d-register threads (MINB=%d, %d threads) "
                  "or BK=%d > 16 when tiles do not divide the problem (%lldx%lldx%lld by "
                  "%dx%dx%d) or K is split (SPLIT=%d)",
                  cap, k->minb, L.nt, k->bk, g->m, g->n, g->k, k->bm, k->bn, k->bk, split);
  if (split > 1 && (split - 1) * L.kchunk >= g->k)
    return builtin_refuse(why, whylen, "SPLIT=%d leaves empty K slices (K=%lld, BK=%d)", split, g->k,
                  k->bk);
  if (g->batch * split > 65535)
    return builtin_refuse(why, whylen, "batch %lld x SPLIT %d exceeds the grid's z limit", g->batch, split);
  if (split > 1 && split * g->rows * g->n * 4 > (4LL << 30))
    return builtin_refuse(why, whylen, "SPLIT=%d: the partials buffer would exceed 4 GiB", split);
  return 0;
}

