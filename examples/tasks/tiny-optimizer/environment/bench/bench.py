"""Public benchmark of tiny-optimizer: the same problem family and training loop as the hidden scorer, on public
seeds, with the optimizer imported in this process. Usage: python3 /opt/tiny-optimizer/bench.py [optimizer.py]

Prints the validation loss of each size and their mean (lower is better). The Judge scores hidden data from the
same family, runs your optimizer in a separate unprivileged process, and counts a failed size (crash, wrong shapes,
non-finite numbers, over a minute) as the loss at the initial parameters.
"""
import importlib.util
import sys
import time

import numpy as np

SIZES = [("small", 4, 8), ("medium", 16, 32), ("large", 32, 64)]
STEPS = 300
BATCH = 64
N_TRAIN = 2048
N_VAL = 1024
SEED = 1234  # public
VAL_SEED = 5678  # public


def problem(d, h, seed, val_seed):
    r = np.random.default_rng(seed)
    scales = np.logspace(-1, 1, d)
    r.shuffle(scales)
    w1 = r.normal(0, 1 / np.sqrt(d), (d, h))
    b1 = r.normal(0, 0.5, h)
    w2 = r.normal(0, 1 / np.sqrt(h), (h, 1))
    b2 = r.normal(0, 0.1, 1)

    def draw(rng, n):
        z = rng.normal(0, 1, (n, d))
        y = np.tanh(z @ w1 + b1) @ w2 + b2 + rng.normal(0, 0.05, (n, 1))
        return z * scales, y

    x_train, y_train = draw(r, N_TRAIN)
    x_val, y_val = draw(np.random.default_rng(val_seed), N_VAL)
    ri = np.random.default_rng(seed + 7)
    params = [ri.normal(0, 1 / np.sqrt(d), (d, h)), np.zeros(h), ri.normal(0, 1 / np.sqrt(h), (h, 1)), np.zeros(1)]
    return x_train, y_train, x_val, y_val, params


def loss_and_grads(params, x, y):
    w1, b1, w2, b2 = params
    hidden = np.tanh(x @ w1 + b1)
    err = hidden @ w2 + b2 - y
    loss = 0.5 * float(np.mean(err ** 2))
    g_out = err / len(x)
    g_hidden = (g_out @ w2.T) * (1 - hidden ** 2)
    return loss, [x.T @ g_hidden, g_hidden.sum(0), hidden.T @ g_out, g_out.sum(0)]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "/workspace/optimizer.py"
    sys.dont_write_bytecode = True  # no __pycache__ beside optimizer.py: only optimizer.py may be in the workspace
    spec = importlib.util.spec_from_file_location("optimizer", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    losses = []
    for i, (name, d, h) in enumerate(SIZES):
        x_train, y_train, x_val, y_val, params = problem(d, h, SEED + 1000 * i, VAL_SEED + 1000 * i)
        initial, _ = loss_and_grads(params, x_val, y_val)
        opt = module.Optimizer([p.shape for p in params])
        batches = np.random.default_rng(SEED + 1000 * i + 3)
        started = time.monotonic()
        for _ in range(STEPS):
            idx = batches.integers(0, N_TRAIN, BATCH)
            _, grads = loss_and_grads(params, x_train[idx], y_train[idx])
            params = [np.asarray(p, dtype=np.float64) for p in opt.step(params, grads)]
        final, _ = loss_and_grads(params, x_val, y_val)
        if not np.isfinite(final) or final > initial:
            print("size %-6s: final loss %r is not below the initial %.6f; the Judge would score %.6f" % (name, final, initial, initial))
            final = initial
        print("size %-6s (d=%d, h=%d): initial val loss %.6f, final %.6f, %.2f s" % (name, d, h, initial, final, time.monotonic() - started))
        losses.append(final)
    print("mean val loss (lower is better): %.6f" % float(np.mean(losses)))


if __name__ == "__main__":
    main()
