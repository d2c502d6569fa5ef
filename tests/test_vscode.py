"""The VS Code extension in a real VS Code (code-server), driven by playwright-core in Debian's chromium:
install the .vsix, open a Python file, type, see the ghost text, accept it with Tab; rename a parameter in
another file, see the next edit where it applies and make it with Tab, Tab; then, with a second
tier configured and every local answer unsure, see the tier's answer come up and the status bar say so."""

import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.second_tier import SecondTier

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
    tier, url = SecondTier.start(delay_s=3.0)  # well after VS Code's own requests for the keystroke
    try:
        proc = subprocess.run(
            [str(NODE), str(VSCODE / "e2e" / "run.mjs"), str(vsix), sys.executable, str(shipped_model_dir), str(out),
             url, SecondTier.TEXT],
            capture_output=True,
            text=True,
            timeout=600,
        )  # fmt: skip
    finally:
        tier.shutdown()
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads((out / "result.json").read_text())
    assert result["accepted"] and result["ghost"]
    assert result["line"] == "    return t" + result["ghost"]
    assert result["status"].strip().startswith("celeris")  # the status bar item shows the last latency
    # The next edit: the parameter's uses struck through, then made with Tab, Tab.
    assert result["nextEditStruck"] == "size|size", result  # both lines below use it: one suggestion
    assert {"    print(factor)", "    return factor * 2"} <= set(result["nextEditLines"]), result
    assert result["tierGhost"] == SecondTier.TEXT, result  # the second tier's answer, shown when it came
    assert result["tierStatus"].strip().endswith("tier 2"), result
