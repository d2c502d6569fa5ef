"""CPU the language server uses while nobody types, with a workspace folder (default: this repository,
its virtual environment included): its seconds of CPU over ``--seconds`` once its index is built.

    .venv/bin/python scripts/measure_server_idle_cpu.py [--folder .] [--seconds 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path

from celeris_complete.bench.lsp import start_server, stop_server


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


async def main(folder: Path, seconds: float) -> None:
    client, ready_s, _ = await start_server({}, folder, wait_for_index=True)
    pid = client._server.pid
    await asyncio.sleep(2.0)  # the observer starts after the index
    before = cpu_seconds(pid)
    await asyncio.sleep(seconds)
    used = cpu_seconds(pid) - before
    await stop_server(client)
    print(f"workspace {folder.resolve()}: ready in {ready_s:.1f} s; idle {seconds:g} s used {used:.2f} s of CPU")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--folder", type=Path, default=Path("."))
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    asyncio.run(main(args.folder, args.seconds))
