#!/bin/sh
# Writes the completion file `make install` installs for SHELL: gbatch completion SHELL,
# as the shell's completion directory wants it.
#   gen-completion.sh GBATCH bash|zsh|fish OUT
set -e
gbatch=$1 shell=$2 out=$3
case $shell in
zsh)
    # An autoloaded completion function (site-functions/vendor-completions): bash's
    # functions through bashcompinit, then the completion asked for now.
    {
        echo '#compdef gbatch gqueue gjob gcancel ginfo gctl gflowd'
        echo 'autoload -U +X bashcompinit && bashcompinit'
        "$gbatch" completion bash
        echo '_bash_complete -F _gflow_complete "$@"'
    } >"$out" ;;
*) "$gbatch" completion "$shell" >"$out" ;;
esac
