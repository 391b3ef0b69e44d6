# SPDX-License-Identifier: BSD-3-Clause
"""Measurements shown in pytest's terminal summary (the CI log).

Tests that compute a figure worth quoting (a rate, a share,
a latency against its bound) hand it to a Summary; the conftest of their
directory writes it out in its pytest_terminal_summary hook, one section
per directory. Two shapes:
  - line(text): one free-form line ("label: value unit", tests/vm);
  - row(table, col=value, ...): a row of a named table; columns in the
    order first seen, so a test puts each bound/threshold column right
    beside the value it limits (tests/policy).
Rows are kept in the order recorded (one pytest process, no xdist: the
suite runs serially, scripts/test.sh). Values are recorded before a test
asserts on them, so a failing run shows the value that failed too.
"""


def fmt(v):
    """Compact text of one cell: floats to 4 significant digits."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)):
        return "/".join(fmt(x) for x in v)
    return str(v)


class Summary:
    def __init__(self, title):
        self.title = title
        self.lines = []
        self.tables = {}            # name -> (columns, rows), insertion ordered

    def line(self, text):
        self.lines.append(text)

    def row(self, table, **cols):
        columns, rows = self.tables.setdefault(table, ([], []))
        columns.extend(c for c in cols if c not in columns)
        rows.append({c: fmt(v) for c, v in cols.items()})

    def render(self):
        """The section's lines (without the title)."""
        out = list(self.lines)
        for name, (columns, rows) in self.tables.items():
            width = {c: max(len(c), *(len(r.get(c, "-")) for r in rows)) for c in columns}
            if out:
                out.append("")
            out.append(f"{name}:")
            out.append("  " + "  ".join(c.ljust(width[c]) for c in columns).rstrip())
            for r in rows:
                out.append("  " + "  ".join(r.get(c, "-").ljust(width[c])
                                            for c in columns).rstrip())
        return out

    def write(self, terminalreporter):
        """pytest_terminal_summary body: the section, when anything was recorded."""
        if not self.lines and not self.tables:
            return
        terminalreporter.section(self.title)
        for ln in self.render():
            terminalreporter.write_line(ln)
