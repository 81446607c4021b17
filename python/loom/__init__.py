"""Python side of Loom: capturing PyTorch training steps, and the one command that trains them.

``python -m loom.capture`` turns a model file into a joint forward/backward
``torch.export`` archive plus batches, eager reference results and the run
configuration (:mod:`loom.capture`); ``python -m loom run`` goes from a
model file to a step trained on N ranks through every tool (:mod:`loom.run`).
"""
