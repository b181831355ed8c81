/* gqueue_internal: what gqueue's files share (gqueue.c: options and main; gqueue_fields.c:
 * the columns, sort keys and -s/-f parsing; gqueue_tsv.c: the line format read into rows,
 * the tree; gqueue_list.c: one listing; gqueue_doc.c: -o json/yaml/csv in gflow's shapes;
 * gqueue_watch.c: -w). Not a library interface. */
#ifndef GFLOW_GQUEUE_INTERNAL_H
#define GFLOW_GQUEUE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "job.h"
#include "output.h"
#include "util.h"

#define GQUEUE_DEFAULT_FORMAT "JOBID,NAME,ST,TIME,NODES,NODELIST(REASON)"
/* --start (Slurm's squeue --start): queued jobs by expected start. */
#define GQUEUE_START_FORMAT "JOBID,NAME,USER,ST,START_TIME,NODES,NODELIST(REASON)"
/* -l/--long (squeue's -l: more of each job), with WAIT and RUNTIME (gflow #115). */
#define GQUEUE_LONG_FORMAT "JOBID,NAME,USER,ST,WAIT,RUNTIME,TIMELIMIT,NODES,NODELIST(REASON)"

/* A sort done here (the API cannot), over struct gqueue_row. */
typedef int (*gqueue_cmp_fn)(const void *a, const void *b);

/* Each column appends its cell's text to sb (the table's buffer: no allocation per cell). */
struct gqueue_field {
    const char *name; /* as given to -f and shown as the header */
    void (*format)(struct strbuf *sb, const struct job *j, double now);
    /* The job fields it reads; the entries left over are 0, the id, which is always read. */
    enum job_field needs[4];
};

struct gqueue_row {
    struct job job;
    json_t *raw;
    size_t order; /* position in the daemon's answer, to keep ties stable */
};

struct gqueue_tree {
    size_t *order; /* rows in display order */
    char **prefix; /* per row: what goes before its NAME */
    size_t n;
};

struct gqueue_opts {
    bool tree;
    const struct gqueue_field **fields;
    size_t nfields;
    enum output_format outfmt;
    bool v0;       /* -o json-v0 / yaml-v0 / csv-v0: the shapes before gflow's (one release) */
    bool by_state; /* -g without an id: one table per state, as gflow's -g */
    int64_t limit;
    bool desc;
    gqueue_cmp_fn local_sort; /* NULL: the API sorts (api_sort) */
    const char *api_sort;
    char *filters; /* the query's filters: "?state=...&user=..." */
    char **users;  /* with more than one user: the users (filtered here) */
    size_t n_users;
    char **names; /* -N: the names (filtered here) */
    size_t n_names;
    int64_t group;    /* -g: the group id (filtered here); 0 none */
    bool active_only; /* only PD, H, R: counted from the daemon's memory, for free */
    size_t width;     /* a terminal's width (cells cut to fit), or 0 */
    bool colour;
};

/* gqueue_fields.c */
void gqueue_name(struct strbuf *sb, const struct job *j, double now);
void gqueue_st(struct strbuf *sb, const struct job *j, double now);
void gqueue_state(struct strbuf *sb, const struct job *j, double now);
void gqueue_time(struct strbuf *sb, const struct job *j, double now);
void gqueue_field_names(struct strbuf *sb, const char *sep);
const char *gqueue_sort_key(const char *key, const char *given, gqueue_cmp_fn *local);
char *gqueue_states(const char *list);
char **gqueue_split(const char *list, size_t *n);
const struct gqueue_field **gqueue_format(const char *spec, size_t *n);

/* gqueue_tsv.c */
void gqueue_tsv_query(struct strbuf *path, const struct gqueue_field **columns, size_t ncolumns,
                      bool tree, bool filters, bool by_state);
void gqueue_get_tsv(const char *path, struct client_response *r, client_chunk_cb chunk_cb,
                    void *arg);
void gqueue_tsv_header(char *header, int *fields, size_t *nfields);
char *gqueue_fetch_tsv(const char *path, int *fields, size_t *nfields, struct client_response *r);
struct gqueue_row *gqueue_tsv_rows(char *lines, const int *fields, size_t nfields, size_t *count);
void gqueue_tree_build(struct gqueue_tree *t, const struct gqueue_row *rows, size_t first,
                       size_t count);
void gqueue_tree_free(struct gqueue_tree *t);
extern bool gqueue_sort_desc; /* the local sort is descending */
int gqueue_cmp_gpus(const void *a, const void *b);
int gqueue_cmp_expected(const void *a, const void *b);

/* gqueue_list.c */
bool gqueue_user_known(const char *name);
void gqueue_list(const struct gqueue_opts *o, FILE *out, FILE *notes);

/* gqueue_doc.c */
/* gflow's CSV columns (id,name,state,time,gpus,user,submitted_at,reason), for -o csv
 * without -f. Malloc'd array. */
const struct gqueue_field **gqueue_doc_csv_fields(size_t *n);
/* One job as gflow's -o json shows it, then the API's other keys (raw: its API object). */
json_t *gqueue_doc_job(const json_t *raw, const struct job *j, double now);
/* {"jobs": jobs, "total": N, "timestamp": RFC 3339} as JSON or YAML, to out. */
void gqueue_doc_print(const struct gqueue_opts *o, json_t *jobs, FILE *out);

/* gqueue_watch.c */
size_t gqueue_term_width(size_t *rows);
int gqueue_watch(struct gqueue_opts *o, const char *title, double interval);

#endif
