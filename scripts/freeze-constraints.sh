#!/usr/bin/env bash
# Rewrite constraints.txt from what .venv has installed now (after a deliberate `pip install X`).
# The repo's own editable packages are left out; pip and setuptools are kept pinned.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
{
    sed -n '/^#/p' constraints.txt
    .venv/bin/python -m pip freeze --all --exclude-editable --disable-pip-version-check \
        | grep -viE '^(spotter[-_]|-e |#)' | LC_ALL=C sort -f
} > constraints.txt.new
mv constraints.txt.new constraints.txt
echo "constraints.txt: $(grep -vc '^#' constraints.txt) pins" >&2
