"""Python side of Loom: capturing PyTorch training steps for the compiler.

``python -m loom.capture`` turns a model file into a joint forward/backward
``torch.export`` archive plus batches and eager reference results; see
:mod:`loom.capture`.
"""
