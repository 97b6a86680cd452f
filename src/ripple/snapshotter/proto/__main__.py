"""Regenerate `snapshotter_pb2.py` and `.pyi` from `snapshotter.proto` (needs grpcio-tools,
a development dependency): `python -m ripple.snapshotter.proto [OUTPUT_ROOT]`."""

from __future__ import annotations

import sys
from pathlib import Path

PROTO = "ripple/snapshotter/proto/snapshotter.proto"
SOURCE_ROOT = Path(__file__).resolve().parents[3]


def generate(output_root: Path) -> None:
    """Write the generated modules under `output_root` (the `src` directory by default)."""
    from grpc_tools import protoc  # a development dependency only

    output_root.mkdir(parents=True, exist_ok=True)
    code = protoc.main(
        [
            "protoc",
            f"-I{SOURCE_ROOT}",
            f"--python_out={output_root}",
            f"--pyi_out={output_root}",
            PROTO,
        ]
    )
    if code != 0:
        raise SystemExit(f"protoc failed on {PROTO} (exit {code})")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCE_ROOT)
