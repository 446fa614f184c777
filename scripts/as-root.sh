# shellcheck shell=bash
# as-root.sh - sourced first by setup.sh and test.sh: they install packages,
# start Incus and make network namespaces, so they run as root. Root runs them
# as they are; a user with sudo has them run again through it; anyone else is
# told what to do.
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    echo "agentctl: $0 needs root: running it again with sudo" >&2
    exec sudo -- "$PWD/scripts/${0##*/}" "$@"
  fi
  echo "agentctl: $0 needs root: run it as root (this machine has no sudo)" >&2
  exit 1
fi
