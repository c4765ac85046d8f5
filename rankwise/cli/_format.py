"""How the commands print: aligned tables, local times and byte sizes."""

from __future__ import annotations

import time


def table(rows: list[list[str]], header: list[str]) -> str:
    """Columns padded to their widest cell, two spaces apart, no trailing blanks."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip()]
    for row in rows:
        lines.append("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
    return "\n".join(lines)


def ago(t: float | None) -> str:
    """A time as local ``YYYY-mm-dd HH:MM:SS``; "-" for None."""
    if t is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def when(t: float | None) -> str:
    """As ``ago``, and "-" for 0 too (an artifact version with no time)."""
    return ago(t) if t else "-"


def size(n: int) -> str:
    """Bytes in binary units, three significant digits: 21,400 -> "20.9 KiB", as the
    dashboard's ``fmtBytes`` (ui/src/lib/system.js) writes them."""
    a, unit = float(abs(n)), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        if a < 1024:
            break
        a, unit = a / 1024, bigger
    if unit == "B":
        return f"{n} B"
    r = float(f"{a:.3g}")
    return f"{'-' if n < 0 else ''}{r:.{2 if r < 10 else 1 if r < 100 else 0}f} {unit}"
