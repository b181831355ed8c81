/* gbatch_new: gbatch's subcommands, gflow's 'gbatch new NAME' (the job script
 * template, written to NAME.sh), and the check that a first word naming one ('new' or
 * 'completion', completion.c) is never taken for a command to submit. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "gbatch_internal.h"
#include "util.h"

/* gflow's job script template: its "## GFLOW" lines are examples (a '#' more than a
 * directive), made active by deleting one '#'. */
static const char gbatch_template[] =
    "#!/bin/bash\n"
    "#\n"
    "# ==== gflow job script ====\n"
    "#\n"
    "# Job configuration\n"
    "# -----------------\n"
    "# Directives, lines '# GFLOW --option=value', configure the job; options given to\n"
    "# gbatch on the command line win over them. To activate one below, change '## GFLOW'\n"
    "# to '# GFLOW', e.g.\n"
    "#   ## GFLOW --gpus=1   becomes   # GFLOW --gpus=1\n"
    "# Every gbatch option works as a directive (see 'gbatch --help').\n"
    "\n"
    "## GFLOW --gpus=1\n"
    "# The number of GPUs to request (default: 0)\n"
    "\n"
    "## GFLOW --time=1:30:00\n"
    "# Time limit: HH:MM:SS, MM:SS or MM (a bare number is minutes) (default: unlimited)\n"
    "\n"
    "## GFLOW --priority=50\n"
    "# Priority 0-255, higher runs first (default: 10)\n"
    "\n"
    "## GFLOW --conda-env=myenv\n"
    "# The conda environment to activate (default: none)\n"
    "\n"
    "## GFLOW --depends-on=123\n"
    "# Start only after job 123 succeeded; @ is your latest job (default: none)\n"
    "\n"
    "## GFLOW --memory=4G\n"
    "# Host memory limit (default: unlimited)\n"
    "\n"
    "## GFLOW --project=my-project\n"
    "# A project code to filter jobs by (gqueue -P) (default: none)\n"
    "\n"
    "# --- Your script starts here ---\n"
    "echo \"Starting gflow job...\"\n"
    "echo \"Running on node: $HOSTNAME\"\n"
    "\n"
    "# Add your commands here, e.g.\n"
    "# python train.py --epochs 100\n"
    "\n"
    "echo \"Job finished successfully.\"\n";

/* gbatch new NAME: writes the template to NAME.sh (NAME if it ends in .sh), never over
 * an existing file, executable. */
int gbatch_new(int argc, char **argv)
{
    if (argc != 1 || !argv[0][0] || argv[0][0] == '-')
        cli_usage_error("usage: gbatch new NAME (writes the job script template NAME.sh)");
    const char *name = argv[0];
    size_t len = strlen(name);
    char *path =
        len > 3 && !strcmp(name + len - 3, ".sh") ? xstrdup(name) : xasprintf("%s.sh", name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    if (fd < 0 && errno == EEXIST)
        cli_die(CLI_EXIT_FAIL, "%s already exists; choose another name or remove it", path);
    if (fd < 0)
        cli_die(CLI_EXIT_FAIL, "cannot create %s: %s", path, strerror(errno));
    size_t n = sizeof(gbatch_template) - 1;
    if (write(fd, gbatch_template, n) != (ssize_t)n || close(fd) < 0)
        cli_die(CLI_EXIT_FAIL, "cannot write %s: %s", path, strerror(errno));
    printf("Created template: %s (activate its '## GFLOW' lines, then 'gbatch %s')\n", path, path);
    free(path);
    return 0;
}

/* gflow's gbatch subcommands: a first word that names one is never a command to submit. */
bool gbatch_is_subcommand(const char *word)
{
    return !strcmp(word, "new") || !strcmp(word, "completion");
}
