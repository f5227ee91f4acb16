"""What a killed port leaves beside its output is removed: the in-memory writer's `.tmp` and the streaming
writer's `.partial` (burnside-trace's two temporary names), of that process only."""

from __future__ import annotations

from burnside.burn.binary import remove_temporaries


def test_a_killed_ports_temporary_files_are_removed_and_no_others(tmp_path):
    out = tmp_path / "b[1].safetensors"  # a glob character in the name is matched as itself
    mine = [tmp_path / ".b[1].safetensors.4242.tmp", tmp_path / ".b[1].safetensors.4242.0123456789abcdef.partial"]
    others = [tmp_path / ".b[1].safetensors.777.0123456789abcdef.partial", tmp_path / "b1.safetensors",
              tmp_path / ".c.safetensors.4242.0123456789abcdef.partial"]
    for path in mine + others:
        path.write_bytes(b"x")
    remove_temporaries([out], 4242)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in others)
