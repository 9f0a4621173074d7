# tests/tap.sh - sourced by the shell tests that report TAP (meson's
# protocol: 'tap'): prints the header and gives them
#   check DESCRIPTION  one test point, passed when the caller set ok=1; a
#                      failure prints TAP_NOTE (e.g. the seed) and the last
#                      20 lines of $tmp/out, the caller's last command output
#   tap_end            the plan line, then exit 1 if any point failed
# The caller sets tmp (a folder it owns) before its first check.
n=0
failed=0
echo "TAP version 13"
check() {
    n=$((n + 1))
    if [ "$ok" = 1 ]; then
        echo "ok $n - $1"
    else
        echo "not ok $n - $1"
        [ -n "${TAP_NOTE:-}" ] && echo "# $TAP_NOTE"
        echo "# output:"
        sed 's/^/#   /' "$tmp/out" | tail -20
        failed=1
    fi
}
tap_end() {
    echo "1..$n"
    exit $failed
}
