/* store_ids: the job ids' high-water mark, a small file beside the database
 * (<data_dir>/next_job_id), so that ids never go back, even over a database put back
 * from a backup, or a new one. An id used twice would give its new owner the previous
 * job's log, notifications and history.
 *
 * The file holds one number: every id below it may have been handed out. At open, the
 * next id is the larger of the database's and the file's. Writing the file (atomically
 * and synced) costs a millisecond or more on a disk, so ids are reserved in blocks of
 * STORE_IDS_BLOCK: store_commit writes the file before the commit that hands out an id
 * at or above it, with room for the next STORE_IDS_BLOCK ids, so that no id is ever
 * acknowledged before the file covers it. A clean close writes the exact next id; after
 * a crash, ids go on from the reserved mark (a jump of at most STORE_IDS_BLOCK). */
#include "store_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "files.h"
#include "log.h"

#define STORE_IDS_BLOCK 1000
#define STORE_IDS_FILE "next_job_id"

/* <the database's folder>/next_job_id. */
static char *ids_path(const char *db_path)
{
    const char *slash = strrchr(db_path, '/');
    if (!slash)
        return xstrdup(STORE_IDS_FILE);
    return xasprintf("%.*s/%s", (int)(slash - db_path), db_path, STORE_IDS_FILE);
}

/* Writes mark to the file: atomically, else over the file's own blocks (a full disk has
 * no room for the temporary copy). 0, or -1 with errno. */
static int ids_write(const struct store *s, int64_t mark)
{
    char text[32];
    int len = snprintf(text, sizeof(text), "%" PRId64 "\n", mark);
    if (write_file_atomic(s->ids_path, text, (size_t)len, 0600) == 0)
        return 0;
    int saved = errno;
    if (write_file_in_place(s->ids_path, text, (size_t)len) == 0)
        return 0;
    errno = saved;
    return -1;
}

int store_ids_open(struct store *s, const char *db_path)
{
    s->ids_path = ids_path(db_path);
    size_t len;
    char *text = read_file(s->ids_path, &len);
    if (!text) {
        if (errno == ENOENT)
            return 0; /* a first start, or one with the mark removed: the database's */
        store_set_err(s, "cannot read %s: %s", s->ids_path, strerror(errno));
        goto refuse;
    }
    int64_t mark;
    text[strcspn(text, "\n")] = '\0';
    int rc = parse_int64(text, &mark);
    free(text);
    if (rc < 0 || mark < 1) {
        store_set_err(s,
                      "%s is not a job id: it holds the lowest job id never handed out; "
                      "write there a number above every id ever used",
                      s->ids_path);
        goto refuse;
    }
    s->ids_reserved = mark;
    if (mark > s->next_id) {
        log_info("job ids go on from %" PRId64 " (%s), above the database's %" PRId64
                 ": the database is older than the ids handed out (put back from a backup, "
                 "or gflowd stopped without closing it)",
                 mark, s->ids_path, s->next_id);
        s->next_id = mark;
    }
    return 0;
refuse: /* the file stays as it is for the operator to look at */
    free(s->ids_path);
    s->ids_path = NULL;
    return -1;
}

int store_ids_reserve(struct store *s)
{
    if (!s->ids_path || s->next_id <= s->ids_reserved)
        return 0;
    int64_t mark = s->next_id + STORE_IDS_BLOCK;
    if (ids_write(s, mark) < 0) {
        store_set_err(s, "cannot record the job ids handed out in %s: %s", s->ids_path,
                      strerror(errno));
        return -1;
    }
    s->ids_reserved = mark;
    return 0;
}

void store_ids_close(struct store *s)
{
    if (s->ids_path && s->next_id != s->ids_reserved && ids_write(s, s->next_id) < 0)
        log_warn("cannot record the next job id in %s: %s (the next start goes on from %" PRId64
                 ")",
                 s->ids_path, strerror(errno), s->ids_reserved);
    free(s->ids_path);
    s->ids_path = NULL;
}
