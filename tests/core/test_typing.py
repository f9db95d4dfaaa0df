"""The public API type-checks as documented: mypy (strict) on a small user file finds exactly the
mistakes marked `# expect-error` and nothing else."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

CASE = Path(__file__).parent / "typing_cases" / "handler_for_another_model.py"


def test_mypy_catches_a_handler_for_another_model_and_accepts_the_rest() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent", str(CASE)],
        capture_output=True,
        text=True,
        check=False,
    )
    flagged = {int(m) for m in re.findall(rf"{re.escape(CASE.name)}:(\d+): error", done.stdout)}
    lines = CASE.read_text(encoding="utf-8").splitlines()
    expected = {i for i, line in enumerate(lines, 1) if line.endswith("# expect-error")}
    assert flagged == expected, done.stdout
    assert "RefundIn" in done.stdout  # the error names the model the handler was written for
