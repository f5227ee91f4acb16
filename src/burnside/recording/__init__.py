"""The record stage, PyTorch side: a model's training loop, forward passes or generation written as a trace, and
their float64 reference.

- `loop.py`: the training loop behind `burnside.torch.record` (hooks, layer inputs, module settings, statistics);
- `forward.py`: forward passes (`record_forward`); `generate.py`: a greedy decode loop (`record_generate`);
- `loss.py`: the loss call found inside a loss function, and its terms;
- `optim_state.py`: an optimizer's settings and state under the trace's slot names;
- `reference.py`: the float64 reference, the same loops re-run in float64, and burn's-arithmetic variants.

Users import `burnside.torch` and `burnside.reference` (the documented API, at the package root); nothing here is
imported by the package itself on start-up.
"""
