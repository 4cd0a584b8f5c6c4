#!/usr/bin/env bash
# Installs Debian's chromium for the leaderboard's browser test (tests/test_browser.py).
# Idempotent: does nothing when /usr/bin/chromium is already there. Needs root (apt-get).
# No browser build is ever downloaded from elsewhere: only the distribution's package.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
    echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo /usr/bin/chromium)"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq chromium
/usr/bin/chromium --version
