/* The HTAM vocabulary of memory records: op families, failure stages, bounds, and the
 * triggers made of them. The store checks records against it; the engine scores with it. */
#ifndef OPFORGE_SCHEMA_MEMORY_VOCAB_H
#define OPFORGE_SCHEMA_MEMORY_VOCAB_H

#include <stdbool.h>

/* Vocabularies (NULL-terminated, static). A trigger is "failure:<stage>",
 * "bound:<memory|compute>" or "family:<family>". */
extern const char *const htam_families[];       /* pointwise, reduction, norm, softmax,
                                                   scan, pooling, loss, gemm */
extern const char *const htam_failure_stages[]; /* compile, load, launch, correctness,
                                                   timeout, crash, check, parse */
extern const char *const htam_bounds[];         /* memory, compute */

/* True when s is in htam_families / is a well-formed trigger of the vocabulary. */
bool htam_family_known(const char *s);
bool htam_trigger_known(const char *s);

#endif
