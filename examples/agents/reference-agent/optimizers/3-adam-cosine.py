"""Adam with a short linear warm-up and a cosine decay of the step size over the 300 training steps."""
import math

import numpy as np


class Optimizer:
    def __init__(self, shapes, lr=0.03, beta1=0.9, beta2=0.99, eps=1e-8, steps=300, warmup=15):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.steps, self.warmup = steps, warmup
        self.m = [np.zeros(s) for s in shapes]
        self.v = [np.zeros(s) for s in shapes]
        self.t = 0

    def step(self, params, grads):
        self.t += 1
        t = self.t
        schedule = min(1.0, t / self.warmup) * 0.5 * (1 + math.cos(math.pi * min(t, self.steps) / self.steps))
        out = []
        for i, (p, g) in enumerate(zip(params, grads)):
            self.m[i] = self.beta1 * self.m[i] + (1 - self.beta1) * g
            self.v[i] = self.beta2 * self.v[i] + (1 - self.beta2) * g * g
            m_hat = self.m[i] / (1 - self.beta1 ** t)
            v_hat = self.v[i] / (1 - self.beta2 ** t)
            out.append(p - self.lr * schedule * m_hat / (np.sqrt(v_hat) + self.eps))
        return out
