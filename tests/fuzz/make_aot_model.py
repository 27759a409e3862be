"""Writes the model fuzz_aot drives: `python3 make_aot_model.py OUT.so`.

Two inputs of different dtypes and ranks (a float32 batch, an int64 index
vector) and two outputs (a float32 matrix, a float32 scalar), so that every
argument check of ember_model_run has something to check.
"""

import sys

import ember


class Model(ember.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = ember.nn.Linear(8, 3)

    def forward(self, x, idx):
        y = ember.nn.functional.softmax(self.linear(x), dim=-1)
        return y, y.gather(1, idx.unsqueeze(1)).sum()


def write(path):
    ember.manual_seed(0)
    return ember.aot.compile(Model(), (ember.randn(4, 8), ember.tensor([0, 2, 1, 0])), path)


if __name__ == "__main__":
    write(sys.argv[1])
