"""Heavy-ball momentum: a running sum of gradients smooths the noise and speeds up the low-curvature directions."""
import numpy as np


class Optimizer:
    def __init__(self, shapes, lr=0.01, momentum=0.9):
        self.lr, self.momentum = lr, momentum
        self.velocity = [np.zeros(s) for s in shapes]

    def step(self, params, grads):
        out = []
        for i, (p, g) in enumerate(zip(params, grads)):
            self.velocity[i] = self.momentum * self.velocity[i] + g
            out.append(p - self.lr * self.velocity[i])
        return out
