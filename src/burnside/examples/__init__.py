"""Worked examples beyond A1, each a PyTorch model recorded here and a burn port in rust/.

Each module has ``record_torch(path, *, steps) -> Path`` (deterministic weights and data, CPU)
and ``BURN_BIN``, the port's binary in the crate of the same name under rust/, which follows
the `burnside check` contract (``BIN --init INIT -o OUT --steps N``).
"""
