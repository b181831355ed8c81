/* gctl_usage: `gctl usage [-o json]`: one row per user and per project with its GPU
 * time (raw and decayed), its shares and its fair-share factor (see gctl_usage.h). Open
 * to everyone, as Slurm's sshare: it shows usage, no job. */
#include "gctl_usage.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "output.h"
#include "util.h"

static void gctl_usage_help(void)
{
    printf("Usage: gctl usage [-o json]\n"
           "\n"
           "The fair-share accounts (docs/usage.md, \"Fair-share and priority\"): one row\n"
           "per user, then per project, with the GPU-hours of its jobs (RAW: as used;\n"
           "USAGE: decayed with scheduler.fairshare_half_life, running jobs included),\n"
           "its share (SHARES as configured, NORM_SHARES of the total), its part of all\n"
           "usage (NORM_USAGE) and its fair-share factor 2^(-NORM_USAGE/NORM_SHARES).\n"
           "Everyone may look.\n"
           "\n"
           "Options:\n"
           "  -o, --output json  print the daemon's reply as JSON\n"
           "  -h, --help         show this help\n");
}

static void add_rows(struct output_table *t, const char *type, const json_t *accounts)
{
    size_t i;
    const json_t *a;
    json_array_foreach (accounts, i, a) {
        double v[6];
        static const char *const keys[] = {"shares",      "norm_shares", "raw_gpu_s",
                                           "usage_gpu_s", "norm_usage",  "fairshare"};
        for (int k = 0; k < 6; k++)
            v[k] = json_number_value(json_object_get(a, keys[k]));
        char **row = xmalloc(8 * sizeof(*row));
        row[0] = xstrdup(type);
        row[1] = xstrdup(json_string_value(json_object_get(a, "name")));
        row[2] = xasprintf("%g", v[0]);
        row[3] = xasprintf("%.4f", v[1]);
        row[4] = xasprintf("%.2f", v[2] / 3600);
        row[5] = xasprintf("%.2f", v[3] / 3600);
        row[6] = xasprintf("%.4f", v[4]);
        row[7] = xasprintf("%.4f", v[5]);
        output_table_add_row_owned(t, row);
    }
}

int gctl_usage(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"output", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    bool json = false;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
        if (c == 'h') {
            gctl_usage_help();
            return 0;
        }
        if (c == 'o' && strcmp(optarg, "json") == 0) {
            json = true;
            continue;
        }
        if (c == 'o')
            cli_usage_error("unknown output format '%s' for 'gctl usage'; use -o json", optarg);
        cli_die(CLI_EXIT_USAGE, "%s for 'gctl usage'; see 'gctl usage --help'",
                cli_option_error(argv, c, longopts));
    }
    if (optind < argc)
        cli_usage_error("'gctl usage' takes no arguments, not '%s'", argv[optind]);
    json_t *reply = cli_call("GET", "/v1/usage", NULL);
    if (json) {
        output_json(reply, stdout);
        json_decref(reply);
        return 0;
    }
    static const char *const headers[] = {"TYPE",        "NAME",          "SHARES",
                                          "NORM_SHARES", "RAW_GPU_HOURS", "USAGE_GPU_HOURS",
                                          "NORM_USAGE",  "FAIRSHARE"};
    struct output_table *t = output_table_new(8, headers);
    add_rows(t, "user", json_object_get(reply, "users"));
    add_rows(t, "project", json_object_get(reply, "projects"));
    output_table_print(t, stdout);
    output_table_free(t);
    json_decref(reply);
    return 0;
}
