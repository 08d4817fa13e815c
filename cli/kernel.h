/* `opforge kernel compile FILE.cu ...`: the compile step on the command line. */
#ifndef OPFORGE_GPU_KERNEL_CLI_H
#define OPFORGE_GPU_KERNEL_CLI_H

/* Entry point for `opforge kernel ...`, called as cli_kernel_main(argc - 1, argv + 1)
 * so that argv[0] is "kernel". Borrows argv. Returns the process exit status: 0 when
 * the kernel compiled, 1 when it did not (or the file could not be read), 2 on a usage
 * error. */
int cli_kernel_main(int argc, char **argv);

#endif
