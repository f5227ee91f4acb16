"""Benchmark shared builds: several burnside processes, from two checkouts of one port, building and
running it at the same time in the one shared target directory (issue: reliability, shared builds).

Two copies of a port made by `burnside new` (same crate name, different sources: each prints its own
word) are built and run by 4 processes at once, 2 per copy, each taking 3 turns (build, run), as
`burnside check` does (`build(..., reuse=True)`). It prints the wall time, how many of the 12 builds
ran cargo and how many of those compiled the port again, and fails (exit 1) if any process ran a
binary of the other copy's sources. Then the same with reuse off, for comparison: every turn after
the other copy's build compiles again.

    python benchmarks/shared_builds.py        # needs the burn build `burnside run a1` made
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from burnside.burn.locate import target_dir
from burnside.burn.scaffold import new_port

_TURNS = """
import json, sys
from pathlib import Path
from burnside.burn.binary import run_binary
from burnside.burn.cargo import build
copy, word, reuse = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
for _ in range(3):
    built = build(copy, bins=["port"], reuse=reuse)
    seen = run_binary(built.executables["port"], ["--word"]).stdout.strip()
    print(json.dumps({"word": seen, "cargo": built.artifacts > 0, "compiled": "port" in built.rebuilt}), flush=True)
"""

_MAIN = 'fn main() {{ if std::env::args().any(|a| a == "--word") {{ println!("{word}"); }} }}\n'


def run(copies: list[tuple[Path, str]], reuse: bool) -> tuple[float, list[dict], list[str]]:
    start = time.perf_counter()
    procs = [(word, subprocess.Popen([sys.executable, "-c", _TURNS, str(copy), word, "1" if reuse else "0"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
             for copy, word in copies for _ in range(2)]
    turns, wrong = [], []
    for word, proc in procs:
        out, err = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            sys.exit(f"a process failed:\n{err[-2000:]}")
        for line in out.splitlines():
            turn = json.loads(line)
            turns.append(turn)
            if turn["word"] != word:
                wrong.append(f"a process of copy {word} ran copy {turn['word']}'s binary")
    return time.perf_counter() - start, turns, wrong


def main() -> None:
    if not (target_dir() / "release").is_dir():
        sys.exit(f"{target_dir()}: no release build here; run `burnside run a1` first")
    with tempfile.TemporaryDirectory(prefix="burnside-shared-builds-") as tmp:
        copies = []
        for word in ("one", "two"):
            port = new_port("port", Path(tmp) / word)
            (port / "src" / "main.rs").write_text(_MAIN.format(word=word))
            copies.append((port, word))
        print(f"{'reuse':<6} {'wall':>7}  {'builds':>6}  {'ran cargo':>9}  {'compiled':>8}")
        failed = []
        for reuse in (True, False):
            wall, turns, wrong = run(copies, reuse)
            failed += wrong
            print(f"{'on' if reuse else 'off':<6} {wall:>5.1f} s  {len(turns):>6}  {sum(t['cargo'] for t in turns):>9}  "
                  f"{sum(t['compiled'] for t in turns):>8}")
    if failed:
        sys.exit("; ".join(failed))


if __name__ == "__main__":
    main()
