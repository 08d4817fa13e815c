/* Task event logs: each task's events, numbered 1, 2, ... without gaps. */
#ifndef OPFORGE_STORE_EVENTS_H
#define OPFORGE_STORE_EVENTS_H

#include <jansson.h>
#include <stdint.h>

#include "store/status.h"

/* Appends an event to a task's log; data is borrowed and may be NULL ({}). Works inside
 * or outside store_transaction. *ret_seq (may be NULL) gets its sequence number, which
 * starts at 1 per task and has no gaps. */
int store_event_append(struct store *s, const char *task_id, const char *type,
                       json_t *data, int64_t *ret_seq);

/* Events of a task with seq > after_seq, oldest first, at most max. Each is
 * {"seq","type","time","data"}. Caller owns *ret_events (an array, maybe empty). */
int store_events_after(struct store *s, const char *task_id, int64_t after_seq, int max,
                       json_t **ret_events);

/* For store/ only: appends an event whose data is JSON text (borrowed; NULL for {})
 * without checking its arguments; must run inside a transaction. STORE_NOT_FOUND for an
 * unknown task. */
int store_event_append_tx(struct store *s, const char *task_id, const char *type,
                          const char *data_text, int64_t *ret_seq);

#endif
