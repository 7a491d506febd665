#!/bin/bash
# Reference solution (the oracle `assay task check` judges): the WMMA tensor-core kernel of solution/kernels/, which
# should beat the starting kernel's CUDA cores by a wide margin on any tensor-core GPU.
set -euo pipefail
cp /solution/kernels/wmma.cu /workspace/kernels/wmma.cu
echo wmma > /workspace/JUDGE_VERSION
