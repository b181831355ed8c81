/* gctl_gpu: `gctl gpu resume` (see gctl_gpu.h). */
#include "gctl_gpu.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "parse.h"

static void help(void)
{
    printf("Usage: gctl gpu resume <N> [--force]\n"
           "\n"
           "A drained GPU takes jobs again. gflow drains a GPU when NVML reports pending\n"
           "remapped rows, a failed row remapping, uncorrectable ECC errors, pages pending\n"
           "retirement, or a fatal Xid (one that needs a GPU reset or a reboot): its running\n"
           "jobs run out and no job starts on it ('ginfo' shows it drained, with why). The\n"
           "drain is kept across restarts. Admins only.\n"
           "\n"
           "When what drained the GPU still holds (rows still pending: reset the GPU first),\n"
           "resume refuses; --force resumes it anyway, and that same condition does not\n"
           "drain it again (a new one does).\n"
           "\n"
           "Options:\n"
           "      --force    resume although the condition still holds\n"
           "  -h, --help     show this help\n");
}

int gctl_gpu(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    if (argc < 2)
        cli_usage_error("'gctl gpu' needs an action: resume (e.g. 'gctl gpu resume 0')");
    const char *action = argv[1];
    if (!strcmp(action, "--help") || !strcmp(action, "-h") || !strcmp(action, "help")) {
        help();
        return 0;
    }
    if (strcmp(action, "resume") != 0)
        cli_usage_error("unknown gpu action '%s'; use resume (e.g. 'gctl gpu resume 0')", action);
    bool force = false;
    int c;
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc - 1, argv + 1, ":h", longopts, NULL)) != -1) {
        if (c == 'f')
            force = true;
        else if (c == 'h')
            return help(), 0;
        else
            cli_usage_error("unknown option '%s' for 'gctl gpu resume'; see 'gctl gpu --help'",
                            argv[optind]);
    }
    int first = optind + 1;
    if (first >= argc)
        cli_usage_error("which GPU? e.g. 'gctl gpu resume 0'");
    if (argc - first > 1)
        cli_usage_error("'gctl gpu resume' takes one GPU index; got %d", argc - first);
    int64_t gpu;
    if (parse_int64(argv[first], &gpu) < 0 || gpu < 0 || gpu > 1023)
        cli_usage_error("invalid GPU '%s': give its index, e.g. 'gctl gpu resume 0'", argv[first]);
    json_t *body = json_pack("{s:I, s:b}", "gpu", (json_int_t)gpu, "force", force);
    json_t *reply = cli_call("POST", "/v1/gpus/resume", body);
    json_decref(body);
    json_decref(reply);
    printf("GPU %lld resumed: it takes jobs again\n", (long long)gpu);
    return 0;
}
