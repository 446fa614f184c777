#!/usr/bin/env bash
# Checks that every `#include "..."` under SRC_DIR follows the two tables of
# ARCHITECTURE_MD (```layers: which module may include which; ```exports: the
# headers each module offers the others). Prints each violation as
# FILE:LINE: what is wrong, and exits 1 when there is one.
# Usage: check-layers.sh [SRC_DIR [ARCHITECTURE_MD]]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src=${1:-$root/src}
doc=${2:-$root/docs/architecture.md}

block() { awk -v name="$1" '$0 == "```" name {on = 1; next} /^```/ {on = 0} on && NF' "$doc"; }
declare -A may exports
while read -r module rest; do may[$module]=" $rest "; done < <(block layers)
while read -r module rest; do exports[$module]=" $rest "; done < <(block exports)
[ "${#may[@]}" -gt 0 ] || { echo "$doc: no \`\`\`layers table" >&2; exit 2; }

# module_of PATH (relative to src/, without the file name): the longest module
# name that is PATH or a folder above it.
module_of() {
  local path=$1 best=""
  for module in "${!may[@]}"; do
    if [ "$path" = "$module" ] || [[ $path == "$module"/* ]]; then
      [ "${#module}" -gt "${#best}" ] && best=$module
    fi
  done
  echo "$best"
}

failures=0
while IFS= read -r file; do
  rel=${file#"$src"/}
  dir=$(dirname "$rel")
  if [ "$dir" = . ]; then from=main; else from=$(module_of "$dir"); fi
  [ -n "$from" ] || { echo "$file: in no module of $doc"; failures=$((failures + 1)); continue; }
  while IFS=: read -r line header; do
    [[ $header == */* ]] || continue  # beside the file: its own module
    if [[ $header == agentctl/* ]]; then
      to=agentctl
    else
      to=$(module_of "$(dirname "$header")")
      [ -n "$to" ] || { echo "$file:$line: \"$header\" is in no module of $doc"; failures=$((failures + 1)); continue; }
    fi
    [ "$to" = "$from" ] && continue
    if [[ ${may[$from]} != *" $to "* ]]; then
      echo "$file:$line: $from may not include $header (it may include:${may[$from]% }; $doc)"
      failures=$((failures + 1))
    elif [ "$to" != agentctl ] && [[ ${exports[$to]:- } != *" $(basename "$header") "* ]]; then
      offers=${exports[$to]:- nothing }
      echo "$file:$line: $header is private to $to (it offers:${offers% }; $doc)"
      failures=$((failures + 1))
    fi
  done < <(grep -n '^#include "' "$file" | sed -E 's/^([0-9]+):#include "([^"]+)".*/\1:\2/')
done < <(find "$src" -name '*.cpp' -o -name '*.hpp' | sort)

if [ "$failures" -gt 0 ]; then
  echo "agentctl: $failures include(s) break the layers of $doc" >&2
  exit 1
fi
echo "agentctl: every include follows $doc"
