#!/bin/bash
# Reference solution: the starting tiled kernel, judged as it is (the task's README gives its TFLOP/s on an H100/H200).
# A stronger reference (tensor cores through mma.h) is kernels/wmma.cu in cuda/check/.
set -euo pipefail
echo tiled > /workspace/JUDGE_VERSION
