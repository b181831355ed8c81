/* gjob_sessions: 'gjob close-sessions' (alias close), gflow's command that kills the tmux
 * sessions its jobs ran in. Jobs here run under gflow-shim without tmux, so there is
 * never a session to close: the command checks its arguments as gflow does (a gflow
 * script with a typo still hears of it), says why nothing was done, and exits 0. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "gjob_internal.h"
#include "job.h"
#include "parse.h"

static void gjob_help_close_sessions(void)
{
    printf("Usage: gjob close-sessions [-j IDS] [-s STATES] [-p PATTERN] [-a]\n"
           "\n"
           "gflow's command to close the tmux sessions of its jobs. Jobs here run without\n"
           "tmux (gflow-shim runs each one and keeps its output in the log), so there is\n"
           "nothing to close: the options are checked, the reason is printed on stderr and\n"
           "the exit status is 0. 'gjob log ID' shows a job's output; a job submitted with\n"
           "'gbatch --pty' has a terminal that 'gjob attach ID' connects to, and it goes\n"
           "away with the job.\n"
           "\n"
           "Options (as gflow's):\n"
           "  -j, --jobs IDS       job ids, e.g. 1-3 or 1,2,3\n"
           "  -s, --state STATES   states, e.g. finished,failed (queued, hold, running,\n"
           "                       finished, failed, cancelled, timeout)\n"
           "  -p, --pattern TEXT   session names containing TEXT\n"
           "  -a, --all            every ended job's session\n"
           "  -h, --help           show this help\n");
}

/* Every item of a comma-separated state list is a state; else a usage error. */
static void check_states(const char *list)
{
    char *copy = xstrdup(list);
    char *save = NULL;
    bool any = false;
    for (char *s = strtok_r(copy, ",", &save); s; s = strtok_r(NULL, ",", &save)) {
        enum job_state st;
        if (job_state_parse(s, &st) < 0)
            cli_die(CLI_EXIT_USAGE,
                    "unknown state '%s' for 'gjob close-sessions --state'; use queued, hold, "
                    "running, finished, failed, cancelled or timeout",
                    s);
        any = true;
    }
    free(copy);
    if (!any)
        cli_die(CLI_EXIT_USAGE, "empty --state for 'gjob close-sessions'; e.g. --state failed");
}

int gjob_close_sessions(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"jobs", required_argument, NULL, 'j'},    {"state", required_argument, NULL, 's'},
        {"pattern", required_argument, NULL, 'p'}, {"all", no_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0},
    };
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":j:s:p:ah", longopts, NULL)) != -1) {
        switch (c) {
        case 'j': {
            struct id_range *r = NULL;
            size_t n;
            char *err = NULL;
            if (parse_id_ranges(optarg, &r, &n, &err) < 0)
                cli_die(CLI_EXIT_USAGE, "invalid --jobs '%s' for 'gjob close-sessions': %s", optarg,
                        err);
            free(r);
            break;
        }
        case 's':
            check_states(optarg);
            break;
        case 'p':
        case 'a':
            break;
        case 'h':
            gjob_help_close_sessions();
            return 0;
        default:
            gjob_bad_option("close-sessions", argv, c, longopts);
        }
    }
    if (optind < argc)
        cli_die(CLI_EXIT_USAGE,
                "unexpected argument '%s' for 'gjob close-sessions'; give job ids with -j, "
                "e.g. -j %s",
                argv[optind], argv[optind]);
    fprintf(stderr, "gjob close-sessions: no sessions to close: jobs here run without tmux "
                    "sessions ('gjob log ID' shows a job's output)\n");
    return 0;
}
