/* `opforge kernel compile`: compiles a .cu file the way candidates are compiled and
 * prints registers, spills, cubin size and the log. Needs no GPU. */
#include "cli/kernel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/nvrtc_compile.h"

struct cli_args {
  const char *file;
  const char *arch;
  const char *cache_dir;
  enum gpu_precision precision;
  bool json;
  const char *opts[NVRTC_MAX_OPTIONS];
  size_t n_opts;
  char maxrreg[48];
};

static void usage(FILE *out) {
  fprintf(out,
          "usage: opforge kernel compile FILE.cu [--arch sm_90a] [-DNAME[=VALUE] ...]\n"
          "                              [--maxrregcount N] [--use_fast_math]\n"
          "                              [--precision fp32|tf32|bf16] [--cache-dir DIR] "
          "[--json]\n"
          "Compiles FILE.cu with NVRTC as opforge compiles candidates (default arch sm_90a,\n"
          "precision fp32) and prints registers per thread, spills, cubin bytes and the log.\n"
          "Exit status: 0 compiled, 1 compile failed, 2 usage error.\n");
}

/* Value of "--name VALUE" or "--name=VALUE" at argv[*i] (advancing *i), else NULL. */
static const char *flag_value(int argc, char **argv, int *i, const char *name) {
  size_t n = strlen(name);
  if (strncmp(argv[*i], name, n) != 0)
    return NULL;
  if (argv[*i][n] == '=')
    return argv[*i] + n + 1;
  if (argv[*i][n] == '\0' && *i + 1 < argc)
    return argv[++*i];
  return NULL;
}

static int add_option(struct cli_args *a, const char *opt) {
  if (a->n_opts == NVRTC_MAX_OPTIONS) {
    fprintf(stderr, "opforge kernel compile: at most %d options\n", NVRTC_MAX_OPTIONS);
    return -1;
  }
  a->opts[a->n_opts++] = opt;
  return 0;
}

/* One argument at argv[*i]; returns 0, or -1 on a usage error. */
static int parse_one(int argc, char **argv, int *i, struct cli_args *a) {
  const char *arg = argv[*i], *v;
  if (strncmp(arg, "-D", 2) == 0 || strcmp(arg, "--use_fast_math") == 0)
    return add_option(a, arg);
  if ((v = flag_value(argc, argv, i, "--maxrregcount"))) {
    snprintf(a->maxrreg, sizeof a->maxrreg, "-maxrregcount=%.32s", v);
    return add_option(a, a->maxrreg);
  }
  if ((v = flag_value(argc, argv, i, "--arch"))) {
    a->arch = v;
  } else if ((v = flag_value(argc, argv, i, "--cache-dir"))) {
    a->cache_dir = v;
  } else if ((v = flag_value(argc, argv, i, "--precision"))) {
    if (gpu_precision_parse(v, &a->precision) < 0) {
      fprintf(stderr, "opforge kernel compile: --precision must be fp32, tf32 or bf16\n");
      return -1;
    }
  } else if (strcmp(arg, "--json") == 0) {
    a->json = true;
  } else if (arg[0] != '-' && !a->file) {
    a->file = arg;
  } else {
    fprintf(stderr, "opforge kernel compile: unknown argument '%s'\n", arg);
    return -1;
  }
  return 0;
}

/* Reads path into a new NUL-terminated string (caller frees); NULL with a message. */
static char *read_source(const char *path) {
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    fprintf(stderr, "opforge kernel compile: %s: %s\n", path, strerror(errno));
    return NULL;
  }
  char *buf = malloc(NVRTC_MAX_SOURCE + 2);
  size_t n = buf ? fread(buf, 1, NVRTC_MAX_SOURCE + 1, fp) : 0;
  int bad = !buf || ferror(fp) || n > NVRTC_MAX_SOURCE;
  fclose(fp);
  if (!bad) {
    buf[n] = '\0';
    bad = strlen(buf) != n;
  }
  if (bad) {
    fprintf(stderr, "opforge kernel compile: %s: unreadable, NUL bytes, or over %u bytes\n",
            path, NVRTC_MAX_SOURCE);
    free(buf);
    return NULL;
  }
  return buf;
}

static void print_human(const struct cli_args *a, const char *arch,
                        const struct compile_result *r) {
  if (!r->ok) {
    fprintf(stderr, "compile failed: %s\n%s\n", r->failure.cls, r->failure.message);
  } else {
    printf("compiled %s for %s in %.1f ms (cache %s)\n", a->file, arch, r->ms, r->cache);
    printf("cubin: %zu bytes; registers per thread (max): %d; spills: %ld bytes\n",
           r->cubin_bytes, r->registers, r->spills);
    for (size_t i = 0; i < r->info->n_kernels; i++) {
      const struct cubin_kernel *k = &r->info->kernels[i];
      printf("kernel %s: %d registers per thread, %d params, spills %ld bytes stored / %ld "
             "loaded, stack frame %ld bytes, static shared %ld bytes\n",
             k->name, k->registers, k->n_params, k->spill_stores, k->spill_loads,
             k->stack_frame, k->static_shared);
    }
  }
  printf("log:\n%s%s", r->log, r->log[0] && r->log[strlen(r->log) - 1] != '\n' ? "\n" : "");
}

static int compile_and_print(const struct cli_args *a) {
  char err[512];
  struct cubin_cache *cache = NULL;
  struct compile_result r;
  char *source = read_source(a->file);
  if (!source)
    return 1;
  if (a->cache_dir && cubin_cache_open(a->cache_dir, &cache, err, sizeof err) < 0) {
    fprintf(stderr, "opforge kernel compile: %s\n", err);
    free(source);
    return 1;
  }
  struct compile_request req = {source, a->opts, a->n_opts, a->arch ? a->arch : "sm_90a",
                                a->precision, cache};
  int status = 1;
  if (nvrtc_compile(&req, &r) < 0) {
    fprintf(stderr, "opforge kernel compile: out of memory\n");
  } else {
    if (a->json) {
      json_t *o = compile_result_to_json(&r);
      if (o)
        json_object_set_new(o, "failure", gpu_failure_to_json(&r.failure));
      char *text = o ? json_dumps(o, JSON_INDENT(2)) : NULL;
      printf("%s\n", text ? text : "null");
      free(text);
      json_decref(o);
    } else {
      print_human(a, req.arch, &r);
    }
    status = r.ok ? 0 : 1;
    compile_result_clear(&r);
  }
  cubin_cache_free(cache);
  free(source);
  return status;
}

int cli_kernel_main(int argc, char **argv) {
  struct cli_args a = {0};
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  if (argc < 3 || strcmp(argv[1], "compile") != 0) {
    usage(stderr);
    return 2;
  }
  for (int i = 2; i < argc; i++)
    if (parse_one(argc, argv, &i, &a) < 0) {
      usage(stderr);
      return 2;
    }
  if (!a.file) {
    usage(stderr);
    return 2;
  }
  return compile_and_print(&a);
}
