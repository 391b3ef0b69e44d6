#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""Render the JSON-RPC API schema (backend/daemon/control/rpc_api.json) as Markdown.

usage: gen-api-doc.py [SCHEMA]     (writes to stdout; the README pastes it)
"""
import json
import sys
from pathlib import Path

DEFAULT = Path(__file__).resolve().parent.parent / "backend" / "daemon" / "control" / "rpc_api.json"


def cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def param_text(name, spec) -> str:
    s = f"`{name}` {spec['type']}"
    s += " (required)" if spec.get("required") else ""
    if "enum" in spec:
        s += " one of " + ", ".join(f"`{json.dumps(v)}`" for v in spec["enum"])
    if "default" in spec:
        s += f", default `{json.dumps(spec['default'])}`"
    if spec.get("doc"):
        s += f": {spec['doc']}"
    return s


def render(api) -> str:
    errors = api["errors"]
    out = [f"API {api['api']}. {api.get('doc', '')}",
           "", "| Method | Params | Result | Errors |", "|---|---|---|---|"]
    for name, m in api["methods"].items():
        params = "<br>".join(param_text(p, s) for p, s in m["params"].items()) or "none"
        result = "<br>".join(f"`{k}`: {v}" for k, v in m["result"].items()) or "`{}`"
        errs = ", ".join(f"{errors[e]['code']} {e}" for e in m.get("errors", []))
        out.append(f"| `{name}` — {cell(m.get('summary', ''))} | {cell(params)} | "
                   f"{cell(result)} | {cell(errs)} |")
    out += ["", "| Code | Name | Meaning |", "|---|---|---|"]
    for name, e in sorted(errors.items(), key=lambda kv: -kv[1]["code"]):
        out.append(f"| {e['code']} | `{name}` | {cell(e['doc'])} |")
    return "\n".join(out) + "\n"


def main() -> int:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    try:
        api = json.loads(path.read_text())
        sys.stdout.write(render(api))
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"gen-api-doc: {path}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
