/* completion: the words a shell completes for each gflow command (`gbatch completion
 * bash|zsh|fish`). The lists live here, in one table, so that a test compares each with
 * its command's --help (tests/e2e/test_compat_gbatch.py): a flag added to a command
 * without being added here fails that test. */
#include "completion.h"

#include <stdio.h>
#include <string.h>

/* One command, or one of its subcommands (sub != NULL): its subcommands (top level
 * only) and its flags, each list space-separated. */
struct completion_entry {
    const char *cmd;
    const char *sub;
    const char *subs;
    const char *flags;
};

#define JOB_FLAGS                                                                                  \
    "-J -n --name --job-name -p --priority -t --time --time-limit --timelimit --begin --signal "   \
    "--max-retries -m --memory --mem --max-mem --max-memory --conda-env --umask --requeue --pty"
#define GPU_FLAGS                                                                                  \
    "-g --gpus --gres --mig --gpu-memory --max-gpu-mem --max-gpu-memory --shared --gpus-per-task " \
    "--cpus-per-gpu"
#define DEP_FLAGS "-d --depends-on --dependency --depends-on-all --depends-on-any --no-auto-cancel"
/* gjob update's and redo's own: gflow's --clear-* and dependency spellings. */
#define CLEAR_FLAGS                                                                                \
    "--clear-time-limit --clear-memory-limit --clear-gpu-memory-limit --clear-conda-env "          \
    "--clear-max-retries"
#define GJOB_DEP_FLAGS                                                                             \
    "--no-dependencies --clear-deps --auto-cancel --auto-cancel-on-dep-failure "                   \
    "--no-auto-cancel-on-dep-failure"

static const struct completion_entry completion_table[] = {
    {"gbatch", NULL, "new completion",
     JOB_FLAGS
     " -H --hold -c -P --project --nice --auto-close --notify-email --notify-on " GPU_FLAGS
     " " DEP_FLAGS " --array --param --param-file --name-template --max-concurrent "
     "--dry-run --parsable --socket -h --help -V --version"},
    {"gqueue", NULL, NULL,
     "-a --all -c --completed -s --states -j --jobs -u --user --users -N --names -g --group "
     "--since -w --watch --interval -P --project -n --limit -r --sort -f --format -o --output "
     "--start -t --tree --socket -h --help -V --version"},
    {"gcancel", NULL, NULL,
     "--dry-run -v --verbose --kill --cancel --socket -h --help -V --version"},
    {"ginfo", NULL, NULL, "-v --verbose --topology -o --output --socket -h --help -V --version"},
    {"gjob", NULL, "show s log l attach a hold h release r update u redo",
     "--socket -h --help -V --version"},
    {"gjob", "show", NULL, "-o --output -v --verbose -h --help"},
    {"gjob", "log", NULL, "-f --first -l --last --follow --raw -h --help"},
    {"gjob", "attach", NULL, "-r --read-only --detach-keys -h --help"},
    {"gjob", "hold", NULL, "-h --help"},
    {"gjob", "release", NULL, "--at -h --help"},
    {"gjob", "update", NULL,
     JOB_FLAGS " --memory-limit -e -c --command -s --script --param --max-concurrent " CLEAR_FLAGS
               " --clear-max-concurrent --no-requeue --no-pty " GPU_FLAGS " --no-shared " DEP_FLAGS
               " " GJOB_DEP_FLAGS " -h --help"},
    {"gjob", "redo", NULL,
     JOB_FLAGS " --memory-limit -e -H --hold -c --command -s --script --param " CLEAR_FLAGS
               " --no-requeue --no-pty " GPU_FLAGS " --no-shared " DEP_FLAGS " " GJOB_DEP_FLAGS
               " --cascade -h --help"},
    {"gstats", NULL, NULL,
     "-t --since --until --by -u --user -a --all-users --gpu --buckets -o --output --socket -h "
     "--help -V --version"},
    {"gctl", NULL, "show-gpus set-gpus gpu-process gpu set-limit quota usage reserve",
     "--socket -h --help -V --version"},
    {"gctl", "usage", NULL, "-o --output -h --help"},
    {"gctl", "gpu-process", "ignore unignore list", "--gpu --pid -h --help"},
    {"gctl", "gpu", "resume", "--force -h --help"},
    {"gctl", "quota", "show set clear",
     "--user --project --default-user --default-project --max-running-jobs --max-running-gpus "
     "--max-queued-jobs --max-gpu-hours --limits -h --help"},
    {"gctl", "reserve", "create list get cancel",
     "--user --gpus --gpu-spec --start --duration --status --active -h --help"},
    {"gflowd", NULL, "up start down stop restart status run reload init service web",
     "-c --config --user --system --data-dir --socket --max-running-jobs --kill-grace-secs "
     "--log-level -v --verbose -q --quiet --gpus --gpu-allocation-strategy "
     "--gpu-poll-interval-secs --simulate-gpus --force --root --port --bind -h --help -V "
     "--version"},
    {"gflowd", "web", NULL, "--port --bind --socket -h --help"},
    {"gflowd", "service", "install uninstall status",
     "-c --config --user --system --root -h --help"},
};

#define COMPLETION_COUNT (sizeof(completion_table) / sizeof(completion_table[0]))

/* The commands, each once, in table order: "gbatch gqueue ...". */
static void completion_commands(char *buf, size_t size)
{
    buf[0] = '\0';
    for (size_t i = 0; i < COMPLETION_COUNT; i++) {
        if (completion_table[i].sub)
            continue;
        if (buf[0])
            strncat(buf, " ", size - strlen(buf) - 1);
        strncat(buf, completion_table[i].cmd, size - strlen(buf) - 1);
    }
}

/* The values bash completes, asked of the daemon when completing: the ids of the
 * user's own active jobs (gqueue's default listing), the GPUs' indices (ginfo -o json);
 * and the job states gqueue -s takes. */
#define STATE_WORDS                                                                                \
    "PD H R CG CD F CA TO Queued Hold Running Cancelling Finished Failed Cancelled Timeout"

static void completion_bash_values(void)
{
    printf("_gflow_job_ids() {\n"
           "    local id\n"
           "    gqueue -f JOBID 2>/dev/null | while read -r id; do\n"
           "        [[ $id =~ ^[0-9]+$ ]] && printf '%%s\\n' \"$id\"\n"
           "    done\n"
           "}\n"
           "_gflow_gpu_indices() {\n"
           "    ginfo -o json 2>/dev/null | grep -oE '\"index\": *[0-9]+' | grep -oE '[0-9]+$' "
           "| sort -nu\n"
           "}\n"
           "# Values: 0 when it completed one (COMPREPLY set), 1 for flags and subcommands.\n"
           "_gflow_complete_value() {\n"
           "    local cmd=\"$1\" sub=\"$2\" prev=\"$3\" cur=\"$4\" words=\"\"\n"
           "    case \"$cmd $prev\" in\n"
           "    \"gqueue -s\"|\"gqueue --states\") words=\"%s\" ;;\n"
           "    \"gqueue -j\"|\"gqueue --jobs\"|\"gbatch -d\"|\"gbatch --depends-on\"|"
           "\"gbatch --dependency\"|\"gbatch --depends-on-all\"|\"gbatch --depends-on-any\"|"
           "\"gjob -d\"|\"gjob --depends-on\"|\"gjob --dependency\"|\"gjob --depends-on-all\"|"
           "\"gjob --depends-on-any\")\n"
           "        words=\"$(_gflow_job_ids)\" ;;\n"
           "    \"gctl --gpu\"|\"gflowd --gpus\") words=\"$(_gflow_gpu_indices) all\" ;;\n"
           "    *)\n"
           "        [[ $cur == -* || $prev == --socket ]] && return 1\n"
           "        case \"$cmd $sub\" in\n"
           "        \"gctl set-gpus\") ((COMP_CWORD == 2)) || return 1\n"
           "            words=\"$(_gflow_gpu_indices) all\" ;;\n"
           "        \"gctl set-limit\") ((COMP_CWORD == 2)) || return 1\n"
           "            words=\"$(_gflow_job_ids)\" ;;\n"
           "        gcancel*) words=\"$(_gflow_job_ids)\" ;;\n"
           "        \"gjob \"*)\n"
           "            ((COMP_CWORD >= 2)) || return 1\n"
           "            [[ $prev == \"$sub\" || $prev =~ ^[0-9@~,-]+$ ]] || return 1\n"
           "            words=\"$(_gflow_job_ids)\" ;;\n"
           "        *) return 1 ;;\n"
           "        esac ;;\n"
           "    esac\n"
           "    COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
           "    return 0\n"
           "}\n",
           STATE_WORDS);
}

/* bash: values first (job ids, GPU indices, states: completion_bash_values), then a
 * case on "command subcommand", then on the command alone. Flags are offered for a word
 * starting with '-', subcommands for the first word; otherwise file names (-o default),
 * e.g. a script for gbatch. */
static void completion_bash(void)
{
    printf("# gflow completion for bash: eval \"$(gbatch completion bash)\"\n");
    completion_bash_values();
    printf("_gflow_complete() {\n"
           "    local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=\"${COMP_WORDS[0]##*/}\" sub=\"\"\n"
           "    local flags=\"\" subs=\"\" prev=\"\"\n"
           "    if ((COMP_CWORD > 1)); then sub=\"${COMP_WORDS[1]}\"; fi\n"
           "    if ((COMP_CWORD > 0)); then prev=\"${COMP_WORDS[COMP_CWORD - 1]}\"; fi\n"
           "    _gflow_complete_value \"$cmd\" \"$sub\" \"$prev\" \"$cur\" && return 0\n"
           "    case \"$cmd $sub\" in\n");
    for (size_t i = 0; i < COMPLETION_COUNT; i++) {
        const struct completion_entry *e = &completion_table[i];
        if (e->sub)
            printf("    \"%s %s\") flags=\"%s\"; subs=\"%s\" ;;\n", e->cmd, e->sub, e->flags,
                   e->subs ? e->subs : "");
    }
    printf("    esac\n"
           "    if [[ -z $flags ]]; then\n"
           "        case \"$cmd\" in\n");
    for (size_t i = 0; i < COMPLETION_COUNT; i++) {
        const struct completion_entry *e = &completion_table[i];
        if (!e->sub)
            printf("        %s) flags=\"%s\"; subs=\"%s\" ;;\n", e->cmd, e->flags,
                   e->subs ? e->subs : "");
    }
    char cmds[256];
    completion_commands(cmds, sizeof(cmds));
    printf("        esac\n"
           "        ((COMP_CWORD == 1)) || subs=\"\"\n"
           "    elif ((COMP_CWORD != 2)); then\n"
           "        subs=\"\"\n"
           "    fi\n"
           "    if [[ $cur == -* ]]; then\n"
           "        COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n"
           "    elif [[ -n $subs ]]; then\n"
           "        COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n"
           "    else\n"
           "        COMPREPLY=()\n"
           "    fi\n"
           "}\n"
           "complete -o default -F _gflow_complete %s\n",
           cmds);
}

/* fish: one `complete` line per flag, subcommands offered while none is given. */
static void completion_fish_flags(const struct completion_entry *e)
{
    char copy[2048];
    snprintf(copy, sizeof(copy), "%s", e->flags);
    for (char *save = NULL, *f = strtok_r(copy, " ", &save); f; f = strtok_r(NULL, " ", &save)) {
        printf("complete -c %s", e->cmd);
        if (e->sub)
            printf(" -n '__fish_seen_subcommand_from %s'", e->sub);
        if (f[1] == '-')
            printf(" -l %s\n", f + 2);
        else
            printf(" -s %s\n", f + 1);
    }
}

static void completion_fish(void)
{
    printf("# gflow completion for fish: gbatch completion fish | source\n");
    for (size_t i = 0; i < COMPLETION_COUNT; i++) {
        const struct completion_entry *e = &completion_table[i];
        if (e->subs && !e->sub)
            printf("complete -c %s -f -n __fish_use_subcommand -a '%s'\n", e->cmd, e->subs);
        else if (e->subs)
            printf("complete -c %s -f -n '__fish_seen_subcommand_from %s' -a '%s'\n", e->cmd,
                   e->sub, e->subs);
        completion_fish_flags(e);
    }
}

int completion_print(const char *shell)
{
    if (!strcmp(shell, "bash")) {
        completion_bash();
    } else if (!strcmp(shell, "zsh")) {
        /* zsh runs bash's completion functions through bashcompinit. */
        printf("# gflow completion for zsh: eval \"$(gbatch completion zsh)\"\n"
               "autoload -U +X compinit && compinit\n"
               "autoload -U +X bashcompinit && bashcompinit\n");
        completion_bash();
    } else if (!strcmp(shell, "fish")) {
        completion_fish();
    } else {
        return -1;
    }
    return 0;
}
