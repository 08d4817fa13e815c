/* Keeps this server's task claims alive: renews their lease while the server runs. */
#ifndef OPFORGE_CLAIM_LEASE_H
#define OPFORGE_CLAIM_LEASE_H

struct store;
struct claim_lease;

/* Starts a thread that renews the lease of every claim this store's instance holds
 * (store_claims_renew) every lease_s / 3 seconds. The store is borrowed and must outlive
 * the keeper. Returns 0 and *ret_keeper (caller stops it with claim_lease_stop), or -1
 * (logged). */
int claim_lease_start(struct store *store, unsigned lease_s, struct claim_lease **ret_keeper);

/* Stops the thread and frees the keeper. Accepts NULL. */
void claim_lease_stop(struct claim_lease *keeper);

#endif
