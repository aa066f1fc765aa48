#!/usr/bin/env bash
# Checks that api/ is the exported API of the library as the code declares
# it: regenerates it in a temporary directory and, if the committed files
# differ, prints the difference (- committed, + code) and the fix, and
# exits 1. .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
bash scripts/apifiles.sh "$tmp/api"
if ! diff -ru api "$tmp/api"; then
	echo "apicheck: the exported API differs from api/ (above: - committed, + code); run scripts/apifiles.sh and commit api/" >&2
	exit 1
fi
echo "apicheck: api/ matches the exported API of $(find api -name '*.txt' | wc -l) packages"
