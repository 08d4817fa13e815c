/* Normalized signature of a failed compile, clustered on by the skill memory. */
#ifndef OPFORGE_GPU_COMPILE_SIGNATURE_H
#define OPFORGE_GPU_COMPILE_SIGNATURE_H

#include <stddef.h>

/* Writes "compile/<class>" for the first error line of an NVRTC or ptxas log into ret
 * (capacity retlen, always NUL-terminated). Quoted text, numbers and file(line)
 * prefixes are dropped, so the same mistake in two kernels gives the same signature:
 *   cand.cu(3): error: identifier "foo" is undefined  -> compile/identifier_undefined
 *   cand.cu(9): error: expected a ";"                  -> compile/syntax_error
 * A log with no error line gives "compile/failed". Returns ret. */
char *compile_signature(const char *log, char *ret, size_t retlen);

/* Returns a pointer to the start of the first error line of log (borrowed) and sets
 * *ret_len to its length without the newline; NULL when the log has no error line. */
const char *compile_first_error_line(const char *log, size_t *ret_len);

#endif
