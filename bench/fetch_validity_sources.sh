#!/usr/bin/env bash
# Fetches the sources `infill bench validity` cuts holes from: real JavaScript and Go code that is
# not in the training corpus (the model is trained on Python only).
#   JavaScript: the published sources of a few well-known pure-JS npm packages (pinned), via `npm pack`.
#   Go: the Go standard library from Debian's golang-1.19-src package, unpacked with `dpkg -x`
#       (downloaded with `apt-get download`, not installed).
# Usage: bench/fetch_validity_sources.sh [DEST]   (default bench/sources, git-ignored)
# Then:  infill bench validity javascript --sources DEST/javascript
#        infill bench validity go --sources DEST/go
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-bench/sources}
JS_PACKAGES=(express@4.21.2 underscore@1.13.7 commander@12.1.0)
GO_PACKAGE=golang-1.19-src
mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
TMP=$(mktemp -d)
chmod 777 "$TMP"  # apt-get download writes as the _apt user
trap 'rm -rf "$TMP"' EXIT

# --- JavaScript ---
mkdir -p "$DEST/javascript"
for spec in "${JS_PACKAGES[@]}"; do
    name=${spec%@*}
    if [ -d "$DEST/javascript/$spec" ]; then echo "have $spec"; continue; fi
    (cd "$TMP" && npm pack --silent "$spec" >/dev/null)
    mkdir -p "$DEST/javascript/$spec"
    tar -xzf "$TMP/$name"-*.tgz -C "$DEST/javascript/$spec" --strip-components=1
    if [ "$name" = underscore ]; then  # the same modules three times (modules/, cjs/, amd/) and bundles: keep the source
        find "$DEST/javascript/$spec" -mindepth 1 -maxdepth 1 ! -name modules ! -name package.json ! -name LICENSE -exec rm -rf {} +
    fi
    echo "$spec (npm pack)" >> "$DEST/javascript/SOURCES.txt"
    echo "fetched $spec"
done

# --- Go ---
if [ -d "$DEST/go/src" ]; then
    echo "have $GO_PACKAGE"
else
    (cd "$TMP" && apt-get download "$GO_PACKAGE" >/dev/null)
    dpkg -x "$TMP"/"$GO_PACKAGE"_*.deb "$TMP/go-pkg"
    mkdir -p "$DEST/go"
    cp -r "$TMP"/go-pkg/usr/share/go-*/src "$DEST/go/src"
    deb=$(basename "$TMP"/"$GO_PACKAGE"_*.deb)
    echo "$deb (Debian, dpkg -x)" > "$DEST/go/SOURCES.txt"
    echo "fetched $deb"
fi
echo "sources in $DEST: $(find "$DEST/javascript" -name '*.js' | wc -l) .js files, $(find "$DEST/go" -name '*.go' | wc -l) .go files"
