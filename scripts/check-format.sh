#!/bin/sh
# Fails (listing the files) when a C file of the tree does not match .clang-format.
# Fix with: clang-format -i $(git ls-files '*.c' '*.h')
cd "$(dirname "$0")/.."
bad=$(for f in $(git ls-files '*.c' '*.h'); do
    clang-format --style=file "$f" | cmp -s - "$f" || echo "$f"
done)
if [ -n "$bad" ]; then
    echo "check-format: these files do not match .clang-format (clang-format -i FILE):" >&2
    echo "$bad" >&2
    exit 1
fi
echo "check-format: $(git ls-files '*.c' '*.h' | wc -l) files match .clang-format"
