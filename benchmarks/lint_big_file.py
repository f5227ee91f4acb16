"""How long `burnside lint` takes on one very large generated Rust file.

    python benchmarks/lint_big_file.py                    # 50 MB, 1 function in 50 trains
    python benchmarks/lint_big_file.py --mb 5 --every 1   # every function a training step

The file is many small functions; every `--every`-th one steps an optimizer
and discards the result (a BS001 and, in a loop, a BS003). The whole command
runs through a subprocess (`burnside lint --format json`), as a user would
run it; the script prints the file size, the wall time and the findings, and
checks that every planted step was found.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

_PLAIN = """\
/// A plain function with no optimizer in it.
pub fn scale_{i}(values: &mut [f32], factor: f32) -> f32 {{
    let mut total = 0.0;
    for value in values.iter_mut() {{
        *value *= factor; // step over every element
        total += *value;
    }}
    total
}}
"""

_TRAINING = """\
pub fn train_{i}(model: Mlp, batches: Vec<Batch>, optim: &mut Optim) {{
    for batch in batches {{
        let loss = model.forward(batch.x).mean();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        optim.step(1e-3, model.clone(), grads);
    }}
}}
"""


def generate(path: Path, megabytes: float, every: int) -> int:
    """Write the file; returns how many discarded steps were planted."""
    target = int(megabytes * 1_000_000)
    planted = 0
    written = 0
    i = 0
    with open(path, "w") as handle:
        while written < target:
            if i % every == 0:
                chunk = _TRAINING.format(i=i)
                planted += 1
            else:
                chunk = _PLAIN.format(i=i)
            handle.write(chunk)
            written += len(chunk)
            i += 1
    return planted


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=50.0, help="file size in MB (default 50)")
    parser.add_argument("--every", type=int, default=50, help="one training function in this many (default 50)")
    args = parser.parse_args()
    if args.mb <= 0 or args.every < 1:
        print("error: --mb must be > 0 and --every >= 1", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="burnside-lint-big-") as temp:
        path = Path(temp) / "big.rs"
        planted = generate(path, args.mb, args.every)
        command = [sys.executable, "-c", "from burnside.cli import main; main()", "lint", str(path), "--format", "json"]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, cwd=temp)
        wall = time.perf_counter() - start
        size = path.stat().st_size
    if done.returncode not in (0, 1):
        print(done.stderr, file=sys.stderr)
        return 2
    findings = json.loads(done.stdout)
    counts = Counter(f["rule"] for f in findings)
    found = counts.get("BS001", 0)
    print(f"file:          {size / 1e6:.1f} MB, {planted:,} training functions (1 in {args.every})")
    print(f"wall:          {wall:.2f} s for `burnside lint --format json` (process start to exit)")
    print(f"MB/s:          {size / 1e6 / wall:.1f}")
    print("findings:      " + (", ".join(f"{rule} {n:,}" for rule, n in sorted(counts.items())) or "none"))
    if found != planted:
        print(f"error: {planted} discarded steps planted, {found} found", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
