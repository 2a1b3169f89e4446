#!/usr/bin/env bash
# Fetches the sources `infill bench validity` cuts holes from: real, permissively licensed code in
# every language of grammars/languages.toml that is not in the training corpus (the model is
# trained on the Python of the standard library and of the venv's packages, MODEL_CARD.md).
# Every set is pinned; each language's SOURCES.txt names its sets with their licences.
#   javascript  a few well-known pure-JS npm packages, via `npm pack`
#   typescript  npm packages that ship their .ts sources (src/ kept)
#   tsx         npm packages that ship their .tsx sources (src/ kept)
#   go          the Go standard library from Debian's golang-1.19-src (`apt-get download` + `dpkg -x`,
#               downloaded, not installed; the same for every Debian package below)
#   rust        crate sources from Debian's librust-*-dev packages (/usr/share/cargo/registry)
#   java        react-native's Android Java (ReactAndroid/src/main/java) and cordova-android's
#               framework, from npm
#   c           newlib's C library and maths library (Debian newlib-source; machine/ and sys/,
#               which hold assembly and some GPL code, left out) and Brotli's C (PyPI sdist, c/)
#   cpp         Boost headers (Debian libboost1.81-dev; json, algorithm, container, url kept),
#               googletest (Debian googletest) and react-native's ReactCommon C++ (npm)
#   python      PyPI sdists of packages that are not in the training corpus (the standard library,
#               which is, stays the `--sources` of the older Python runs)
# Resumable: a set already in place is kept; a set is unpacked elsewhere and moved in whole.
# Downloads per language: at most ~30 MB (java, cpp: react-native's 20 MB tarball).
# Usage: bench/fetch_validity_sources.sh [DEST]   (default bench/sources, git-ignored)
# Then:  infill bench validity LANGUAGE --sources DEST/LANGUAGE
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-bench/sources}
PYTHON=${PYTHON:-.venv/bin/python}
# spec|licence
JS_PACKAGES=("express@4.21.2|MIT" "underscore@1.13.7|MIT" "commander@12.1.0|MIT")
TS_PACKAGES=("rxjs@7.8.1|Apache-2.0" "@tanstack/query-core@5.59.0|MIT")
TSX_PACKAGES=("react-day-picker@8.10.1|MIT" "@tanstack/react-query@5.59.0|MIT")
GO_DEB="golang-1.19-src=1.19.8-2|BSD-3-Clause"
RUST_DEBS=("librust-serde-dev=1.0.152-2|MIT OR Apache-2.0" "librust-serde-json-dev=1.0.87-1|MIT OR Apache-2.0"
           "librust-regex-syntax-dev=0.6.27-1|MIT OR Apache-2.0" "librust-itertools-dev=0.10.3-1|MIT OR Apache-2.0"
           "librust-anyhow-dev=1.0.69-1|MIT OR Apache-2.0" "librust-rand-dev=0.8.5-1|MIT OR Apache-2.0"
           "librust-hashbrown-dev=0.12.3-1|MIT OR Apache-2.0" "librust-bytes-dev=1.2.1-1|MIT"
           "librust-syn-dev=1.0.107-1|MIT OR Apache-2.0")
REACT_NATIVE="react-native@0.72.17|MIT"
CORDOVA="cordova-android@12.0.1|Apache-2.0"
NEWLIB_DEB="newlib-source=3.3.0-1.3+deb12u1|BSD-style (Red Hat, Sun, Berkeley notices; no GPL in the parts kept)"
BROTLI_SDIST="Brotli==1.1.0|MIT"
BOOST_DEB="libboost1.81-dev=1.81.0-5+deb12u1|BSL-1.0"
BOOST_LIBS=(json algorithm container url)
GTEST_DEB="googletest=1.12.1-0.2|BSD-3-Clause"
PY_SDISTS=("more-itertools==10.5.0|MIT" "toolz==1.0.0|BSD-3-Clause" "bottle==0.13.2|MIT"
           "marshmallow==3.23.1|MIT" "tomlkit==0.13.2|MIT")

mkdir -p "$DEST"
DEST=$(cd "$DEST" && pwd)
TMP=$(mktemp -d)
chmod 777 "$TMP"  # apt-get download writes as the _apt user
trap 'rm -rf "$TMP"' EXIT
UPDATED=0

spec_of() { echo "${1%%|*}"; }
licence_of() { echo "${1#*|}"; }

npm_tgz() {  # npm_tgz SPEC: the package's tarball in $TMP (downloaded once per run)
    local spec=$1 name=${1%@*}
    local file="$TMP/npm/$(echo "${name#@}" | tr / -)-${spec##*@}.tgz"
    if [ ! -f "$file" ]; then
        mkdir -p "$TMP/npm"
        (cd "$TMP/npm" && npm pack --silent "$spec" >/dev/null)
    fi
    echo "$file"
}

deb_x() {  # deb_x NAME=VERSION DIR: download the Debian package and unpack it into DIR; prints the .deb's name
    local name=${1%%=*}
    mkdir -p "$TMP/deb"
    if ! (cd "$TMP/deb" && apt-get download "$1" >/dev/null 2>&1); then
        if [ "$UPDATED" = 0 ]; then
            apt-get update >/dev/null && UPDATED=1
        fi
        (cd "$TMP/deb" && apt-get download "$1" >/dev/null)
    fi
    local deb
    deb=$(ls "$TMP"/deb/"$name"_*.deb | head -n 1)
    dpkg -x "$deb" "$2"
    basename "$deb"
}

sdist() {  # sdist NAME==VERSION: the sdist's path in $TMP (pip download, no build)
    mkdir -p "$TMP/pypi"
    "$PYTHON" -m pip download -q --no-deps --no-binary :all: --no-build-isolation -d "$TMP/pypi" "$1" 2>/dev/null >/dev/null \
        || "$PYTHON" -m pip download -q --no-deps --no-binary :all: -d "$TMP/pypi" "$1" >/dev/null
    ls "$TMP"/pypi/* | grep -i -E -- "/$(echo "${1%%==*}" | sed 's/[-_.]/[-_.]/g')-${1##*==}\.(tar|zip)" | head -n 1
}

place() {  # place SRC DIR: move a fully unpacked set into place
    mkdir -p "$(dirname "$2")"
    mv "$1" "$2"
}

sources_txt() {  # sources_txt LANGUAGE LINE...: the language's SOURCES.txt, one set a line
    local lang=$1
    shift
    printf '%s\n' "$@" > "$DEST/$lang/SOURCES.txt"
}

npm_sets() {  # npm_sets LANGUAGE KEEP SPEC|LICENCE...: npm packages, only KEEP (a folder; "." for all) kept
    local lang=$1 keep=$2 entry
    shift 2
    mkdir -p "$DEST/$lang"
    local lines=()
    for entry in "$@"; do
        local spec name dir
        spec=$(spec_of "$entry") name=${spec%@*}
        dir="$DEST/$lang/${spec//\//+}"
        local where=""
        [ "$keep" = . ] || where="$keep/; "
        lines+=("$spec (npm pack; $where$(licence_of "$entry"))")
        if [ -d "$dir" ]; then echo "have $lang $spec"; continue; fi
        local x="$TMP/x-$lang-${spec//\//+}"
        mkdir -p "$x"
        tar -xzf "$(npm_tgz "$spec")" -C "$x" --strip-components=1
        if [ "$name" = underscore ]; then  # the same modules three times (modules/, cjs/, amd/) and bundles: keep the source
            find "$x" -mindepth 1 -maxdepth 1 ! -name modules ! -name package.json ! -name LICENSE -exec rm -rf {} +
        elif [ "$keep" != . ]; then
            find "$x" -mindepth 1 -maxdepth 1 ! -name "$keep" ! -name package.json ! -iname 'LICENSE*' -exec rm -rf {} +
        fi
        place "$x" "$dir"
        echo "fetched $lang $spec"
    done
    sources_txt "$lang" "${lines[@]}"
}

# --- JavaScript, TypeScript, TSX (npm) ---
npm_sets javascript . "${JS_PACKAGES[@]}"
npm_sets typescript src "${TS_PACKAGES[@]}"
npm_sets tsx src "${TSX_PACKAGES[@]}"

# --- Go ---
if [ -d "$DEST/go/src" ]; then
    echo "have go $(spec_of "$GO_DEB")"
else
    deb=$(deb_x "$(spec_of "$GO_DEB")" "$TMP/go-pkg")
    mkdir -p "$DEST/go"
    cp -r "$TMP"/go-pkg/usr/share/go-*/src "$TMP/go-src" && cp "$TMP"/go-pkg/usr/share/go-*/LICENSE "$TMP/go-src/" 2>/dev/null || true
    place "$TMP/go-src" "$DEST/go/src"
    echo "fetched go $deb"
fi
sources_txt go "$(spec_of "$GO_DEB" | sed 's/=/_/')_all.deb (Debian, dpkg -x; $(licence_of "$GO_DEB"))"

# --- Rust (Debian librust-*-dev: crate sources under /usr/share/cargo/registry) ---
mkdir -p "$DEST/rust"
lines=()
for entry in "${RUST_DEBS[@]}"; do
    spec=$(spec_of "$entry")
    lines+=("$spec (Debian, dpkg -x, /usr/share/cargo/registry; $(licence_of "$entry"))")
    marker="$DEST/rust/.${spec%%=*}"
    if [ -f "$marker" ]; then echo "have rust $spec"; continue; fi
    rm -rf "$TMP/rust-pkg"
    deb_x "$spec" "$TMP/rust-pkg" >/dev/null
    for crate in "$TMP"/rust-pkg/usr/share/cargo/registry/*; do
        [ -d "$DEST/rust/$(basename "$crate")" ] || place "$crate" "$DEST/rust/$(basename "$crate")"
    done
    touch "$marker"
    echo "fetched rust $spec"
done
sources_txt rust "${lines[@]}"

# --- Java (npm: react-native's Android sources, cordova-android's framework) ---
mkdir -p "$DEST/java"
rn=$(spec_of "$REACT_NATIVE")
if [ -d "$DEST/java/$rn" ]; then echo "have java $rn"; else
    mkdir -p "$TMP/rn-java"
    tar -xzf "$(npm_tgz "$rn")" -C "$TMP/rn-java" --strip-components=1 package/LICENSE package/ReactAndroid/src/main/java
    place "$TMP/rn-java" "$DEST/java/$rn"
    echo "fetched java $rn"
fi
cordova=$(spec_of "$CORDOVA")
if [ -d "$DEST/java/$cordova" ]; then echo "have java $cordova"; else
    mkdir -p "$TMP/cordova"
    tar -xzf "$(npm_tgz "$cordova")" -C "$TMP/cordova" --strip-components=1 package/LICENSE package/framework
    place "$TMP/cordova" "$DEST/java/$cordova"
    echo "fetched java $cordova"
fi
sources_txt java "$rn (npm pack; ReactAndroid/src/main/java; $(licence_of "$REACT_NATIVE"))" \
    "$cordova (npm pack; framework/; $(licence_of "$CORDOVA"))"

# --- C (Debian newlib-source: libc and libm; PyPI Brotli sdist: c/) ---
mkdir -p "$DEST/c"
if [ -d "$DEST/c/newlib-3.3.0" ]; then echo "have c newlib"; else
    deb_x "$(spec_of "$NEWLIB_DEB")" "$TMP/newlib-pkg" >/dev/null
    mkdir -p "$TMP/newlib-src" "$TMP/newlib"
    tar -xJf "$TMP"/newlib-pkg/usr/src/newlib/newlib-*.tar.xz -C "$TMP/newlib-src" --strip-components=1
    cp -r "$TMP/newlib-src/newlib/libc" "$TMP/newlib-src/newlib/libm" "$TMP/newlib-src/COPYING.NEWLIB" "$TMP/newlib/"
    cp "$TMP/newlib-pkg/usr/share/doc/newlib-source/copyright" "$TMP/newlib/debian-copyright"
    rm -rf "$TMP/newlib/libc/machine" "$TMP/newlib/libc/sys" "$TMP/newlib/libm/machine"
    place "$TMP/newlib" "$DEST/c/newlib-3.3.0"
    echo "fetched c newlib"
fi
brotli=$(spec_of "$BROTLI_SDIST")
if [ -d "$DEST/c/brotli-${brotli##*==}" ]; then echo "have c $brotli"; else
    mkdir -p "$TMP/brotli-src" "$TMP/brotli"
    tar -xzf "$(sdist "$brotli")" -C "$TMP/brotli-src" --strip-components=1
    cp -r "$TMP/brotli-src/c" "$TMP/brotli-src/LICENSE" "$TMP/brotli/"
    place "$TMP/brotli" "$DEST/c/brotli-${brotli##*==}"
    echo "fetched c $brotli"
fi
sources_txt c "$(spec_of "$NEWLIB_DEB") (Debian, dpkg -x; newlib/libc and newlib/libm without machine/ and sys/; $(licence_of "$NEWLIB_DEB"))" \
    "$brotli (PyPI sdist, pip download; c/; $(licence_of "$BROTLI_SDIST"))"

# --- C++ (Debian Boost headers and googletest; react-native's ReactCommon from npm) ---
mkdir -p "$DEST/cpp"
if [ -d "$DEST/cpp/boost-1.81.0" ]; then echo "have cpp boost"; else
    deb_x "$(spec_of "$BOOST_DEB")" "$TMP/boost-pkg" >/dev/null
    mkdir -p "$TMP/boost/boost"
    for lib in "${BOOST_LIBS[@]}"; do
        cp -r "$TMP/boost-pkg/usr/include/boost/$lib" "$TMP/boost/boost/"
        [ -f "$TMP/boost-pkg/usr/include/boost/$lib.hpp" ] && cp "$TMP/boost-pkg/usr/include/boost/$lib.hpp" "$TMP/boost/boost/"
    done
    cp "$TMP"/boost-pkg/usr/share/doc/libboost1.81-dev/copyright "$TMP/boost/debian-copyright"
    place "$TMP/boost" "$DEST/cpp/boost-1.81.0"
    echo "fetched cpp boost"
fi
if [ -d "$DEST/cpp/googletest-1.12.1" ]; then echo "have cpp googletest"; else
    deb_x "$(spec_of "$GTEST_DEB")" "$TMP/gtest-pkg" >/dev/null
    cp -r "$TMP/gtest-pkg/usr/src/googletest" "$TMP/gtest"
    cp "$TMP/gtest-pkg/usr/share/doc/googletest/copyright" "$TMP/gtest/debian-copyright"
    place "$TMP/gtest" "$DEST/cpp/googletest-1.12.1"
    echo "fetched cpp googletest"
fi
if [ -d "$DEST/cpp/$rn" ]; then echo "have cpp $rn"; else
    mkdir -p "$TMP/rn-cpp"
    tar -xzf "$(npm_tgz "$rn")" -C "$TMP/rn-cpp" --strip-components=1 package/LICENSE package/ReactCommon
    place "$TMP/rn-cpp" "$DEST/cpp/$rn"
    echo "fetched cpp $rn"
fi
sources_txt cpp "$(spec_of "$BOOST_DEB") (Debian, dpkg -x; boost/{$(IFS=,; echo "${BOOST_LIBS[*]}")}; $(licence_of "$BOOST_DEB"))" \
    "$(spec_of "$GTEST_DEB") (Debian, dpkg -x; /usr/src/googletest; $(licence_of "$GTEST_DEB"))" \
    "$rn (npm pack; ReactCommon/; $(licence_of "$REACT_NATIVE"))"

# --- Python (PyPI sdists of packages outside the training corpus) ---
mkdir -p "$DEST/python"
lines=()
for entry in "${PY_SDISTS[@]}"; do
    spec=$(spec_of "$entry")
    dir="$DEST/python/${spec%%==*}-${spec##*==}"
    lines+=("$spec (PyPI sdist, pip download; $(licence_of "$entry"))")
    if [ -d "$dir" ]; then echo "have python $spec"; continue; fi
    mkdir -p "$TMP/py-$spec"
    tar -xzf "$(sdist "$spec")" -C "$TMP/py-$spec" --strip-components=1
    place "$TMP/py-$spec" "$dir"
    echo "fetched python $spec"
done
sources_txt python "${lines[@]}"

count() {  # count LANGUAGE EXT...: files and bytes
    local lang=$1 expr=() ext
    shift
    for ext in "$@"; do expr+=(-o -name "*.$ext"); done
    find "$DEST/$lang" -type f \( "${expr[@]:1}" \) -printf '%s\n' | awk -v l="$lang" '{n++; b+=$1} END {printf "  %-11s %6d files %11d bytes\n", l, n, b}'
}
echo "sources in $DEST:"
count javascript js mjs cjs jsx
count typescript ts mts cts
count tsx tsx
count go go
count rust rs
count java java
count c c h
count cpp cc cpp cxx c++ hh hpp hxx h++ ipp cu
count python py pyi pyw
