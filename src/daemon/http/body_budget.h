/* body_budget: the memory the request bodies being received hold, per uid and in all.
 * A body is counted from its headers (its Content-Length, or as it arrives when it has
 * none) until its request ends. One uid may hold limits.max_body_bytes_per_user (never
 * less than one body of limits.max_request_bytes), all of them together
 * limits.max_body_bytes_in_flight: a user sending many bodies, or sending them slowly,
 * is refused on their own share before anyone else is refused on the total. */
#ifndef GFLOWD_BODY_BUDGET_H
#define GFLOWD_BODY_BUDGET_H

#include <stdint.h>
#include <sys/types.h>

#include "config.h"

struct body_budget;

struct body_budget *body_budget_new(void);
void body_budget_free(struct body_budget *b);
/* Takes n more bytes for uid: 0, or the status of the refusal (nothing taken): 429 when
 * it would pass uid's share, 503 when it would pass the total. */
unsigned body_budget_take(struct body_budget *b, const struct gflow_limits *lim, uid_t uid,
                          uint64_t n);
/* Gives back n bytes uid took. */
void body_budget_give(struct body_budget *b, uid_t uid, uint64_t n);
/* What one uid may hold: limits.max_body_bytes_per_user, at least one largest body. */
int64_t body_budget_share(const struct gflow_limits *lim);

#endif
