#!/bin/bash
# Reference solution: an exact least-squares fit.
set -euo pipefail
cat > /workspace/fit.py <<'PY'
"""Print the least-squares `slope intercept` of the x,y points read from stdin."""
import sys


def main():
    xs, ys = [], []
    for line in sys.stdin:
        if line.strip():
            x, y = line.split(",")
            xs.append(float(x))
            ys.append(float(y))
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    slope = sxy / sxx
    print(repr(slope), repr(my - slope * mx))


if __name__ == "__main__":
    main()
PY
