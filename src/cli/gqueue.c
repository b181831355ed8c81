/* gqueue: lists jobs, like squeue / gflow's gqueue.
 *
 * By default the caller's active jobs (PD, H, R) with the columns
 * JOBID NAME ST TIME NODES NODELIST(REASON). Filtering, sorting and the limit are done
 * by the daemon (GET /v1/jobs) so that a long history costs the client nothing; only
 * the display, a sort by GPU count, and the filters the API does not offer (several
 * users, -N names, -g group; the limit then too) happen here. On a terminal the table is
 * coloured and fitted to its width, and -w redraws it in place. */

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli.h"
#include "clock.h"
#include "completion.h"
#include "gqueue_internal.h"
#include "job.h"
#include "output.h"
#include "parse.h"
#include "util.h"

enum { OPT_SINCE = 256, OPT_INTERVAL, OPT_START };

/* -g takes no argument (gflow's group by state); an id after it (-g 40, --group=40) is
 * read by hand below. */
static const char gqueue_shortopts[] = "+:acts:j:u:N:gP:wn:r:f:o:lhV";
static const struct option gqueue_longopts[] = {
    {"all", no_argument, NULL, 'a'},
    {"completed", no_argument, NULL, 'c'},
    {"tree", no_argument, NULL, 't'},
    {"states", required_argument, NULL, 's'},
    {"state", required_argument, NULL, 's'},
    {"jobs", required_argument, NULL, 'j'},
    {"user", required_argument, NULL, 'u'},
    {"users", required_argument, NULL, 'u'},
    {"names", required_argument, NULL, 'N'},
    {"group", optional_argument, NULL, 'g'},
    {"long", no_argument, NULL, 'l'},
    {"since", required_argument, NULL, OPT_SINCE},
    {"watch", no_argument, NULL, 'w'},
    {"interval", required_argument, NULL, OPT_INTERVAL},
    {"start", no_argument, NULL, OPT_START},
    {"project", required_argument, NULL, 'P'},
    {"limit", required_argument, NULL, 'n'},
    {"sort", required_argument, NULL, 'r'},
    {"format", required_argument, NULL, 'f'},
    {"output", required_argument, NULL, 'o'},
    CLI_COMMON_LONGOPTS,
    {NULL, 0, NULL, 0},
};

/* The field names, wrapped to the help's column. */
static char *gqueue_help_fields(void)
{
    struct strbuf all, out;
    strbuf_init(&all);
    strbuf_init(&out);
    gqueue_field_names(&all, " ");
    size_t col = 0;
    for (char *save = NULL, *w = strtok_r(all.buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        size_t len = strlen(w);
        if (col && col + 1 + len > 80) {
            strbuf_addc(&out, '\n');
            col = 0;
        }
        if (!col) {
            strbuf_adds(&out, "                        ");
            col = 24;
        } else {
            strbuf_addc(&out, ' ');
            col++;
        }
        strbuf_adds(&out, w);
        col += len;
    }
    strbuf_addc(&out, '\n');
    strbuf_free(&all);
    return strbuf_detach(&out);
}

static void gqueue_help(void)
{
    char *fields = gqueue_help_fields();
    printf("gqueue - list jobs of the gflow scheduler\n"
           "\n"
           "Usage: gqueue [options]\n"
           "       gqueue completion SHELL  (bash, elvish, fish, powershell or zsh)\n"
           "\n"
           "Without options: your active jobs (queued PD, held H, running R).\n"
           "\n"
           "Options:\n"
           "  -a, --all             jobs in every state, finished ones too\n"
           "  -c, --completed       only ended jobs (CD, F, CA, TO)\n"
           "  -s, --states LIST     only these states, e.g. PD,R or Queued,Running\n"
           "                        (PD H R CG CD F CA TO, or Queued Hold Running\n"
           "                        Cancelling Finished Failed Cancelled Timeout); CG: a\n"
           "                        running job being cancelled (R includes it)\n"
           "  -j, --jobs IDS        only these jobs: 1,3,5-7, @ (your latest), @~N;\n"
           "                        shows them in any state unless -s/-c is given\n"
           "  -u, --user, --users LIST\n"
           "                        jobs of these users (comma-separated login names),\n"
           "                        or '*' / 'all' for everyone's (default: yours)\n"
           "  -N, --names LIST      only jobs with these names (comma-separated, exact)\n"
           "  -g, --group           group the table by state, one table per state\n"
           "                        (Running, Queued, Hold, Finished, ...), as gflow\n"
           "  -g, --group ID, --group=ID\n"
           "                        only the jobs of one submission (an array or sweep):\n"
           "                        its group id, the id of its first job\n"
           "      --since WHEN      only jobs submitted since WHEN: a duration ago (30m,\n"
           "                        1h, 2d, 1w; also s), today, yesterday, a date or time\n"
           "                        (2026-03-01, 2026-03-01T09:30, '2026-03-01 09:30:00',\n"
           "                        in timezone; Z or +08:00 for another) or unix seconds\n"
           "  -P, --project LIST    only jobs of these projects (gbatch -P), e.g. a,b\n"
           "  -n, --limit N         the first N jobs after sorting; -N: the last N;\n"
           "                        0: all (default); says how many were not shown\n"
           "  -r, --sort FIELD      sort by id (default), name, state, priority, user,\n"
           "                        submit, start, end, time, gpus or start_time\n"
           "                        (expected start, unknown last); prefix '-' for\n"
           "                        descending, e.g. -r -priority\n"
           "  -f, --format FIELDS   columns, comma-separated (default\n"
           "                        " GQUEUE_DEFAULT_FORMAT "):\n"
           "%s"
           "                        (PRIORITY: a waiting job's effective priority;\n"
           "                        SLURMID: the Slurm job id, slurm backend;\n"
           "                        FAILURE: a failed job's failure class)\n"
           "  -l, --long            more of each job (as squeue -l): the columns\n"
           "                        JOBID NAME USER ST WAIT RUNTIME TIMELIMIT NODES\n"
           "                        NODELIST(REASON)\n"
           "  -o, --output FORMAT   table (default), json, yaml or csv, as gflow's: json\n"
           "                        and yaml {jobs: [...], total, timestamp}, each job\n"
           "                        with gflow's keys (state \"Running\", gpus [0, 1],\n"
           "                        time \"00:05:00\", ...) and then the API's others\n"
           "                        (docs/api.md); csv gflow's columns id,name,state,\n"
           "                        time,gpus,user,submitted_at,reason (with -f, -l or\n"
           "                        --start: their columns). json-v0, yaml-v0, csv-v0:\n"
           "                        the shapes before (the API's job objects; the\n"
           "                        table's columns), for one release\n"
           "      --start           queued jobs by expected start, as squeue --start:\n"
           "                        -s PD, -r start_time and -f JOBID,NAME,USER,ST,\n"
           "                        START_TIME,NODES,NODELIST(REASON) unless given;\n"
           "                        START_TIME is backfill's plan (the default;\n"
           "                        - with backfill = false, for a job whose\n"
           "                        dependencies are not met, or a held one)\n"
           "  -t, --tree            show dependencies as a tree: each job under the first\n"
           "                        listed job it depends on (NAME drawn with ├─ └─);\n"
           "                        a retry (--max-retries) under the attempt it\n"
           "                        retries (with -a, to see failed attempts)\n"
           "  -w, --watch           refresh the listing as soon as a job changes (the\n"
           "                        daemon's event stream) and every --interval seconds;\n"
           "                        on a terminal full-screen (q or Ctrl-C quits),\n"
           "                        otherwise one table after another\n"
           "      --interval SECS   seconds between refreshes with --watch when nothing\n"
           "                        changes (default 2)\n"
           "      --socket PATH     the daemon's socket\n"
           "      --config FILE     the config file whose timezone (and\n"
           "                        daemon.socket_path) to use\n"
           "  -h, --help            show this help\n"
           "  -V, --version         show the version\n"
           "\n"
           "Columns: TIME is the run time, HH:MM:SS (hours past 24 as they are; - before\n"
           "the job starts), RUNTIME the same; WAIT the time from submission to start (to\n"
           "now while the job waits); NODES the GPUs requested; NODELIST(REASON) the GPUs\n"
           "of a running job, or why a job waits or ended, e.g. (Priority),\n"
           "(JobHeldUser), (NonZeroExitCode), (Signal), (TimeLimit), (Memory),\n"
           "(BeginTime), (OutOfMemory); EXITCODE the exit status, or the signal that\n"
           "killed the job (e.g. SIGKILL); TIMELIMIT HH:MM:SS, UNLIMITED when none;\n"
           "MEMORY the host memory requested (--memory), - when none; SUBMIT/START/END\n"
           "are in the config's timezone (local time without one); START_TIME a queued job's "
           "expected start (backfill's plan, for every waiting job;\n"
           "- when unknown) or a started job's start. GPUUTIL the mean utilisation of the\n"
           "job's GPUs, GPUMEM the most memory one of them held for it, ENERGY the energy\n"
           "they used (so far, while it runs; - when unknown or no GPU).\n"
           "On a terminal, states are coloured (not with NO_COLOR set) and cells are cut\n"
           "with … to fit its width (the whole text: gjob show, -o json).\n",
           fields);
    free(fields);
}

int main(int argc, char **argv)
{
    cli_init(argv[0]);
    if (argc > 1 && !strcmp(argv[1], "completion"))
        return completion_main("gqueue", argc - 2, argv + 2);
    bool all = false, completed = false, watch = false, interval_given = false, start = false;
    bool longer = false;
    const char *states = NULL, *jobs = NULL, *user = NULL, *sort = NULL, *names = NULL;
    const char *project = NULL;
    const char *format = NULL, *since = NULL;
    double interval = 2;
    struct gqueue_opts o = {.outfmt = OUTPUT_TABLE, .api_sort = "id"};
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, gqueue_shortopts, gqueue_longopts, NULL)) != -1) {
        switch (c) {
        case 'a':
            all = true;
            break;
        case 'c':
            completed = true;
            break;
        case 't':
            o.tree = true;
            break;
        case 's':
            states = optarg;
            break;
        case 'j':
            jobs = optarg;
            break;
        case 'u':
            if (!*optarg)
                cli_usage_error("empty user name for -u; give login names, or '*' for all");
            user = optarg;
            break;
        case 'N':
            names = optarg;
            break;
        case 'g': {
            /* gqueue takes no operands, so a word after -g that is no option is its id. */
            const char *id = optarg;
            if (!id && optind < argc && argv[optind][0] != '-' && argv[optind][0])
                id = argv[optind++];
            if (!id) {
                o.by_state = true;
                break;
            }
            if (parse_int64(id, &o.group) < 0 || o.group <= 0)
                cli_usage_error("invalid group '%s' for -g: give the id of the array or sweep "
                                "(its first job's id), or no id to group by state",
                                id);
            break;
        }
        case 'l':
            longer = true;
            break;
        case OPT_SINCE:
            since = optarg;
            break;
        case 'w':
            watch = true;
            break;
        case OPT_START:
            start = true;
            break;
        case OPT_INTERVAL: {
            char *end;
            interval = strtod(optarg, &end);
            interval_given = true;
            if (end == optarg || *end || !(interval >= 0.1 && interval <= 86400))
                cli_usage_error("invalid --interval '%s': give seconds between 0.1 and 86400, "
                                "e.g. --interval 5",
                                optarg);
            break;
        }
        case 'P':
            if (!*optarg || optarg[0] == ',' || strstr(optarg, ",,") ||
                optarg[strlen(optarg) - 1] == ',')
                cli_usage_error("invalid project list '%s' for -P: use names separated by ','",
                                optarg);
            project = optarg;
            break;
        case 'n':
            if (parse_int64(optarg, &o.limit) < 0 || o.limit < -INT32_MAX || o.limit > INT32_MAX)
                cli_usage_error("invalid limit '%s' for -n: use a whole number (N: the "
                                "first N, -N: the last N, 0: all)",
                                optarg);
            break;
        case 'r':
            sort = optarg;
            break;
        case 'f':
            format = optarg;
            break;
        case 'o': {
            /* FORMAT-v0: the shape before gflow's (kept for one release). */
            char *name = xstrdup(optarg);
            size_t len = strlen(name);
            o.v0 = len > 3 && !strcasecmp(name + len - 3, "-v0");
            if (o.v0)
                name[len - 3] = '\0';
            if (!strcasecmp(name, "yaml"))
                o.outfmt = OUTPUT_YAML;
            else if (output_format_parse(name, &o.outfmt) < 0 || (o.v0 && o.outfmt == OUTPUT_TABLE))
                cli_usage_error("unknown output format '%s'; use table, csv, json or yaml "
                                "(or json-v0, yaml-v0, csv-v0: the shapes before gflow's)",
                                optarg);
            free(name);
            break;
        }
        default:
            cli_common_option(c, argv, gqueue_longopts, "gqueue", gqueue_help);
        }
    }
    cli_refuse_completion(optind < argc ? argv[optind] : NULL);
    if (optind < argc)
        cli_usage_error("unexpected argument '%s' (to list given jobs use -j IDS)", argv[optind]);
    if (completed && states)
        cli_usage_error("--completed and --states cannot be used together; "
                        "use -s CD,F,CA,TO");
    if (interval_given && !watch)
        cli_usage_error("--interval needs --watch; e.g. gqueue -w --interval %g", interval);

    if (start && completed)
        cli_usage_error("--start lists queued jobs and --completed ended ones; use one");
    if (o.by_state && o.tree)
        cli_usage_error("-g (group by state) and -t (tree) cannot be used together; use one");
    if (longer && (format || start))
        cli_usage_error("-l and %s both choose the columns; use one (-l is -f " GQUEUE_LONG_FORMAT
                        ")",
                        format ? "-f" : "--start");
    if (start && !states)
        states = "PD";
    if (start && !sort)
        sort = "start_time";
    if (o.outfmt == OUTPUT_CSV && !o.v0 && !format && !longer && !start)
        o.fields = gqueue_doc_csv_fields(&o.nfields); /* gflow's columns */
    else
        o.fields = gqueue_format(format   ? format
                                 : start  ? GQUEUE_START_FORMAT
                                 : longer ? GQUEUE_LONG_FORMAT
                                          : GQUEUE_DEFAULT_FORMAT,
                                 &o.nfields);

    /* The sort key. */
    if (sort) {
        const char *key = sort;
        if (*key == '-') {
            o.desc = true;
            key++;
        } else if (*key == '+') {
            key++;
        }
        o.api_sort = gqueue_sort_key(key, sort, &o.local_sort);
        if (!o.api_sort)
            o.api_sort = "id";
    }

    /* The filters. */
    struct strbuf path;
    strbuf_init(&path);
    char *state_list = NULL;
    if (states)
        state_list = gqueue_states(states);
    else if (completed)
        state_list = xstrdup("CD,F,CA,TO");
    else if (!all && !jobs)
        state_list = xstrdup("PD,H,R");
    if (state_list) {
        client_query_add(&path, "state", state_list);
        o.active_only = true;
        size_t n_states;
        char **list = gqueue_split(state_list, &n_states);
        for (size_t i = 0; i < n_states; i++) {
            enum job_state st;
            o.active_only &= job_state_parse(list[i], &st) == 0 && job_state_is_active(st);
            free(list[i]);
        }
        free(list);
    }
    free(state_list);
    if (jobs) {
        char *err = NULL;
        int64_t *ids;
        size_t n;
        if (!strchr(jobs, '@')) {
            struct id_range *ranges; /* checked here; the daemon resolves the ranges */
            if (parse_id_ranges(jobs, &ranges, &n, &err) < 0)
                cli_usage_error("%s", err);
            free(ranges);
            client_query_add(&path, "id", jobs);
        } else {
            char *one[] = {(char *)jobs};
            ids = cli_parse_ids(1, one, &n);
            struct strbuf list;
            strbuf_init(&list);
            for (size_t i = 0; i < n; i++)
                strbuf_addf(&list, "%s%lld", i ? "," : "", (long long)ids[i]);
            client_query_add(&path, "id", list.buf);
            strbuf_free(&list);
            free(ids);
        }
    }
    if (user) {
        o.users = gqueue_split(user, &o.n_users);
        bool everyone = false;
        for (size_t i = 0; i < o.n_users; i++) {
            if (!strcmp(o.users[i], "*") || !strcmp(o.users[i], "all"))
                everyone = true;
            else if (!gqueue_user_known(o.users[i]))
                cli_die(CLI_EXIT_FAIL, "no such user '%s'; give a login name, or '*' for all",
                        o.users[i]);
        }
        if (o.n_users == 0)
            cli_usage_error("empty user name for -u; give login names, or '*' for all");
        if (everyone)
            o.n_users = 0; /* everyone's: no filter */
        client_query_add(&path, "user", o.n_users == 1 ? o.users[0] : "all");
    }
    if (project)
        client_query_add(&path, "project", project);
    if (names) {
        o.names = gqueue_split(names, &o.n_names);
        if (!o.n_names)
            cli_usage_error("empty name list for -N; e.g. -N train,eval");
    }
    if (since) {
        double t = cli_parse_when(since, now_wall());
        if (t < 0)
            cli_usage_error("invalid --since '%s': use a duration ago (30m, 1h, 2d, 1w), "
                            "today, yesterday, a date or time (2026-03-01, "
                            "2026-03-01T09:30, with Z or +08:00 for another zone) or unix seconds",
                            since);
        char secs[32];
        snprintf(secs, sizeof(secs), "%.3f", t);
        client_query_add(&path, "since", secs);
    }
    o.filters = strbuf_detach(&path);

    bool tty = isatty(STDOUT_FILENO);
    const char *no_color = getenv("NO_COLOR");
    o.colour = tty && !(no_color && *no_color) && o.outfmt == OUTPUT_TABLE;
    if (tty && o.outfmt == OUTPUT_TABLE)
        o.width = gqueue_term_width(NULL);

    int rc;
    if (watch) {
        struct strbuf title;
        strbuf_init(&title);
        strbuf_adds(&title, "gqueue");
        for (int i = 1; i < argc; i++)
            strbuf_addf(&title, " %s", argv[i]);
        rc = gqueue_watch(&o, title.buf, interval);
        strbuf_free(&title);
    } else {
        gqueue_list(&o, stdout, stderr);
        rc = cli_finish(0);
    }
    for (size_t i = 0; o.users && o.users[i]; i++)
        free(o.users[i]);
    for (size_t i = 0; o.names && o.names[i]; i++)
        free(o.names[i]);
    free(o.users);
    free(o.names);
    free(o.filters);
    free(o.fields);
    return rc;
}
