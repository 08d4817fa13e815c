/* The GEMM family's match read back (struct gm) and the layouts a knob set gives it: the
 * SIMT kernel's threads, vector widths, shared memory and grid, and the 3xTF32 kernel's. */
#include <stdio.h>
#include <string.h>

#include "proposers/builtin/builtin.h"
#include "proposers/builtin/gemm_internal.h"

static json_t *jobj(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_object(v) ? v : NULL;
}

int gm_read(json_t *match, struct gm *g, char *why, size_t whylen) {
  memset(g, 0, sizeof *g);
  g->op = json_string_value(json_object_get(match, "op"));
  g->a = json_string_value(json_object_get(match, "a"));
  g->b = json_string_value(json_object_get(match, "b"));
  g->gemm_dst = json_string_value(json_object_get(match, "gemm_dst"));
  g->batch = jint(match, "batch");
  g->m = jint(match, "m");
  g->n = jint(match, "n");
  g->k = jint(match, "k");
  g->abs = jint(match, "a_bstride");
  g->bbs = jint(match, "b_bstride");
  g->rows = g->batch * g->m;
  g->ta = json_is_true(json_object_get(match, "trans_a"));
  g->tb = json_is_true(json_object_get(match, "trans_b"));
  g->swap = json_is_true(json_object_get(match, "gemv_swap"));
  g->epi = jobj(match, "epilogue");
  g->tail = jobj(match, "tail");
  g->colstats = jobj(match, "colstats");
  g->expand = jobj(match, "expand");
  g->mask = jobj(match, "mask");
  g->sm_count = builtin_sm_count(match);
  g->capability = json_string_value(json_object_get(match, "capability"));
  json_t *optin = json_object_get(match, "smem_optin");
  g->smem_optin = json_is_integer(optin) ? json_integer_value(optin) : 0;
  if (!g->op || !g->a || !g->b || !g->gemm_dst || !g->epi || g->batch < 1 || g->m < 1 || g->n < 1 ||
      g->k < 0) {
    snprintf(why, whylen, "malformed gemm match");
    return -1;
  }
  return 0;
}

/* Resident blocks per SM for nt threads and smem bytes (registers estimated). */
static int occupancy(int nt, long long smem, int regs) {
  int by_threads = 2048 / nt, by_smem = smem > 0 ? (int)((228LL * 1024) / (smem + 1024)) : 32;
  int by_regs = 65536 / (nt * (regs < 32 ? 32 : regs));
  int o = by_threads < by_smem ? by_threads : by_smem;
  o = o < by_regs ? o : by_regs;
  o = o < 32 ? o : 32; /* resident blocks per SM */
  return o < 1 ? 1 : o;
}

int gemm_est_regs(const struct knob_set *k) {
  return k->tm * k->tn + k->tm + k->tn + 40;
}

void gemm_derive(const struct gm *g, const struct knob_set *k, struct layout *L) {
  memset(L, 0, sizeof *L);
  L->nt = (k->bm / k->tm) * (k->bn / k->tn);
  L->vec = k->vec ? k->vec : 4;
  bool a_rc = g->ta, b_rc = !g->tb;
  bool regpath = k->stages == 1;
  L->va = a_rc ? (g->m % L->vec == 0 ? L->vec : 1) : (regpath && g->k % L->vec == 0 ? L->vec : 1);
  L->vb = b_rc ? (g->n % L->vec == 0 ? L->vec : 1) : (regpath && g->k % L->vec == 0 ? L->vec : 1);
  bool pad_all = mode_is(k, "pad_smem");
  L->pad_a = (!a_rc || pad_all) ? 4 : 0;
  L->pad_b = (!b_rc || pad_all) ? 4 : 0;
  L->smem = (long long)k->stages * k->bk * ((k->bm + L->pad_a) + (k->bn + L->pad_b)) * 4;
  L->tiles = ((g->m + k->bm - 1) / k->bm) * ((g->n + k->bn - 1) / k->bn);
  int split = k->split ? k->split : 1;
  L->kchunk = ((g->k + split - 1) / split + k->bk - 1) / k->bk * k->bk;
  L->nk = (L->kchunk + k->bk - 1) / k->bk;
  L->even = g->m % k->bm == 0 && g->n % k->bn == 0 && g->k % k->bk == 0 &&
            (split == 1 || g->k % L->kchunk == 0);
  long long big = 1LL << 31;
  L->idx64 = (g->ta ? g->k * g->m : g->m * g->k) >= big || g->k * g->n >= big || g->m * g->n >= big;
  /* Two resident blocks per SM when the register estimate fits 65536 / (2 x threads):
   * a barrier of one block then leaves the SM's other block computing. NVRTC fits the
   * 8 x 8 tiles in 128 registers without spills for BK = 8, two stages, one batch and
   * 32-bit indexing; deeper pipelines and wider address math spill under that cap. */
  bool wide = L->idx64 || mode_is(k, "idx64") || g->batch > 1 || split > 1;
  bool two = 2 * L->nt <= 2048 && gemm_est_regs(k) <= 65536 / (2 * L->nt) &&
             2 * L->smem <= 228LL * 1024 && k->bk <= 8 && k->stages <= 2 && !wide;
  L->minb_default = two ? 2 : 0;
  L->minb = k->minb ? k->minb : L->minb_default;
  L->grid_x = L->tiles;
  if (mode_is(k, "persistent")) {
    long long cap = g->sm_count * occupancy(L->nt, L->smem, gemm_est_regs(k));
    if (L->minb > 0 && g->sm_count * L->minb < cap)
      cap = g->sm_count * L->minb;
    L->grid_x = L->tiles < cap ? L->tiles : cap;
  }
}

/* The layout of the tensor-core kernel: each thread owns TM x TN outputs, a warp
 * (8*TM) x (4*TN); operands keep their global layout in shared memory. */
void gemm_derive_tf32(const struct gm *g, const struct knob_set *k, struct layout *L) {
  memset(L, 0, sizeof *L);
  L->nt = (k->bm / k->tm) * (k->bn / k->tn);
  bool a_kc = !g->ta, b_kc = g->tb;
  L->va = (a_kc ? g->k : g->m) % 4 == 0 ? 4 : 1;
  L->vb = (b_kc ? g->k : g->n) % 4 == 0 ? 4 : 1;
  long long at = a_kc ? (long long)k->bm * (k->bk + 4) : (long long)k->bk * (k->bm + 8);
  long long bt = b_kc ? (long long)k->bn * (k->bk + 4) : (long long)k->bk * (k->bn + 8);
  L->smem = (long long)k->stages * (at + bt) * 4;
  L->tiles = ((g->m + k->bm - 1) / k->bm) * ((g->n + k->bn - 1) / k->bn);
  int split = k->split ? k->split : 1;
  L->kchunk = ((g->k + split - 1) / split + k->bk - 1) / k->bk * k->bk;
  L->nk = (L->kchunk + k->bk - 1) / k->bk;
  long long big = 1LL << 31;
  L->idx64 = g->m * g->k >= big || g->k * g->n >= big || g->m * g->n >= big;
  L->grid_x = L->tiles;
  L->minb = k->minb;
}

/* The Hopper kernel (templates/gemm_wgmma.cu): a producer warpgroup and BM/64 consumers;
 * per stage A's tile in its memory layout (padded) and B's big and small parts (BN x BK
 * each), two raw B buffers in B's memory layout, and two mbarriers per stage. g and k
 * are borrowed; *L is the caller's, overwritten. */
void gemm_derive_wgmma(const struct gm *g, const struct knob_set *k, struct layout *L) {
  memset(L, 0, sizeof *L);
  L->nt = 128 * (1 + k->bm / 64);
  bool a_kc = !g->ta, b_kc = g->tb;
  L->va = (a_kc ? g->k : g->m) % 4 == 0 ? 4 : 1;
  L->vb = (b_kc ? g->k : g->n) % 4 == 0 ? 4 : 1;
  long long at = a_kc ? (long long)k->bm * (k->bk + 4) : (long long)k->bk * (k->bm + 8);
  long long raw = b_kc ? (long long)k->bn * (k->bk + 4) : (long long)k->bk * (k->bn + 8);
  long long parts = 2LL * k->bn * k->bk;
  L->smem = ((long long)k->stages * (at + parts) + 2 * raw) * 4 + 16LL * k->stages;
  L->tiles = ((g->m + k->bm - 1) / k->bm) * ((g->n + k->bn - 1) / k->bn);
  int split = k->split ? k->split : 1;
  L->kchunk = ((g->k + split - 1) / split + k->bk - 1) / k->bk * k->bk;
  L->nk = (L->kchunk + k->bk - 1) / k->bk;
  long long big = 1LL << 31;
  L->idx64 = g->m * g->k >= big || g->k * g->n >= big || g->m * g->n >= big;
  L->grid_x = L->tiles;
}
