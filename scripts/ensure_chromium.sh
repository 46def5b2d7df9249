#!/usr/bin/env bash
# The browser check (tests/test_browser.py) drives Debian's chromium + chromium-driver; install them when missing.
set -u
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "installing Debian chromium + chromium-driver for the browser check ..."
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null \
    || echo "warning: could not install chromium; tests/test_browser.py will be skipped"
else
  echo "note: chromium/chromedriver missing and apt-get not usable as this user; tests/test_browser.py will be skipped" \
       "(sudo apt-get install chromium chromium-driver)"
fi
exit 0
