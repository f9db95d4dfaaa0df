"""`mcpkit egress check`: verdicts, reasons and exit codes (0 allowed, 3 denied, 2 usage)."""

from __future__ import annotations

import pytest

from mcpkit.cli import main
from tests.helpers import run_mcpkit


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["egress", "check", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    ("argv", "reason"),
    [
        (["http://127.0.0.1/"], "loopback"),
        (["http://2130706433/"], "loopback"),
        (["http://[::ffff:169.254.169.254]/"], "link_local"),
        (["http://user@example.test/"], "userinfo"),
        (["file:///etc/passwd"], "scheme"),
        (["http://api.test/", "--resolve", "api.test=93.184.215.14,10.1.2.3"], "private"),
        (
            ["http://evil-api.test/", "--allow", "api.test", "--resolve", "evil-api.test=93.184.215.14"],
            "not_allowlisted",
        ),
        (["http://api.test:8080/", "--resolve", "api.test=93.184.215.14"], "port"),
    ],
)
def test_denied_exits_3(capsys: pytest.CaptureFixture[str], argv: list[str], reason: str) -> None:
    code, out, _ = run(capsys, *argv)
    assert code == 3
    assert out.startswith(f"DENIED ({reason})")


def test_denied_shows_the_operator_the_address(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "http://metadata.test/", "--resolve", "metadata.test=169.254.169.254")
    assert code == 3
    assert "169.254.169.254" in out
    assert "link_local" in out


@pytest.mark.parametrize(
    "argv",
    [
        ["http://api.test/", "--resolve", "api.test=93.184.215.14"],
        ["https://a.api.test/x", "--allow", "api.test", "--resolve", "a.api.test=2606:4700::1"],
        ["http://api.test:8443/", "--allow", "api.test:8443", "--resolve", "api.test=93.184.215.14"],
        ["http://93.184.215.14/"],
    ],
)
def test_allowed_exits_0(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, out, _ = run(capsys, *argv)
    assert code == 0, out
    assert out.startswith("ALLOWED (ok)")
    assert "url: " in out


@pytest.mark.parametrize(
    "argv",
    [
        ["http://api.test/", "--resolve", "api.test"],
        ["http://api.test/", "--resolve", "api.test=not-an-ip"],
        ["http://api.test/", "--allow", "bad host!"],
        ["http://api.test/", "--resolve", "=1.2.3.4"],
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2
    assert "mcpkit egress check" in err


def test_argparse_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["egress", "check"])
    assert caught.value.code == 2
    assert main(["egress"]) == 2


def test_command_line_entry_point() -> None:
    done = run_mcpkit("egress", "check", "http://[::1]/")
    assert done.returncode == 3, done.stderr
    assert "DENIED (loopback)" in done.stdout
