/* completion: `PROG completion SHELL` of every gflow program (gbatch, gqueue, gjob,
 * gcancel, gctl, ginfo, gstats, gflowd, gflow-mcp), for bash, zsh, fish, powershell and
 * elvish. Every program prints the same script, which completes all of them: one eval
 * (or one installed file, linked under each program's name) covers the lot.
 *
 * The words live in one table: a row per program (its subcommands and flags) and a row
 * per subcommand that has flags of its own. A test compares each row with its program's
 * --help (tests/e2e/test_compat_gbatch.py): a flag added to a program without being added
 * here fails that test. A new program is one row (and a call of completion_main from its
 * main); every program also gets the subcommand `completion` without a row for it. */
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
    {"gbatch", NULL, "new",
     JOB_FLAGS
     " -H --hold -c -P --project --nice --auto-close --notify-email --notify-on " GPU_FLAGS
     " " DEP_FLAGS " --array --param --param-file --name-template --max-concurrent "
     "--dry-run --parsable --socket --config -h --help -V --version"},
    {"gqueue", NULL, NULL,
     "-a --all -c --completed -s --states -j --jobs -u --user --users -N --names -g --group "
     "--since -w --watch --interval -P --project -n --limit -r --sort -f --format -o --output "
     "--start -t --tree -l --long --socket --config -h --help -V --version"},
    {"gcancel", NULL, NULL,
     "--dry-run -v --verbose --kill --cancel --socket --config -h --help -V --version"},
    {"ginfo", NULL, NULL,
     "-v --verbose --topology -o --output --socket --config -h --help -V --version"},
    {"gjob", NULL,
     "show s log l why w attach a hold h release r update u redo close-sessions close",
     "--socket --config -h --help -V --version"},
    {"gjob", "show", NULL, "-o --output -v --verbose -h --help"},
    {"gjob", "log", NULL, "-f --first -l --last --follow --raw -h --help"},
    {"gjob", "why", NULL, "-n --lines -o --output -h --help"},
    {"gjob", "attach", NULL, "-r --read-only --detach-keys -h --help"},
    {"gjob", "hold", NULL, "-h --help"},
    {"gjob", "close-sessions", NULL, "-j --jobs -s --state -p --pattern -a --all -h --help"},
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
     "-t --since --until --by -u --user -a --all-users --gpu --buckets --idle-gpus -o --output "
     "--socket "
     "--config -h "
     "--help -V --version"},
    {"gctl", NULL, "show-gpus set-gpus gpu-process gpu set-limit quota usage reserve",
     "--socket --config -h --help -V --version"},
    {"gctl", "usage", NULL, "-o --output -h --help"},
    {"gctl", "gpu-process", "ignore unignore list", "--gpu --pid -h --help"},
    {"gctl", "gpu", "resume", "--force -h --help"},
    {"gctl", "quota", "list show set remove clear",
     "--user --project --default-user --default-project --max-running-jobs --max-running-gpus "
     "--max-queued-jobs --max-gpu-hours --limits -o --output -h --help"},
    {"gctl", "reserve", "create list get cancel",
     "--user --gpus --gpu-spec --start --duration --timezone --status --active --timeline "
     "--range --from --to -h --help"},
    {"gflowd", NULL, "up start down stop restart status run reload init service web",
     "-c --config --user --system --data-dir --socket --max-running-jobs --kill-grace-secs "
     "--log-level -v --verbose -q --quiet --gpus --gpu-allocation-strategy "
     "--gpu-poll-interval-secs --simulate-gpus --force --yes --advanced --host --timezone "
     "--root --port --bind -h --help -V --version"},
    {"gflowd", "web", NULL, "--port --bind --socket -h --help"},
    {"gflowd", "service", "install uninstall status",
     "-c --config --user --system --root -h --help"},
    {"gflow-mcp", NULL, NULL, "--socket -h --help -V --version"},
    {"gflow", NULL, "gbatch gqueue gjob gcancel gctl ginfo gstats gflowd mcp status completion",
     "-h --help -V --version"},
    {"gflow", "mcp", "serve", "--socket -h --help"},
    {"gflow", "status", NULL, "-o --output --socket -h --help"},
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
           "    [[ $sub == completion ]] && return 1\n"
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

/* The shells, as `completion SHELL` names them (gflow's list, clap's order). */
#define COMPLETION_SHELLS "bash elvish fish powershell zsh"

/* The subcommands offered after e's words: a program's own and `completion`; the shells
 * after `completion`. */
static void entry_subs(const struct completion_entry *e, char *buf, size_t size)
{
    if (e->sub)
        snprintf(buf, size, "%s", e->subs ? e->subs : "");
    else
        snprintf(buf, size, "%s%scompletion", e->subs ? e->subs : "", e->subs ? " " : "");
}

#define COMPLETION_FLAGS "-h --help" /* `PROG completion`'s */

/* bash: values first (job ids, GPU indices, states: completion_bash_values), then a
 * case on "command subcommand", then on the command alone. Flags are offered for a word
 * starting with '-', subcommands for the first word; otherwise file names (-o default),
 * e.g. a script for gbatch. */
static void completion_bash(void)
{
    completion_bash_values();
    printf("_gflow_complete() {\n"
           "    local cur=\"${COMP_WORDS[COMP_CWORD]}\" cmd=\"${COMP_WORDS[0]##*/}\" sub=\"\"\n"
           "    local flags=\"\" subs=\"\" prev=\"\"\n"
           "    if ((COMP_CWORD > 1)); then sub=\"${COMP_WORDS[1]}\"; fi\n"
           "    if ((COMP_CWORD > 0)); then prev=\"${COMP_WORDS[COMP_CWORD - 1]}\"; fi\n"
           "    _gflow_complete_value \"$cmd\" \"$sub\" \"$prev\" \"$cur\" && return 0\n"
           "    case \"$cmd $sub\" in\n");
    char subs[512];
    for (size_t i = 0; i < COMPLETION_COUNT; i++) {
        const struct completion_entry *e = &completion_table[i];
        if (!e->sub)
            continue;
        entry_subs(e, subs, sizeof(subs));
        printf("    \"%s %s\") flags=\"%s\"; subs=\"%s\" ;;\n", e->cmd, e->sub, e->flags, subs);
    }
    printf("    *\" completion\") flags=\"%s\"; subs=\"%s\" ;;\n", COMPLETION_FLAGS,
           COMPLETION_SHELLS);
    printf("    esac\n"
           "    if [[ -z $flags ]]; then\n"
           "        case \"$cmd\" in\n");
    for (size_t i = 0; i < COMPLETION_COUNT; i++) {
        const struct completion_entry *e = &completion_table[i];
        if (e->sub)
            continue;
        entry_subs(e, subs, sizeof(subs));
        printf("        %s) flags=\"%s\"; subs=\"%s\" ;;\n", e->cmd, e->flags, subs);
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

/* zsh: bash's functions through bashcompinit. The one script works both ways: eval'd
 * in ~/.zshrc, and saved as a file of $fpath (#compdef), where the completion system
 * runs it as the completion function (compstate is set then) on the first TAB. */
static void completion_zsh(void)
{
    char cmds[256];
    completion_commands(cmds, sizeof(cmds));
    printf("#compdef %s\n"
           "# gflow completion for zsh: eval \"$(gbatch completion zsh)\" in ~/.zshrc, or save\n"
           "# it as _gflow in a directory of $fpath.\n"
           "if (( ! $+functions[compdef] )); then\n"
           "    autoload -U +X compinit && compinit\n"
           "fi\n"
           "autoload -U +X bashcompinit && bashcompinit\n",
           cmds);
    completion_bash();
    printf("if [[ -n ${compstate[context]-} ]]; then\n"
           "    _bash_complete -o default -F _gflow_complete \"$@\"\n"
           "fi\n");
}

/* Calls fn with each word of the space-separated list. */
static void each_word(const char *list, void (*fn)(const char *word, const void *arg),
                      const void *arg)
{
    char copy[2048];
    snprintf(copy, sizeof(copy), "%s", list ? list : "");
    for (char *save = NULL, *w = strtok_r(copy, " ", &save); w; w = strtok_r(NULL, " ", &save))
        fn(w, arg);
}

/* fish: one `complete` line per flag, subcommands offered while none is given. */
static void fish_flag(const char *f, const void *arg)
{
    const struct completion_entry *e = arg;
    printf("complete -c %s", e->cmd);
    if (e->sub)
        printf(" -n '__fish_seen_subcommand_from %s'", e->sub);
    if (f[1] == '-')
        printf(" -l %s\n", f + 2);
    else
        printf(" -s %s\n", f + 1);
}

static void completion_fish(void)
{
    printf("# gflow completion for fish: gbatch completion fish | source\n");
    char subs[512];
    for (size_t i = 0; i < COMPLETION_COUNT; i++) {
        const struct completion_entry *e = &completion_table[i];
        entry_subs(e, subs, sizeof(subs));
        if (!e->sub) {
            printf("complete -c %s -f -n __fish_use_subcommand -a '%s'\n", e->cmd, subs);
            printf("complete -c %s -f -n '__fish_seen_subcommand_from completion' -a '%s'\n",
                   e->cmd, COMPLETION_SHELLS);
        } else if (*subs) {
            printf("complete -c %s -f -n '__fish_seen_subcommand_from %s' -a '%s'\n", e->cmd,
                   e->sub, subs);
        }
        each_word(e->flags, fish_flag, e);
    }
}

/* PowerShell: one completer for every program, keyed as clap's are: "gjob" or
 * "gjob;show" (the program and the subcommand before the word completed). */
static void ps_word(const char *w, const void *arg)
{
    const char *kind = arg;
    printf("            [CompletionResult]::new('%s', '%s', [CompletionResultType]::%s, '%s')\n", w,
           w, kind, w);
}

/* Calls emit for every table entry under the key powershell and elvish look words up by
 * ("gjob", "gjob;show"), and for each program's "completion" subcommand. */
static void each_keyed_entry(void (*emit)(const char *key, const char *subs, const char *flags))
{
    char subs[512], key[128];
    for (size_t i = 0; i < COMPLETION_COUNT; i++) {
        const struct completion_entry *e = &completion_table[i];
        entry_subs(e, subs, sizeof(subs));
        if (e->sub)
            snprintf(key, sizeof(key), "%s;%s", e->cmd, e->sub);
        else
            snprintf(key, sizeof(key), "%s", e->cmd);
        emit(key, subs, e->flags);
        if (!e->sub) {
            snprintf(key, sizeof(key), "%s;completion", e->cmd);
            emit(key, COMPLETION_SHELLS, COMPLETION_FLAGS);
        }
    }
}

static void ps_case(const char *key, const char *subs, const char *flags)
{
    printf("        '%s' {\n", key);
    each_word(subs, ps_word, "ParameterValue");
    each_word(flags, ps_word, "ParameterName");
    printf("            break\n"
           "        }\n");
}

static void completion_powershell(void)
{
    char cmds[256];
    completion_commands(cmds, sizeof(cmds));
    printf("# gflow completion for PowerShell:\n"
           "#   gbatch completion powershell | Out-String | Invoke-Expression\n"
           "using namespace System.Management.Automation\n"
           "using namespace System.Management.Automation.Language\n"
           "\n"
           "Register-ArgumentCompleter -Native -CommandName @(");
    const char *sep = "";
    for (size_t i = 0; i < COMPLETION_COUNT; i++)
        if (!completion_table[i].sub) {
            printf("%s'%s'", sep, completion_table[i].cmd);
            sep = ", ";
        }
    printf(") -ScriptBlock {\n"
           "    param($wordToComplete, $commandAst, $cursorPosition)\n"
           "\n"
           "    $commandElements = $commandAst.CommandElements\n"
           "    $command = @(\n"
           "        [System.IO.Path]::GetFileNameWithoutExtension($commandElements[0].ToString())\n"
           "        for ($i = 1; $i -lt [Math]::Min($commandElements.Count, 2); $i++) {\n"
           "            $element = $commandElements[$i]\n"
           "            if ($element -isnot [StringConstantExpressionAst] -or\n"
           "                $element.StringConstantType -ne [StringConstantType]::BareWord -or\n"
           "                $element.Value.StartsWith('-') -or\n"
           "                $element.Value -eq $wordToComplete) {\n"
           "                break\n"
           "            }\n"
           "            $element.Value\n"
           "        }) -join ';'\n"
           "\n"
           "    $completions = @(switch ($command) {\n");
    each_keyed_entry(ps_case);
    printf("    })\n"
           "\n"
           "    $completions.Where{ $_.CompletionText -like \"$wordToComplete*\" } |\n"
           "        Sort-Object -Property ListItemText\n"
           "}\n");
}

/* elvish: a map from "gjob" / "gjob;show" to its words, and one arg-completer for every
 * program (elvish itself keeps the words that start with what was typed). */
static void elvish_word(const char *w, const void *arg)
{
    (void)arg;
    printf(" '%s'", w);
}

static void elvish_entry(const char *key, const char *subs, const char *flags)
{
    printf("    &'%s'= [", key);
    each_word(subs, elvish_word, NULL);
    each_word(flags, elvish_word, NULL);
    printf(" ]\n");
}

static void completion_elvish(void)
{
    char cmds[256];
    completion_commands(cmds, sizeof(cmds));
    printf("# gflow completion for elvish: eval (gbatch completion elvish | slurp)\n"
           "use path\n"
           "use str\n"
           "\n"
           "var gflow-words = [\n");
    each_keyed_entry(elvish_entry);
    printf("]\n"
           "\n"
           "fn gflow-complete {|@words|\n"
           "    var command = (path:base $words[0])\n"
           "    if (and (> (count $words) 2) (not (str:has-prefix $words[1] '-'))) {\n"
           "        set command = $command';'$words[1]\n"
           "    }\n"
           "    if (has-key $gflow-words $command) {\n"
           "        all $gflow-words[$command]\n"
           "    }\n"
           "}\n"
           "\n"
           "for c [%s] {\n"
           "    set edit:completion:arg-completer[$c] = $gflow-complete~\n"
           "}\n",
           cmds);
}

static const struct {
    const char *name;
    void (*print)(void);
} completion_shells[] = {
    {"bash", completion_bash}, {"elvish", completion_elvish},
    {"fish", completion_fish}, {"powershell", completion_powershell},
    {"zsh", completion_zsh},
};

int completion_print(const char *shell)
{
    for (size_t i = 0; i < sizeof(completion_shells) / sizeof(completion_shells[0]); i++) {
        if (!strcmp(shell, completion_shells[i].name)) {
            if (!strcmp(shell, "bash"))
                printf("# gflow completion for bash: eval \"$(gbatch completion bash)\"\n");
            completion_shells[i].print();
            return 0;
        }
    }
    return -1;
}

static void completion_help(const char *prog)
{
    printf("Usage: %s completion SHELL\n"
           "\n"
           "Prints a completion script for SHELL: bash, elvish, fish, powershell or zsh.\n"
           "Any gflow program prints the same script, which completes every gflow program\n"
           "(subcommands, flags, and for bash and zsh your job ids, GPU indices and states).\n"
           "\n"
           "  bash        eval \"$(%s completion bash)\" in ~/.bashrc\n"
           "  zsh         eval \"$(%s completion zsh)\" in ~/.zshrc, or save it as _gflow in\n"
           "              a directory of $fpath\n"
           "  fish        %s completion fish | source\n"
           "  powershell  %s completion powershell | Out-String | Invoke-Expression\n"
           "  elvish      eval (%s completion elvish | slurp)\n"
           "\n"
           "Options:\n"
           "  -h, --help  show this help\n",
           prog, prog, prog, prog, prog, prog);
}

int completion_main(const char *prog, int argc, char **argv)
{
    if (argc >= 1 && (!strcmp(argv[0], "-h") || !strcmp(argv[0], "--help"))) {
        completion_help(prog);
        return 0;
    }
    if (argc == 0) {
        fprintf(stderr,
                "%s: 'completion' needs a shell: bash, elvish, fish, powershell or zsh (e.g. "
                "'%s completion bash')\n",
                prog, prog);
        return 2;
    }
    if (argc > 1) {
        fprintf(stderr,
                "%s: unexpected argument '%s' after 'completion %s'; give one shell, e.g. '%s "
                "completion bash'\n",
                prog, argv[1], argv[0], prog);
        return 2;
    }
    if (completion_print(argv[0]) < 0) {
        fprintf(stderr,
                "%s: unknown shell '%s'; use bash, elvish, fish, powershell or zsh (e.g. '%s "
                "completion bash')\n",
                prog, argv[0], prog);
        return 2;
    }
    return fflush(stdout) == 0 && !ferror(stdout) ? 0 : 1;
}
