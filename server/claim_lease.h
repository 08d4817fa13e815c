/* Keeps this server's task claims alive: renews their lease while the server runs. */
#ifndef OPFORGE_CLAIM_LEASE_H
#define OPFORGE_CLAIM_LEASE_H

struct store;
struct claim_lease;

/* Called by the keeper after each renewal (this server's row in the servers table). */
typedef void (*claim_lease_tick_fn)(void *ctx);

/* Starts a thread that renews the lease of every claim this store's instance holds
 * (store_claims_renew) every lease_s / 3 seconds, then calls tick(ctx) when tick is not
 * NULL. The store and ctx are borrowed and must outlive the keeper. Returns 0 and
 * *ret_keeper (caller stops it with claim_lease_stop), or -1 (logged). */
int claim_lease_start(struct store *store, unsigned lease_s, claim_lease_tick_fn tick,
                      void *ctx, struct claim_lease **ret_keeper);

/* Stops the thread and frees the keeper. Accepts NULL. */
void claim_lease_stop(struct claim_lease *keeper);

#endif
