#!/usr/bin/env bash
# Prints the Debian archive this machine's apt already uses (the URI of the first `deb` source
# whose suites name this release's codename and whose components include main), so that the
# roots megacpp makes for PyTorch 2.x come from the same mirror and no host name is written in
# the project. $DEBIAN_MIRROR overrides it.
#
#   scripts/debian_mirror.sh            -> e.g. http://<mirror>/debian
set -euo pipefail

if [ -n "${DEBIAN_MIRROR:-}" ]; then
  echo "$DEBIAN_MIRROR"
  exit 0
fi
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
if [ -z "$codename" ]; then
  echo "debian_mirror: /etc/os-release names no VERSION_CODENAME; set DEBIAN_MIRROR" >&2
  exit 1
fi

one_line_sources() {  # deb [options] URI SUITE COMPONENT...
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    awk -v want="$codename" '$1 == "deb" {
      i = 2
      if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
      uri = $i; suite = $(i + 1)
      for (c = i + 2; c <= NF; c++) if (suite == want && $c == "main") { print uri; exit }
    }'
}

deb822_sources() {  # stanzas of Types/URIs/Suites/Components, separated by blank lines
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v want="$codename" '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ") && (" " comps " ") ~ / main /) {
          split(uris, u, " "); print u[1]; found = 1; exit
        }
        types = uris = suites = comps = ""
      }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]*#/ { next }
      tolower($1) == "types:" { $1 = ""; types = $0 }
      tolower($1) == "uris:" { $1 = ""; uris = $0 }
      tolower($1) == "suites:" { $1 = ""; suites = $0 }
      tolower($1) == "components:" { $1 = ""; comps = $0 }
      END { if (!found) flush() }' "$f"
  done
}

mirror=$( { one_line_sources; deb822_sources; } | head -1)
if [ -z "$mirror" ]; then
  echo "debian_mirror: no 'deb' source for $codename main in /etc/apt/sources.list{,.d}; set DEBIAN_MIRROR" >&2
  exit 1
fi
echo "${mirror%/}"
