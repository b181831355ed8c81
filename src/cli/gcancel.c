/* gcancel: cancels jobs, like scancel / gflow's gcancel.
 *
 * All the ids go in one POST /v1/jobs/cancel (one transaction in the daemon). A queued or held job is cancelled at once;
 * a running one is stopped by the daemon (SIGTERM, then SIGKILL after the grace time),
 * which is irrevocable once accepted. An id the daemon refuses (unknown, already ended,
 * not yours) gets the daemon's one-line reason on stderr, makes the exit status 1, and
 * the other ids are still processed.
 *
 * Cancelling a job also cancels the queued jobs that depend on it and could then never
 * run (unless submitted with --no-auto-cancel), and so on down the chain; the daemon
 * says which, and they are listed. --dry-run lists them without changing anything. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gflow_build.h"
#include "util.h"

enum { OPT_DRY_RUN = 256, OPT_SOCKET };

static void gcancel_help(void)
{
    printf("gcancel - cancel gflow jobs\n"
           "\n"
           "Usage: gcancel [options] <ids...>\n"
           "\n"
           "Queued and held jobs are cancelled at once; running jobs get SIGTERM, then\n"
           "SIGKILL if they have not ended after the daemon's grace time\n"
           "(daemon.kill_grace_secs).\n"
           "\n"
           "Job ids: 42, lists and ranges like 1,3,5-7, several arguments, @ for your\n"
           "latest job and @~N for the N-th before it.\n"
           "\n"
           "Jobs that depend on a cancelled job and can then never run are cancelled\n"
           "too (reason DependencyFailed:<id>), unless submitted with --no-auto-cancel.\n"
           "\n"
           "Options:\n"
           "      --dry-run      list the jobs that would be cancelled, with the jobs that\n"
           "                     depend on them (transitively); change nothing\n"
           "      --socket PATH  the daemon's socket\n"
           "  -h, --help         show this help\n"
           "  -V, --version      show the version\n"
           "\n"
           "Exit status: 0 if every job was cancelled (or would be), 1 if any was not,\n"
           "2 for a bad command line.\n");
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"dry-run", no_argument, NULL, OPT_DRY_RUN},
        {"socket", required_argument, NULL, OPT_SOCKET},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    cli_init(argv[0]);
    bool dry_run = false;
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hV", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_DRY_RUN:
            dry_run = true;
            break;
        case OPT_SOCKET:
            client_set_socket(optarg);
            break;
        case 'h':
            gcancel_help();
            return 0;
        case 'V':
            printf("gcancel %s\n", GFLOW_VERSION);
            return 0;
        default:
            cli_usage_error("%s", cli_option_error(argv, c, longopts));
        }
    }
    if (optind >= argc)
        cli_usage_error("which jobs? give job ids, e.g. 'gcancel 42' or 'gcancel 3-7'");

    size_t n;
    int64_t *ids = cli_parse_ids(argc - optind, argv + optind, &n);
    int status = 0;
    /* One request for all the ids (POST /v1/jobs/cancel): one result per id, in order. */
    json_t *body = json_object();
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_integer(ids[i]));
    json_object_set_new(body, "ids", arr);
    json_t *all = NULL;
    if (cli_request_json("POST", dry_run ? "/v1/jobs/cancel?dry_run=1" : "/v1/jobs/cancel", body,
                         NULL, &all) < 0)
        cli_die(1, "%s", cli_error_text(all));
    json_decref(body);
    const json_t *results = json_object_get(all, "results");
    /* Jobs already cancelled (or listed) along with an earlier one: only the dependents
     * those took along, so few; searched in order. */
    int64_t *done = NULL;
    size_t n_done = 0, cap_done = 0;
    for (size_t i = 0; i < n; i++) {
        bool seen = false;
        for (size_t k = 0; k < n_done && !seen; k++)
            seen = done[k] == ids[i];
        if (seen)
            continue;
        const json_t *reply = json_array_get(results, i);
        if (json_is_integer(reply)) { /* done as asked */
            printf(dry_run ? "Would cancel job %lld.\n" : "Job %lld cancelled.\n",
                   (long long)ids[i]);
            continue;
        }
        if (json_object_get(reply, "error")) {
            fflush(stdout);
            cli_warn("%s", cli_error_text(reply));
            status = 1;
        } else if (dry_run) {
            printf("Would cancel job %lld.\n", (long long)ids[i]);
        } else {
            const char *state = json_string_value(json_object_get(reply, "state"));
            bool stopping = json_is_true(json_object_get(reply, "cancelling"));
            if (state && (!strcmp(state, "CA") || stopping)) {
                printf("Job %lld cancelled.\n", (long long)ids[i]);
            } else {
                /* The daemon answered 2xx without cancelling; say what it did. */
                fflush(stdout);
                cli_warn("job %lld was not cancelled (it is in state %s)", (long long)ids[i],
                         state ? state : "unknown");
                status = 1;
            }
        }
        /* The jobs its cancellation takes along. */
        const json_t *also = json_object_get(reply, "dependents_cancelled");
        bool running = json_is_true(json_object_get(reply, "cancelling"));
        size_t k;
        const json_t *a;
        json_array_foreach (also, k, a) {
            long long id = (long long)json_integer_value(json_object_get(a, "id"));
            long long dep = (long long)json_integer_value(json_object_get(a, "depends_on"));
            if (dry_run)
                printf("Would also cancel job %lld (depends on %lld).\n", id, dep);
            else if (running)
                printf("Job %lld will be cancelled too once job %lld has stopped (it depends "
                       "on %lld).\n",
                       id, (long long)ids[i], dep);
            else
                printf("Job %lld cancelled too (depends on %lld: DependencyFailed:%lld).\n", id,
                       dep, dep);
            if (n_done == cap_done) {
                cap_done = cap_done ? cap_done * 2 : 16;
                done = xrealloc(done, cap_done * sizeof(*done));
            }
            done[n_done++] = id;
        }
    }
    json_decref(all);
    free(done);
    free(ids);
    return cli_finish(status);
}
