#!/usr/bin/env bash
# Check C, C++ and CUDA sources against .clang-format; exit 1 listing the files
# that differ. Changes nothing: to fix, run the command it prints.
#
#   tools/check_format.sh                   every source (tracked or new)
#   tools/check_format.sh FILE...           these files
#   tools/check_format.sh --since REV       files changed since REV (commits,
#                                           uncommitted edits, new untracked files)
#   tools/check_format.sh --since REV --lines
#                                           only the lines changed since REV
#                                           (git clang-format); new files whole
#   --show                                  also print what would change
#
# clang-format's layout differs between major versions; the tree's
# .clang-format is tuned for 14 (CLANG_FORMAT names another binary).
set -euo pipefail
cd "$(dirname "$0")/.."

cf=${CLANG_FORMAT:-clang-format}
# C and C++ sources. CUDA (.cu/.cuh) is left out: clang-format 14 reflows
# the inline-asm operand lists of the wgmma wrappers into unreadable
# columns, and the kernels' hand layout is part of how they are read.
exts='c|h|cc|cpp'
since='' lines=0 show=0 files=()

usage() {
    sed -n '2,15s/^# \{0,1\}//p' "$0" >&2
    exit 2
}

while [ $# -gt 0 ]; do
    case $1 in
    --since) [ $# -ge 2 ] || usage; since=$2; shift 2 ;;
    --lines) lines=1; shift ;;
    --show) show=1; shift ;;
    -h | --help) usage ;;
    --) shift; files+=("$@"); break ;;
    -*) echo "check_format.sh: unknown option '$1'" >&2; usage ;;
    *) files+=("$1"); shift ;;
    esac
done
if [ -n "$since" ] && [ ${#files[@]} -gt 0 ]; then
    echo "check_format.sh: give files or --since REV, not both" >&2
    exit 2
fi
if [ "$lines" = 1 ] && [ -z "$since" ]; then
    echo "check_format.sh: --lines needs --since REV" >&2
    exit 2
fi
command -v "$cf" >/dev/null || { echo "check_format.sh: $cf not found (CLANG_FORMAT=...)" >&2; exit 2; }
version=$("$cf" --version)
case $version in
*" version 14."*) ;;
*) echo "check_format.sh: warning: .clang-format is tuned for clang-format 14; this is: $version" >&2 ;;
esac

sources() { grep -E "\.($exts)\$" || true; }

new_files=()
if [ -n "$since" ]; then
    git rev-parse --verify --quiet "$since^{commit}" >/dev/null ||
        { echo "check_format.sh: '$since' is not a revision" >&2; exit 2; }
    mapfile -t new_files < <(git ls-files --others --exclude-standard | sources)
    if [ "$lines" = 1 ]; then
        mapfile -t files < <(printf '%s\n' "${new_files[@]}")
    else
        mapfile -t files < <({ git diff --name-only --diff-filter=ACMR "$since" --; printf '%s\n' "${new_files[@]}"; } | sources | sort -u)
    fi
elif [ ${#files[@]} -eq 0 ]; then
    # Tracked and new (untracked, not ignored) files; deleted ones are skipped.
    mapfile -t files < <(git ls-files --cached --others --exclude-standard | sources | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done)
fi
# Drop blank entries (an empty list printed by printf).
clean=()
for f in "${files[@]}"; do [ -n "$f" ] && clean+=("$f"); done
files=("${clean[@]+"${clean[@]}"}")

bad=()
for f in "${files[@]+"${files[@]}"}"; do
    [ -f "$f" ] || { echo "check_format.sh: $f: no such file" >&2; exit 2; }
    if ! "$cf" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
        bad+=("$f")
        if [ "$show" = 1 ]; then
            "$cf" --style=file "$f" | diff -u --label "$f" --label "$f (clang-format)" "$f" - || true
        fi
    fi
done

# Changed lines of tracked files: git clang-format restricts the check to them.
lines_diff=
if [ "$lines" = 1 ]; then
    lines_diff=$(git clang-format --binary "$(command -v "$cf")" --extensions "${exts//|/,}" --diff "$since" -- 2>/dev/null || true)
    if [[ $lines_diff == diff* ]]; then
        mapfile -t -O ${#bad[@]} bad < <(sed -n 's|^+++ b/||p' <<<"$lines_diff")
        [ "$show" = 1 ] && printf '%s\n' "$lines_diff"
    else
        lines_diff=
    fi
fi

checked=${#files[@]}
[ "$lines" = 1 ] && checked="the changed lines since $since and ${#files[@]} new"
if [ ${#bad[@]} -eq 0 ]; then
    echo "check_format.sh: $checked file(s) formatted as .clang-format says"
    exit 0
fi
echo "check_format.sh: ${#bad[@]} file(s) differ from .clang-format:" >&2
printf '  %s\n' "${bad[@]}" >&2
if [ -n "$lines_diff" ]; then
    echo "fix the changed lines: git clang-format $since (then review and add)" >&2
else
    echo "fix: $cf -i FILE... (or, for changed lines only: git clang-format REV)" >&2
fi
exit 1
