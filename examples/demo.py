"""`make demo`: the safe SQL server as a real stdio subprocess, driven by the official MCP client.

It lists the tools, answers an aggregate query, refuses a write, caps a long result with "more rows
exist", runs a report tool, lints the same server the way `mcpkit lint --stdio` checks any server,
and shows the audit log's last records.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile

import anyio

from mcpkit.sql.walkthrough import walkthrough


def main() -> None:
    print("== mcpkit sql serve --demo, through the official MCP client over stdio ==")
    with tempfile.NamedTemporaryFile("w+", prefix="mcpkit-demo-", suffix=".log", delete=False) as log:
        anyio.run(walkthrough, print, log)
        log.seek(0)
        records = [line for line in log if "mcpkit.calls" in line]
    print(f"\n== the server's operator log ({log.name}): one JSON record per call ==")
    print(records[0].rstrip() if records else "(no call records)")
    print("\n== mcpkit lint --stdio: would every client accept this server's tools? ==")
    command = f"{sys.executable} -m mcpkit sql serve --demo"
    lint = subprocess.run([sys.executable, "-m", "mcpkit", "lint", "--stdio", command], check=False)
    print("\n== mcpkit audit --tail 5: every call is on record, refusals included ==")
    subprocess.run([sys.executable, "-m", "mcpkit", "audit", "--tail", "5"], check=False)
    sys.exit(lint.returncode)


if __name__ == "__main__":
    main()
