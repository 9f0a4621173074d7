#!/usr/bin/env bash
# tests/python/run.sh PREFIX - the Python package's test suite against the
# libfusedmoe installed in PREFIX (meson install --prefix PREFIX).
#
# Creates a venv (default build/python-venv; FMOE_PY_VENV=DIR to use another,
# e.g. one kept between runs), installs the pinned test dependencies
# (tests/python/requirements.txt) and ./python, then runs pytest on
# tests/python with the library, and the plugins, of PREFIX only: the tests
# use isolated contexts with PREFIX's plugin manifests named explicitly.
set -euo pipefail
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 PREFIX   (an install prefix of libfusedmoe)" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=$(cd "$1" && pwd)
venv=${FMOE_PY_VENV:-$root/build/python-venv}

if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt"
# The package as a user installs it (not the source tree): what pytest
# imports is what `pip install ./python` gives. Reinstalled every run so an
# edit of python/ is always what is tested.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$root/python"

cd "$here"
FUSEDMOE_TEST_PREFIX="$prefix" "$venv/bin/python" -m pytest -q -p no:cacheprovider -rs .
