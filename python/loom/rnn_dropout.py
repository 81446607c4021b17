"""The dropout between stacked RNN layers, which torch 2.9's traced RNNs drop.

``nn.LSTM``, ``nn.GRU`` and ``nn.RNN`` with ``num_layers > 1`` and
``dropout=p`` apply dropout to each layer's output but the last's while
training: ATen's kernels do (``at::dropout`` between the layers). A traced
step has no such kernel: export replaces ``aten.lstm`` / ``aten.gru`` /
``aten.rnn_tanh`` / ``aten.rnn_relu`` by torch's Python decompositions,
whose shared layer loop (``torch._decomp.decompositions._rnn_helper``)
sets the rate to 0 by a condition no layer meets (``num_layers < i - 1``).
The step then trained another model than eager, silently (the first loss
of a 2-layer LSTM language model with ``dropout=0.2`` was 7.9e-4 off).

:func:`between_layers` runs that loop one layer at a time with the
dropout eager applies between them (``torch.dropout(x, p, train=True)``,
the op ``nn.Dropout`` traces to), for as long as capture traces.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
import torch._decomp.decompositions as decompositions


@contextlib.contextmanager
def between_layers() -> Iterator[None]:
    one_layer_loop = decompositions._rnn_helper

    def layers(input, hidden, params, has_biases, num_layers, dropout, train, bidirectional,
               batch_first, layer_fn):
        if not (dropout and train and num_layers > 1):
            return one_layer_loop(input, hidden, params, has_biases, num_layers, dropout, train,
                                  bidirectional, batch_first, layer_fn)
        directions = 2 if bidirectional else 1
        x = input.transpose(0, 1) if batch_first else input
        finals = []
        for layer in range(num_layers):
            mine = slice(layer * directions, (layer + 1) * directions)
            x, last = one_layer_loop(x, hidden[mine], params[mine], has_biases, 1, 0.0, train,
                                     bidirectional, False, layer_fn)
            finals.extend(last)
            if layer < num_layers - 1:
                x = torch.dropout(x, dropout, train=True)
        return (x.transpose(0, 1) if batch_first else x), finals

    decompositions._rnn_helper = layers
    try:
        yield
    finally:
        decompositions._rnn_helper = one_layer_loop
