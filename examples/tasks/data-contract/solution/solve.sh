#!/bin/bash
# Reference solution: writes a dataset that meets the whole contract (20 math, 15 code, 15 prose records).
set -euo pipefail
python3 - <<'PY'
import json

records = []
for i in range(20):
    a, b = i + 3, 2 * i + 5
    records.append({"id": "math-%02d" % i, "domain": "math", "prompt": "What is %d multiplied by %d?" % (a, b), "answer": str(a * b)})
for i in range(15):
    records.append({"id": "code-%02d" % i, "domain": "code", "prompt": "Write a Python expression that adds %d to x." % i, "answer": "x + %d" % i})
for i in range(15):
    records.append({"id": "prose-%02d" % i, "domain": "prose", "prompt": "Write one sentence about the number %d." % i, "answer": "The number %d comes after %d." % (i, i - 1)})
with open("/workspace/dataset.jsonl", "w", encoding="utf-8") as f:
    for r in records:
        f.write(json.dumps(r) + "\n")
PY
