"""A layer's settings measured from its input and output on each side: the formulas of the layers burnside knows
(`norms`, `conv`, `pool`, `recurrent`), fitted to each side's tensors (`layer_fit`), into a `LayerForensics`
(`settings`). compare reads them to judge a row within the noise band (`burnside.compare.overruled_noise`),
forensics at the first divergence."""
