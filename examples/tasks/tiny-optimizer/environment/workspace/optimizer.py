"""The optimizer the trainer calls once per step. Today: plain stochastic gradient descent."""


class Optimizer:
    def __init__(self, shapes):
        # shapes: one tuple per parameter array (first-layer weights and bias, second-layer weights and bias).
        self.lr = 0.01

    def step(self, params, grads):
        """Return the new parameters: a list of arrays of the same shapes as `params`."""
        return [p - self.lr * g for p, g in zip(params, grads)]
