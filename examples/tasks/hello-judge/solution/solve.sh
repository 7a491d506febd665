#!/bin/bash
# Reference solution: makes every hidden check pass.
set -euo pipefail
cat > /workspace/hello.py <<'PY'
def greet(name):
    """Return the greeting for name."""
    return f"Hello, {name}!"
PY
