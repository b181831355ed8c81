/* gflow: the umbrella command, as gflow's multi-call `gflow` binary. `gflow <command>
 * ARGS` runs the program of that name (gbatch, gcancel, gctl, gflowd, ginfo, gjob,
 * gqueue, gstats) with the same arguments: it is found beside gflow itself, else in the
 * installed bindir, and exec'd, so it behaves exactly as when called by its own name.
 * `gflow mcp serve` runs the MCP server (gflow-mcp); `gflow status` is one screen of
 * the GPUs, your jobs and the queue's pressure (gflow_status.c). gflow's wrappers call
 * `gflow __multicall <command> ...`, which is accepted too. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "completion.h"
#include "gflow_build.h"
#include "gflow_status.h"
#include "paths.h"

/* The programs `gflow <command>` runs, as gflow's multicall dispatch lists them. */
static const char *const programs[] = {"gbatch", "gcancel", "gctl",   "gflowd",
                                       "ginfo",  "gjob",    "gqueue", "gstats"};
#define N_PROGRAMS (sizeof(programs) / sizeof(programs[0]))

static void gflow_help(void)
{
    printf("gflow - the GPU job scheduler's commands under one name\n"
           "\n"
           "Usage: gflow <command> [args...]\n"
           "\n"
           "Commands (each runs the program of that name with the same arguments):\n"
           "  gbatch     submit a job\n"
           "  gcancel    cancel jobs\n"
           "  gctl       runtime controls: GPUs, limits, quotas, reservations\n"
           "  gflowd     the daemon: up, down, status, restart, init, ...\n"
           "  ginfo      the GPUs and what runs on them\n"
           "  gjob       show, log, hold, release, update, redo, attach jobs\n"
           "  gqueue     list jobs\n"
           "  gstats     job statistics\n"
           "  mcp serve  the MCP server for AI assistants (as gflow-mcp)\n"
           "  status     one screen: the GPUs, your running and waiting jobs with their\n"
           "             reasons, and the queue's pressure ('gflow status --help')\n"
           "  completion SHELL  the completion script of every program (bash, zsh, fish,\n"
           "             powershell, elvish)\n"
           "\n"
           "Options:\n"
           "  -h, --help     show this help ('gflow <command> --help' for a command's)\n"
           "  -V, --version  show the version\n"
           "\n"
           "Registering the MCP server with an assistant:\n"
           "  claude mcp add gflow -- gflow mcp serve\n");
}

static void mcp_help(void)
{
    printf("gflow mcp - the local gflow MCP server\n"
           "\n"
           "Usage: gflow mcp serve [--socket PATH]\n"
           "\n"
           "Commands:\n"
           "  serve  run the MCP server on standard input and output (as gflow-mcp; see\n"
           "         'gflow-mcp --help' for its tools)\n");
}

/* Runs the program name (found beside gflow, else in the bindir) with args; returns
 * only when it could not be started. */
static void run_program(const char *name, int argc, char **argv)
{
    char *path = paths_companion(name, X_OK, NULL, GFLOW_BINDIR);
    char **args = calloc((size_t)argc + 2, sizeof(*args));
    if (!args)
        cli_die(CLI_EXIT_FAIL, "out of memory");
    args[0] = path;
    for (int i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    fflush(stdout);
    execv(path, args);
    int e = errno;
    fprintf(stderr, "gflow: cannot run %s: %s; install gflow's programs together (make install)\n",
            path, strerror(e));
    free(args);
    free(path);
    exit(127);
}

/* gflow mcp ...: `serve` runs gflow-mcp with the rest. */
static int run_mcp(int argc, char **argv)
{
    if (argc == 0 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h") ||
        !strcmp(argv[0], "help")) {
        mcp_help();
        return 0;
    }
    if (!strcmp(argv[0], "--version") || !strcmp(argv[0], "-V")) {
        cli_print_version("gflow mcp");
        return 0;
    }
    if (strcmp(argv[0], "serve") != 0) {
        fprintf(stderr, "gflow mcp: unknown command '%s'; the command is 'gflow mcp serve'\n",
                argv[0]);
        return CLI_EXIT_USAGE;
    }
    run_program("gflow-mcp", argc - 1, argv + 1);
    return 127;
}

int main(int argc, char **argv)
{
    cli_init("gflow");
    int i = 1;
    if (i < argc && !strcmp(argv[i], "__multicall")) {
        if (++i >= argc) {
            fprintf(stderr, "gflow: __multicall needs a command; see 'gflow --help'\n");
            return CLI_EXIT_USAGE;
        }
    }
    if (i >= argc) { /* gflow prints its help and succeeds */
        gflow_help();
        return 0;
    }
    const char *cmd = argv[i];
    if (!strcmp(cmd, "completion"))
        return completion_main("gflow", argc - i - 1, argv + i + 1);
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        gflow_help();
        return 0;
    }
    if (!strcmp(cmd, "-V") || !strcmp(cmd, "--version")) {
        cli_print_version("gflow");
        return 0;
    }
    for (size_t k = 0; k < N_PROGRAMS; k++)
        if (!strcmp(cmd, programs[k]))
            run_program(cmd, argc - i - 1, argv + i + 1);
    if (!strcmp(cmd, "mcp"))
        return run_mcp(argc - i - 1, argv + i + 1);
    if (!strcmp(cmd, "status"))
        return gflow_status_main(argc - i, argv + i);
    fprintf(stderr,
            "gflow: unknown command '%s'; the commands are gbatch, gcancel, gctl, gflowd, "
            "ginfo, gjob, gqueue, gstats, mcp and status (see 'gflow --help')\n",
            cmd);
    return CLI_EXIT_USAGE;
}
