#!/usr/bin/env bash
# Fails when a C++ file differs from what .clang-format asks for.
set -euo pipefail
cd "$(dirname "$0")/.."
formatter=$(command -v clang-format-14 || command -v clang-format)
mapfile -t files < <(git ls-files '*.cpp' '*.hpp')
[ ${#files[@]} -eq 0 ] && exit 0
if ! "$formatter" --dry-run --Werror "${files[@]}"; then
  echo "agentctl: some files are not formatted; run: $formatter -i \$(git ls-files '*.cpp' '*.hpp')" >&2
  exit 1
fi
echo "formatting ok (${#files[@]} files)"
