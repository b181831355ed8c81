#!/bin/sh
# Writes the completion file `make install` installs for SHELL: gbatch completion SHELL.
# Each is ready for its shell's completion directory as it is (zsh's starts with
# #compdef and completes at once when the completion system autoloads it).
#   gen-completion.sh GBATCH bash|zsh|fish OUT
set -e
gbatch=$1 shell=$2 out=$3
"$gbatch" completion "$shell" >"$out"
