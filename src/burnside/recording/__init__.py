"""The record stage, PyTorch side: a model's training loop, forward passes or generation written as a trace, and
their float64 reference.

- `loop.py`: the training loop behind `burnside.torch.record`, run as its `LoopSettings` say;
- `forward.py`: forward passes (`record_forward`); `generate.py`: a greedy decode loop (`record_generate`);
- `hooks.py`: the module hooks that record layer inputs and activations, and the modules' settings;
- `model.py`: the model's checks, tied parameters, constant buffers, outputs and dropout switches;
- `statistics.py`: which tensors are recorded as statistics only (``full_steps``, ``layer_statistics``);
- `loss.py`: the loss call found inside a loss function, and its terms;
- `optim_state.py`: an optimizer's settings and state under the trace's slot names;
- `reference.py`: the float64 reference, the same loops re-run in float64, and burn's-arithmetic variants;
- `float64.py`: what the float64 re-run keeps of the float32 run (`Float32Constants`) and its loss widened.

Users import `burnside.torch` and `burnside.reference` (the documented API, at the package root); nothing here is
imported by the package itself on start-up.
"""
