"""What the execution identity holds that a reader must not: one finding each, and how to remove it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Finding", "merge_findings"]


@dataclass(frozen=True)
class Finding:
    """One thing the execution identity can do that a reader must not, and how to take it away.

    `opt_in` names the `--allow` value that accepts it (with a warning), where a careful operator
    may want it; None: it must be removed.
    """

    code: str
    message: str
    fix: str
    opt_in: str | None = None

    def line(self) -> str:
        """One line for the operator: what, then the SQL that removes it."""
        accept = f" (or --allow {self.opt_in})" if self.opt_in else ""
        return f"{self.message}: {self.fix}{accept}"


def merge_findings(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per distinct fix, in first-seen order: what one statement removes is told on one
    line (two routes to one function printed the same REVOKE twice).

    >>> a = Finding("x", "operator + calls f", "REVOKE EXECUTE ON FUNCTION f() FROM PUBLIC")
    >>> b = Finding("y", "aggregate g calls f", a.fix)
    >>> [f.line() for f in merge_findings([a, b])]
    ['operator + calls f; aggregate g calls f: REVOKE EXECUTE ON FUNCTION f() FROM PUBLIC']
    """
    groups: dict[str, list[Finding]] = {}
    for finding in findings:
        groups.setdefault(finding.fix, []).append(finding)
    merged = []
    for fix, group in groups.items():
        if len(group) == 1:
            merged.append(group[0])
            continue
        opt_ins = {f.opt_in for f in group}
        message = "; ".join(dict.fromkeys(f.message for f in group))
        merged.append(Finding(group[0].code, message, fix, opt_ins.pop() if len(opt_ins) == 1 else None))
    return merged
