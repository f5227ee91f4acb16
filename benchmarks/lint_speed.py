"""How fast `burnside lint` gets through a large Rust tree.

    python benchmarks/lint_speed.py /work/burn-src     # a real checkout
    python benchmarks/lint_speed.py TREE1 TREE2 ...    # several trees in one run
    python benchmarks/lint_speed.py                    # a generated ~380k-line tree

Prints lines/s, files/s, wall time (including importing burnside.lint), the
number of files actually parsed, and the findings per rule.
"""

from __future__ import annotations

import time

_START = time.perf_counter()

import argparse
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

_PLAIN = """\
/// A plain function with no optimizer in it.
pub fn scale_{i}(values: &mut [f32], factor: f32) {{
    for value in values.iter_mut() {{
        *value *= factor; // step over every element
    }}
}}
"""

_TRAINING = """\
pub fn train_{i}(mut model: Mlp, batches: Vec<Batch>) -> Mlp {{
    let mut optim = AdamConfig::new().init();
    for batch in batches {{
        let loss = model.forward(batch.x).mean();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(1e-3, model, grads);
    }}
    model
}}
"""


def generate(root: Path, lines: int = 380_000, files: int = 1700) -> None:
    """Roughly burn's shape: ~1700 files, ~5% of them with training code."""
    per_file = max(lines // files, 10)
    for n in range(files):
        directory = root / f"crate{n % 40}" / "src"
        directory.mkdir(parents=True, exist_ok=True)
        chunks, count, i = [], 0, 0
        while count < per_file:
            template = _TRAINING if (n % 20 == 0 and i == 0) else _PLAIN
            chunk = template.format(i=i)
            chunks.append(chunk)
            count += chunk.count("\n")
            i += 1
        (directory / f"m{n}.rs").write_text("".join(chunks))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="*", help="Rust trees (default: generate one in a temp dir)")
    parser.add_argument("--jobs", type=int, default=None, help="worker processes (default: up to 2)")
    args = parser.parse_args()

    temp = None
    if args.paths:
        paths = [Path(p) for p in args.paths]
        missing = [p for p in paths if not p.exists()]
        if missing:
            print(f"error: {missing[0]} does not exist", file=sys.stderr)
            return 2
        root = Path.cwd()
    else:
        temp = tempfile.mkdtemp(prefix="burnside-lint-speed-")
        root = Path(temp)
        paths = [root]
        generate(root)
    try:
        start = time.perf_counter()
        from burnside.lint import lint_paths, select_rules

        imported = time.perf_counter()
        report = lint_paths(paths, select_rules(), root=root, jobs=args.jobs)
        end = time.perf_counter()
    finally:
        if temp:
            shutil.rmtree(temp, ignore_errors=True)

    wall = end - _START if not temp else end - start
    print(f"trees:         {' '.join(args.paths) or '(generated)'}")
    print(f"files:         {report.files_seen} seen, {report.files_parsed} parsed, {len(report.skipped)} skipped")
    print(f"lines:         {report.lines}")
    print(f"import:        {imported - start:.3f} s")
    print(f"lint:          {end - imported:.3f} s")
    print(f"wall:          {wall:.3f} s (from interpreter start of this script, imports included)")
    print(f"lines/s:       {report.lines / wall:,.0f}")
    print(f"files/s:       {report.files_seen / wall:,.0f}")
    counts = Counter(f.rule for f in report.findings)
    print("findings:      " + (", ".join(f"{rule} {n}" for rule, n in sorted(counts.items())) or "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
