#!/usr/bin/env bash
# Rewrites api/ (or the directory given, relative to the repository's
# root): the exported API of every public package of the library, one file
# per package (api/leasing/server.txt for leasing/server), from the code as
# it is now. Each file is `go doc -all`'s declarations without
# documentation and comments, spaces collapsed: a change of a name, a
# signature, a field or a constant's expression changes a line, and a
# change of documentation or alignment none.
# Run it after changing anything exported and commit api/ with the change;
# scripts/apicheck.sh (in .ci/run) fails until you do.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-api}
mod=$(GOWORK=off go list -m)
# Remove the old files first, so that a package gone loses its file; only
# .txt files are removed, whatever directory is given.
if [ -d "$out" ]; then
	find "$out" -name '*.txt' -type f -delete
	find "$out" -mindepth 1 -type d -empty -delete
fi
for pkg in $(go list ./... | grep -v -e /internal -e /doormanpb -e /examples); do
	file="$out/${pkg#"$mod"/}.txt"
	mkdir -p "$(dirname "$file")"
	# After the package's own documentation, go doc prints declarations at
	# the margin (blocks indented by tabs) and their documentation indented
	# by four spaces; keep the declarations without their comments.
	go doc -all "$pkg" | awk '
		/^(CONSTANTS|VARIABLES|FUNCTIONS|TYPES)$/ { decls = 1; next }
		!decls || /^    / || /^[ \t]*(\/\/.*)?$/ { next }
		{
			# One space between words, so that realigning a block changes nothing.
			indent = /^\t/ ? "\t" : ""
			sub(/[ \t]+\/\/[^"`]*$/, "")
			$1 = $1
			print indent $0
		}
	' >"$file"
done
