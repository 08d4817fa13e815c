/* What this server tells the other servers of a shared store about itself (the servers
 * table, store/servers.h): its version, GPUs, worker slots and device classes. */
#ifndef OPFORGE_SERVER_ROW_H
#define OPFORGE_SERVER_ROW_H

#include <stddef.h>

struct app;

/* The device class of a GPU name as the driver reports it: vendor words dropped, the
 * model's first word upper-cased ("NVIDIA H200" -> "H200", "NVIDIA A100-SXM4-80GB" ->
 * "A100", "NVIDIA GeForce RTX 4090" -> "RTX4090"). Writes "" when nothing is left. */
void server_row_device_class(const char *gpu_name, char *out, size_t outlen);

/* Writes or renews this server's row from app (the lease keeper calls it every period,
 * so GPUs that became ready since start are advertised). Logs a failure; returns 0 or
 * -1. */
int server_row_refresh(struct app *app);

#endif
