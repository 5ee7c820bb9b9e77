#!/usr/bin/env bash
# Regenerates proto/gen/ from scratch (offline: buf and protoc-gen-es come from node_modules).
set -euo pipefail
cd "$(dirname "$0")"
../node_modules/.bin/buf lint
../node_modules/.bin/buf generate
