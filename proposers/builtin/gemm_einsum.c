/* torch.einsum as the GEMM family's (batched) matmul: an equation of two operands whose
 * labels split into batch labels (both operands and the output, leading everywhere), M
 * labels (A and the output), N labels (B and the output) and summed K labels (A and B),
 * each group contiguous, is A @ B on the flattened groups, with A stored [M, K] or
 * [K, M] and B stored [K, N] or [N, K] ("bijl,lk->bijk", "bij,bjk->bik", "ik,jk->ij"). */
#include <stdio.h>
#include <string.h>

#include "proposers/builtin/gemm_internal.h"

#define EINSUM_MAX_LABELS 8

/* One term of the equation: its labels, one char per dim. */
struct term {
  char l[EINSUM_MAX_LABELS + 1];
  int n;
};

/* Reads term text (up to its end) into t, expanding a leading "..." to rank - letters
 * upper-case labels ending at 'Z'. 0, or -1 when malformed. */
static int read_term(const char *text, size_t len, int rank, struct term *t) {
  int letters = 0;
  bool ell = len >= 3 && strncmp(text, "...", 3) == 0;
  for (size_t i = ell ? 3 : 0; i < len; i++) {
    if (text[i] < 'a' || text[i] > 'z')
      return -1;
    letters++;
  }
  int k = ell ? rank - letters : 0;
  if (k < 0 || letters + k > EINSUM_MAX_LABELS || (rank >= 0 && letters + k != rank))
    return -1;
  t->n = 0;
  for (int i = 0; i < k; i++)
    t->l[t->n++] = (char)('Z' - k + 1 + i);
  for (size_t i = ell ? 3 : 0; i < len; i++)
    t->l[t->n++] = text[i];
  t->l[t->n] = 0;
  for (int i = 0; i < t->n; i++)
    if (strchr(t->l + i + 1, t->l[i]))
      return -1; /* a repeated label takes a diagonal */
  return 0;
}

static bool has(const struct term *t, char c) {
  return memchr(t->l, c, (size_t)t->n) != NULL;
}

/* The output term of an implicit equation: the labels seen once, in alphabetical order
 * (upper-case "..." labels first, as torch puts the broadcast dims first). */
static void implicit_output(const struct term *a, const struct term *b, struct term *out) {
  out->n = 0;
  for (int c = 'A'; c <= 'z'; c++) {
    int seen = has(a, (char)c) + has(b, (char)c);
    if (seen == 1 || (c <= 'Z' && seen))
      out->l[out->n++] = (char)c;
  }
  out->l[out->n] = 0;
}

/* Whether t's labels from position *at on are exactly group's labels in order; advances
 * *at past them. */
static bool take(const struct term *t, int *at, const char *group) {
  size_t n = strlen(group);
  if (strncmp(t->l + *at, group, n) != 0)
    return false;
  *at += (int)n;
  return true;
}

/* The logical operand of a storage term: t is [batch, first, second]; *ret_trans says
 * whether (first, second) is (inner, outer) rather than (outer, inner). */
static bool layout(const struct term *t, const char *batch, const char *outer,
                   const char *inner, bool *ret_trans) {
  int at = 0;
  if (!take(t, &at, batch))
    return false;
  int save = at;
  if (take(t, &at, outer) && take(t, &at, inner) && at == t->n) {
    *ret_trans = false;
    return true;
  }
  at = save;
  *ret_trans = true;
  return take(t, &at, inner) && take(t, &at, outer) && at == t->n;
}

/* The size of label c in operand v (term t). */
static long long label_size(const struct val *v, const struct term *t, char c) {
  const char *p = memchr(t->l, c, (size_t)t->n);
  return p ? v->shape[p - t->l] : 1;
}

int mt_einsum_operands(struct matcher *m, json_t *node, struct val *ret_a, struct val *ret_b) {
  json_t *args = json_object_get(node, "args");
  const char *eq = json_string_value(json_array_get(args, 0));
  json_t *ops = json_array_get(args, 1);
  bool listed = json_is_array(ops);
  struct val *a = mt_arg_val(m, listed ? json_array_get(ops, 0) : ops);
  struct val *b = mt_arg_val(m, listed ? json_array_get(ops, 1) : json_array_get(args, 2));
  size_t nops = listed ? json_array_size(ops) : json_array_size(args) - 1;
  if (!eq || nops != 2 || !a || !b || a->kind != V_TENSOR || b->kind != V_TENSOR)
    return mt_fail(m, "einsum: only an equation of two graph tensors");
  if (a->trans || a->diag || b->trans || b->diag)
    return mt_fail(m, "einsum of a transposed or diagonal view is not supported");
  char text[64];
  size_t j = 0;
  for (const char *c = eq; *c && j + 1 < sizeof text; c++)
    if (*c != ' ')
      text[j++] = *c;
  text[j] = 0;
  const char *comma = strchr(text, ','), *arrow = strstr(text, "->");
  struct term ta, tb, to;
  if (!comma || (arrow && arrow < comma) ||
      read_term(text, (size_t)(comma - text), a->rank, &ta) != 0 ||
      read_term(comma + 1, arrow ? (size_t)(arrow - comma - 1) : strlen(comma + 1), b->rank,
                &tb) != 0)
    return mt_fail(m, "einsum: unsupported equation %s", eq);
  if (!arrow)
    implicit_output(&ta, &tb, &to);
  else if (read_term(arrow + 2, strlen(arrow + 2), -1, &to) != 0)
    return mt_fail(m, "einsum: unsupported equation %s", eq);
  /* The ellipsis labels of the output are the widest operand's. */
  char batch[9] = "", mm[9] = "", nn[9] = "", kk[9] = "";
  long long bt = 1, M = 1, N = 1, K = 1;
  for (int i = 0; i < to.n; i++) {
    char c = to.l[i];
    bool in_a = has(&ta, c), in_b = has(&tb, c);
    char *g = in_a && in_b ? batch : in_a ? mm : in_b ? nn : NULL;
    if (!g || (in_a && in_b && label_size(a, &ta, c) != label_size(b, &tb, c)))
      return mt_fail(m, "einsum: output label %c is not a batch, row or column dim", c);
    g[strlen(g)] = c;
    long long *sz = g == batch ? &bt : g == mm ? &M : &N;
    *sz *= label_size(in_a ? a : b, in_a ? &ta : &tb, c);
  }
  for (int i = 0; i < ta.n; i++) {
    char c = ta.l[i];
    if (has(&to, c))
      continue;
    if (!has(&tb, c) || label_size(a, &ta, c) != label_size(b, &tb, c))
      return mt_fail(m, "einsum: label %c is summed over one operand only", c);
    kk[strlen(kk)] = c;
    K *= label_size(a, &ta, c);
  }
  for (int i = 0; i < tb.n; i++)
    if (!has(&to, tb.l[i]) && !has(&ta, tb.l[i]))
      return mt_fail(m, "einsum: label %c is summed over one operand only", tb.l[i]);
  /* The output must be [batch, M, N]; A [batch, M, K] or [batch, K, M]; B [batch, K, N]
   * or [batch, N, K]; K in the same order in both. */
  bool trans_a = false, trans_b = false;
  int at = 0;
  if (!(take(&to, &at, batch) && take(&to, &at, mm) && take(&to, &at, nn) && at == to.n) ||
      !layout(&ta, batch, mm, kk, &trans_a) || !layout(&tb, batch, kk, nn, &trans_b))
    return mt_fail(m, "einsum %s is not a matmul of contiguous dim groups", eq);
  /* A group that is empty has one order only: no transpose. */
  trans_a = trans_a && mm[0] && kk[0];
  trans_b = trans_b && nn[0] && kk[0];
  struct val *src[2] = {a, b};
  struct val *dst[2] = {ret_a, ret_b};
  long long rows[2] = {M, K}, cols[2] = {K, N};
  bool trans[2] = {trans_a, trans_b};
  for (int i = 0; i < 2; i++) {
    *dst[i] = (struct val){.kind = V_TENSOR, .tensor = src[i]->tensor, .trans = trans[i]};
    int r = 0;
    if (batch[0])
      dst[i]->shape[r++] = bt;
    dst[i]->shape[r++] = rows[i];
    dst[i]->shape[r++] = cols[i];
    dst[i]->rank = r;
  }
  return 0;
}
