#!/usr/bin/env bash
# Builds the extension and packages it as a .vsix with @vscode/vsce (offline: everything comes
# from node_modules). Usage: ./package.sh [OUT.vsix]   (default: infill-<version>.vsix here)
set -euo pipefail
cd "$(dirname "$0")"
if [[ ! -d node_modules || package-lock.json -nt node_modules ]]; then
  npm ci --no-audit --no-fund
fi
version="$(node -p 'require("./package.json").version')"
out="${1:-infill-$version.vsix}"
# vsce runs the vscode:prepublish script (tsc) first; node_modules' production deps are bundled.
npx --no-install vsce package --allow-missing-repository --skip-license --out "$out"
echo "packaged: $(cd "$(dirname "$out")" && pwd)/$(basename "$out")"
