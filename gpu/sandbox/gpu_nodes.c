/* Which device nodes an evaluator of one GPU gets: the driver's control nodes and its
 * own /dev/nvidiaN, found from the GPU's PCI bus id (driver API) and the minor number
 * the kernel module lists for that bus id in /proc/driver/nvidia/gpus/. */
#include "gpu/sandbox/internal.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define GPUS_PROC "/proc/driver/nvidia/gpus"

/* The driver API entry points used here, resolved from the already loaded libcuda. */
struct driver_fns {
  int (*init)(unsigned int);
  int (*device_get)(int *, int);
  int (*bus_id)(char *, int, int);
  int (*uuid)(unsigned char *, int);
};

/* Resolves one symbol into a function pointer (ISO C forbids a direct cast). */
static void resolve(void *lib, const char *name, void *slot, size_t size) {
  void *sym = dlsym(lib, name);
  memcpy(slot, &sym, size);
}

/* The PCI bus id and UUID of CUDA device index; false when the driver cannot say. */
static bool driver_identity(int index, char *bus, size_t buslen, char *uuid, size_t uuidlen) {
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return false;
  struct driver_fns f;
  resolve(lib, "cuInit", &f.init, sizeof f.init);
  resolve(lib, "cuDeviceGet", &f.device_get, sizeof f.device_get);
  resolve(lib, "cuDeviceGetPCIBusId", &f.bus_id, sizeof f.bus_id);
  resolve(lib, "cuDeviceGetUuid_v2", &f.uuid, sizeof f.uuid);
  if (!f.uuid)
    resolve(lib, "cuDeviceGetUuid", &f.uuid, sizeof f.uuid);
  int dev = -1;
  unsigned char u[16];
  /* libcuda stays loaded: unloading the driver after cuInit is not supported. */
  if (!f.init || !f.device_get || !f.bus_id || !f.uuid || f.init(0) != 0 ||
      f.device_get(&dev, index) != 0 || f.bus_id(bus, (int)buslen, dev) != 0 ||
      f.uuid(u, dev) != 0)
    return false;
  snprintf(uuid, uuidlen,
           "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0],
           u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13],
           u[14], u[15]);
  return true;
}

/* True when the bus ids a and b ("DOMAIN:BB:DD.F", any case, any domain width) name the
 * same device. */
static bool same_bus_id(const char *a, const char *b) {
  const char *ca = strchr(a, ':'), *cb = strchr(b, ':');
  if (!ca || !cb || strtoul(a, NULL, 16) != strtoul(b, NULL, 16))
    return false;
  return strcasecmp(ca, cb) == 0;
}

/* The device minor that the driver lists for bus id bus, or -1. */
static int minor_of_bus(const char *bus) {
  DIR *d = opendir(GPUS_PROC);
  if (!d)
    return -1;
  int minor = -1;
  struct dirent *e;
  while (minor < 0 && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || !same_bus_id(e->d_name, bus))
      continue;
    char path[512], line[256];
    snprintf(path, sizeof path, GPUS_PROC "/%s/information", e->d_name);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
      if (strncmp(line, "Device Minor:", 13) == 0)
        minor = (int)strtol(line + 13, NULL, 10);
    if (f)
      fclose(f);
  }
  closedir(d);
  return minor;
}

/* Adds path to nodes when it exists as a character device. */
static void add_if_char_device(struct strv *nodes, const char *path) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISCHR(st.st_mode))
    strv_add(nodes, path);
}

/* Adds every /dev/nvidiaN (the fallback when the GPU's own node is unknown). */
static void add_every_gpu_node(struct strv *nodes) {
  DIR *d = opendir("/dev");
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL) {
    const char *n = e->d_name;
    if (strncmp(n, "nvidia", 6) != 0 || !isdigit((unsigned char)n[6]))
      continue;
    char path[300];
    snprintf(path, sizeof path, "/dev/%s", n);
    add_if_char_device(nodes, path);
  }
  if (d)
    closedir(d);
}

void sandbox_gpu_nodes(const char *device, struct strv *nodes, char *uuid, size_t uuidlen) {
  uuid[0] = '\0';
  char *end = NULL;
  errno = 0;
  long index = strtol(device, &end, 10);
  if (errno || end == device || *end || index < 0)
    return;  /* cpu or meta: no GPU */
  add_if_char_device(nodes, "/dev/nvidiactl");
  add_if_char_device(nodes, "/dev/nvidia-uvm");
  add_if_char_device(nodes, "/dev/nvidia-uvm-tools");
  char bus[64], id[64];
  int minor = driver_identity((int)index, bus, sizeof bus, id, sizeof id)
                  ? minor_of_bus(bus) : -1;
  char path[64];
  snprintf(path, sizeof path, "/dev/nvidia%d", minor);
  struct stat st;
  if (minor >= 0 && stat(path, &st) == 0 && S_ISCHR(st.st_mode)) {
    strv_add(nodes, path);
    snprintf(uuid, uuidlen, "%s", id);
  } else {
    add_every_gpu_node(nodes);
  }
}
