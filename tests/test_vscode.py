"""The VS Code extension in a real VS Code (code-server), driven by playwright-core in Debian's chromium:
install the .vsix, open a Python file, type, see the ghost text, accept it with Tab."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO

VSCODE = REPO / "editor_plugins" / "vscode"
NODE = REPO / ".venv" / "node-bin" / "node"


def test_ghost_text_in_vscode(shipped_model_dir, tmp_path):
    vsix = VSCODE / "celeris-complete.vsix"
    for needed, how in [
        (vsix, "make test-vscode"),
        (VSCODE / "e2e" / "node_modules" / "code-server", "make e2e-setup"),
        (NODE, "scripts/npm"),
    ]:
        if not needed.exists():
            pytest.fail(f"{needed} is missing: `{how}` makes it (`make test` runs both)")
    out = tmp_path / "out"
    proc = subprocess.run(
        [str(NODE), str(VSCODE / "e2e" / "run.mjs"), str(vsix), sys.executable, str(shipped_model_dir), str(out)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((out / "result.json").read_text())
    assert result["accepted"] and result["ghost"]
    assert result["line"] == "    return t" + result["ghost"]
    assert result["status"].strip().startswith("celeris")  # the status bar item shows the last latency
