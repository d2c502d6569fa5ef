"""Files written back by `infill --in-place` are the old or the new one, never a mix."""

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from celeris_complete.cli.safe_write import replace_file
from celeris_complete.errors import CelerisError

OLD = b"old line\n" * 200_000  # 1.8 MB: a write takes long enough to be interrupted inside it
NEW = b"new text!\n" * 180_000

WRITER = """
import sys
from pathlib import Path
from celeris_complete.cli.safe_write import replace_file
path = Path(sys.argv[1])
old, new = b"old line\\n" * 200_000, b"new text!\\n" * 180_000
print("ready", flush=True)
while True:
    current = path.read_bytes()
    replace_file(path, current, new if current == old else old, path.with_name(path.name + "~"))
"""


def test_a_changed_file_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "a.py"
    path.write_bytes(b"edited by the user meanwhile\n")
    with pytest.raises(CelerisError, match="changed on disk"):
        replace_file(path, b"what was read\n", b"completed\n", tmp_path / "a.py~")
    assert path.read_bytes() == b"edited by the user meanwhile\n" and not (tmp_path / "a.py~").exists()


def test_killed_at_random_points_the_file_is_old_or_new(tmp_path):
    path = tmp_path / "big.py"
    path.write_bytes(OLD)
    rng = random.Random(0)
    for _ in range(12):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE)
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.0, 0.15))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert path.read_bytes() in (OLD, NEW)
        backup = path.with_name("big.py~")
        assert not backup.exists() or backup.read_bytes() in (OLD, NEW)
