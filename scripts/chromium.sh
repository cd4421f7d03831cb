#!/usr/bin/env bash
# Headless Chromium for the web page's tests, from Debian's packages:
# chromium (and a CJK font, so that Chinese text renders in screenshots)
# are installed when missing. Prints the browser's path; fails loudly when
# it cannot be found, installed or run.
#
#   scripts/chromium.sh        install if needed, print the path
set -euo pipefail

find_chromium() {
  local name
  for name in chromium chromium-browser google-chrome-stable google-chrome; do
    command -v "$name" 2>/dev/null && return 0
  done
  return 1
}

apt_install() {
  echo "chromium.sh: installing Debian's $*" >&2
  if [ "$(id -u)" != 0 ]; then
    echo "chromium.sh: installing $* needs root: sudo apt-get install -y $*" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq "$@"; } >&2 ||
    { echo "chromium.sh: apt-get install -y $* failed" >&2; exit 1; }
}

path=$(find_chromium) || { apt_install chromium; path=$(find_chromium) ||
  { echo "chromium.sh: chromium was installed but is not on PATH" >&2; exit 1; }; }
if command -v fc-list >/dev/null && [ -z "$(fc-list :lang=zh family)" ]; then
  apt_install fonts-noto-cjk
fi
# (Debian's wrapper script prints a harmless shell warning on stderr.)
version=$("$path" --version 2>/dev/null) || { echo "chromium.sh: $path does not run" >&2; exit 1; }
echo "chromium.sh: $version" >&2
echo "$path"
