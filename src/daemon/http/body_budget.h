/* body_budget: the memory the request bodies being received hold, per uid and in all.
 * A body is counted from its headers (its Content-Length, or as it arrives when it has
 * none) until its request ends. One uid may hold limits.max_body_bytes_per_user (never
 * less than one body of limits.max_request_bytes), all of them together
 * limits.max_body_bytes_in_flight: a user sending many bodies, or sending them slowly,
 * is refused on their own share before anyone else is refused on the total. And when the
 * total is taken, a uid asking for no more than its fair share of it (the total over the
 * uids holding some, itself counted) is not refused because of others: the caller cuts
 * off bodies of the uid most over that fair share first (body_budget_over_share). */
#ifndef GFLOWD_BODY_BUDGET_H
#define GFLOWD_BODY_BUDGET_H

#include <stdbool.h>
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
/* Whether uid, asking for n more, stays within its fair share of the total while another
 * uid holds more than that share: true with the one holding most in *victim. */
bool body_budget_over_share(const struct body_budget *b, const struct gflow_limits *lim, uid_t uid,
                            uint64_t n, uid_t *victim);
/* What one uid may hold: limits.max_body_bytes_per_user, at least one largest body. */
int64_t body_budget_share(const struct gflow_limits *lim);

#endif
