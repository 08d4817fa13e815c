/* Reads kernels and module globals out of a cubin's ELF sections (.symtab, .nv.info,
 * .nv.info.<kernel>, .nv.global[.init]). Every offset is bounds-checked: the image may
 * come from a cache file on disk. */
#include "gpu/cubin_info.h"

#include <elf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Values NVIDIA uses in cubins (as cuobjdump prints them). */
#define STO_CUDA_ENTRY 0x10
#define EIFMT_SVAL 0x04
#define EIATTR_MAX_THREADS 0x05
#define EIATTR_REQNTID 0x10
#define EIATTR_KPARAM_INFO 0x17
#define EIATTR_REGCOUNT 0x2f

struct elf_view {
  const uint8_t *p;
  size_t len;
  Elf64_Ehdr eh;
  const char *shstr;
  size_t shstr_len;
};

static bool load_section(const struct elf_view *v, size_t i, Elf64_Shdr *ret) {
  if (i >= v->eh.e_shnum)
    return false;
  memcpy(ret, v->p + v->eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof *ret);
  return true;
}

static bool section_in_bounds(const struct elf_view *v, const Elf64_Shdr *sh) {
  return sh->sh_type == SHT_NOBITS ||
         (sh->sh_offset <= v->len && sh->sh_size <= v->len - sh->sh_offset);
}

/* Returns the NUL-terminated string at off in a table of len bytes, or NULL. */
static const char *table_string(const char *table, size_t len, size_t off) {
  if (off >= len || !memchr(table + off, '\0', len - off))
    return NULL;
  return table + off;
}

static const char *section_name(const struct elf_view *v, const Elf64_Shdr *sh) {
  const char *s = table_string(v->shstr, v->shstr_len, sh->sh_name);
  return s ? s : "";
}

static int open_view(struct elf_view *v, const void *image, size_t len, char *err,
                     size_t errlen) {
  v->p = image;
  v->len = len;
  if (len < sizeof(Elf64_Ehdr) || memcmp(image, ELFMAG, SELFMAG) != 0) {
    snprintf(err, errlen, "not an ELF image");
    return -1;
  }
  memcpy(&v->eh, image, sizeof v->eh);
  if (v->eh.e_ident[EI_CLASS] != ELFCLASS64 || v->eh.e_ident[EI_DATA] != ELFDATA2LSB ||
      v->eh.e_shentsize != sizeof(Elf64_Shdr) || v->eh.e_shoff > len ||
      (size_t)v->eh.e_shnum * sizeof(Elf64_Shdr) > len - v->eh.e_shoff) {
    snprintf(err, errlen, "not a 64-bit little-endian cubin, or truncated section table");
    return -1;
  }
  Elf64_Shdr sh;
  if (!load_section(v, v->eh.e_shstrndx, &sh) || sh.sh_type != SHT_STRTAB ||
      !section_in_bounds(v, &sh)) {
    snprintf(err, errlen, "cubin has no section name table");
    return -1;
  }
  v->shstr = (const char *)v->p + sh.sh_offset;
  v->shstr_len = sh.sh_size;
  return 0;
}

/* Calls fn for each attribute record of an .nv.info section. Records are
 * {u8 format, u8 attribute, u16 size-or-value, [size bytes if format is SVAL]}. */
static void walk_attributes(const uint8_t *p, size_t n,
                            void (*fn)(void *ctx, unsigned attr, const uint8_t *val,
                                       size_t vlen),
                            void *ctx) {
  size_t off = 0;
  while (off + 4 <= n) {
    unsigned fmt = p[off], attr = p[off + 1];
    if (fmt == EIFMT_SVAL) {
      size_t sz = (size_t)p[off + 2] | (size_t)p[off + 3] << 8;
      if (sz > n - off - 4)
        return;
      fn(ctx, attr, p + off + 4, sz);
      off += 4 + sz;
    } else if (fmt >= 1 && fmt < EIFMT_SVAL) {
      fn(ctx, attr, p + off + 2, 2);
      off += 4;
    } else {
      return;
    }
  }
}

static uint32_t read_u32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

struct regcount_ctx {
  struct cubin_info *info;
  const size_t *sym_to_kernel;
  size_t n_syms;
};

static void on_global_attribute(void *vctx, unsigned attr, const uint8_t *val, size_t vlen) {
  struct regcount_ctx *ctx = vctx;
  if (attr != EIATTR_REGCOUNT || vlen != 8)
    return;
  uint32_t sym = read_u32(val);
  if (sym < ctx->n_syms && ctx->sym_to_kernel[sym] != SIZE_MAX)
    ctx->info->kernels[ctx->sym_to_kernel[sym]].registers = (int)read_u32(val + 4);
}

static void on_kernel_attribute(void *vctx, unsigned attr, const uint8_t *val, size_t vlen) {
  struct cubin_kernel *k = vctx;
  if (attr == EIATTR_KPARAM_INFO && vlen == 12) {
    unsigned ordinal = (unsigned)val[4] | (unsigned)val[5] << 8;
    unsigned size = (read_u32(val + 8) >> 18) & 0x3fff;
    if ((int)ordinal + 1 > k->n_params)
      k->n_params = (int)ordinal + 1;
    if (ordinal < CUBIN_MAX_PARAMS)
      k->param_size[ordinal] = (uint16_t)size;
  } else if ((attr == EIATTR_MAX_THREADS || attr == EIATTR_REQNTID) && vlen == 12) {
    for (int d = 0; d < 3; d++)
      k->max_threads[d] = read_u32(val + 4 * d);
  }
}

static void init_kernel(struct cubin_kernel *k) {
  memset(k, 0, sizeof *k);
  k->registers = -1;
  k->n_params = -1;
  k->static_shared = k->spill_stores = k->spill_loads = k->stack_frame = -1;
}

/* Adds the entry function or module global that symbol s names, if it is one. */
static int add_symbol(const struct elf_view *v, struct cubin_info *info, const Elf64_Sym *s,
                      const char *name) {
  unsigned type = ELF64_ST_TYPE(s->st_info);
  if (type == STT_FUNC && (s->st_other & STO_CUDA_ENTRY)) {
    struct cubin_kernel *k = &info->kernels[info->n_kernels];
    init_kernel(k);
    k->name = strdup(name);
    if (!k->name)
      return -1;
    info->n_kernels++;
    return 0;
  }
  Elf64_Shdr sh;
  if (type != STT_OBJECT || !load_section(v, s->st_shndx, &sh))
    return 0;
  const char *sname = section_name(v, &sh);
  bool init = strcmp(sname, ".nv.global.init") == 0;
  if (!init && strcmp(sname, ".nv.global") != 0)
    return 0;
  struct cubin_global *g = &info->globals[info->n_globals];
  memset(g, 0, sizeof *g);
  g->name = strdup(name);
  g->size = s->st_size;
  if (!g->name)
    return -1;
  info->n_globals++;
  if (init && sh.sh_type != SHT_NOBITS && section_in_bounds(v, &sh) &&
      s->st_value <= sh.sh_size && s->st_size <= sh.sh_size - s->st_value &&
      s->st_size > 0) {
    g->init = malloc(s->st_size);
    if (!g->init)
      return -1;
    memcpy(g->init, v->p + sh.sh_offset + s->st_value, s->st_size);
  }
  return 0;
}

/* Reads .symtab: kernels, globals, and the symbol->kernel map for REGCOUNT records. */
static int read_symbols(const struct elf_view *v, struct cubin_info *info,
                        size_t **ret_map, size_t *ret_nsyms, char *err, size_t errlen) {
  Elf64_Shdr symtab = {0}, strtab;
  size_t i;
  for (i = 0; i < v->eh.e_shnum; i++)
    if (load_section(v, i, &symtab) && symtab.sh_type == SHT_SYMTAB)
      break;
  if (i == v->eh.e_shnum || !section_in_bounds(v, &symtab) ||
      symtab.sh_entsize != sizeof(Elf64_Sym) || !load_section(v, symtab.sh_link, &strtab) ||
      !section_in_bounds(v, &strtab) || strtab.sh_type != SHT_STRTAB) {
    snprintf(err, errlen, "cubin has no usable symbol table");
    return -1;
  }
  size_t n = symtab.sh_size / sizeof(Elf64_Sym);
  const char *strs = (const char *)v->p + strtab.sh_offset;
  size_t *map = malloc((n ? n : 1) * sizeof *map);
  info->kernels = calloc(n ? n : 1, sizeof *info->kernels);
  info->globals = calloc(n ? n : 1, sizeof *info->globals);
  if (!map || !info->kernels || !info->globals)
    goto oom;
  for (i = 0; i < n; i++) {
    Elf64_Sym s;
    memcpy(&s, v->p + symtab.sh_offset + i * sizeof s, sizeof s);
    const char *name = table_string(strs, strtab.sh_size, s.st_name);
    size_t before = info->n_kernels;
    map[i] = SIZE_MAX;
    if (name && *name && add_symbol(v, info, &s, name) < 0)
      goto oom;
    if (info->n_kernels > before)
      map[i] = before;
  }
  *ret_map = map;
  *ret_nsyms = n;
  return 0;
oom:
  free(map);
  snprintf(err, errlen, "out of memory");
  return -1;
}

/* Reads .nv.info (register counts) and each .nv.info.<kernel> (parameters, bounds). */
static void read_attributes(const struct elf_view *v, struct cubin_info *info,
                            const size_t *map, size_t n_syms) {
  struct regcount_ctx ctx = {info, map, n_syms};
  for (size_t i = 0; i < v->eh.e_shnum; i++) {
    Elf64_Shdr sh;
    if (!load_section(v, i, &sh) || sh.sh_type == SHT_NOBITS || !section_in_bounds(v, &sh))
      continue;
    const char *name = section_name(v, &sh);
    const uint8_t *data = v->p + sh.sh_offset;
    if (strcmp(name, ".nv.info") == 0) {
      walk_attributes(data, sh.sh_size, on_global_attribute, &ctx);
    } else if (strncmp(name, ".nv.info.", 9) == 0) {
      struct cubin_kernel *k = cubin_info_find_mut(info, name + 9);
      if (k) {
        k->n_params = 0;
        walk_attributes(data, sh.sh_size, on_kernel_attribute, k);
      }
    }
  }
}

int cubin_info_parse(const void *image, size_t len, struct cubin_info **ret_info,
                     char *err, size_t errlen) {
  struct elf_view v;
  if (open_view(&v, image, len, err, errlen) < 0)
    return -1;
  struct cubin_info *info = calloc(1, sizeof *info);
  size_t *map = NULL, n_syms = 0;
  if (!info) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  if (read_symbols(&v, info, &map, &n_syms, err, errlen) < 0) {
    cubin_info_free(info);
    return -1;
  }
  read_attributes(&v, info, map, n_syms);
  free(map);
  *ret_info = info;
  return 0;
}

void cubin_info_free(struct cubin_info *info) {
  if (!info)
    return;
  for (size_t i = 0; i < info->n_kernels; i++)
    free(info->kernels[i].name);
  for (size_t i = 0; i < info->n_globals; i++) {
    free(info->globals[i].name);
    free(info->globals[i].init);
  }
  free(info->kernels);
  free(info->globals);
  free(info);
}

struct cubin_kernel *cubin_info_find_mut(struct cubin_info *info, const char *name) {
  for (size_t i = 0; i < info->n_kernels; i++)
    if (strcmp(info->kernels[i].name, name) == 0)
      return &info->kernels[i];
  return NULL;
}

const struct cubin_kernel *cubin_info_find(const struct cubin_info *info, const char *name) {
  return cubin_info_find_mut((struct cubin_info *)info, name);
}
