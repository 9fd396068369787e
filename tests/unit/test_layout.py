"""The layout rules a newcomer relies on, enforced: every Redis key is spelled in one
module (``hot/keys.py``), and the core never imports Prefect."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]
PRODUCT = [ROOT / d for d in ("src", "flows", "blocks", "deployments", "bench")]
KEYS_MODULE = ROOT / "src" / "stratacrawl" / "hot" / "keys.py"


def _python_files() -> list[Path]:
    return sorted(p for d in PRODUCT for p in d.rglob("*.py") if "migrations" not in p.parts)


def _string_parts(tree: ast.AST) -> list[tuple[int, str]]:
    """Every string constant, and the leading text of every f-string."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr) and node.values and isinstance(
                node.values[0], ast.Constant):
            out.append((node.lineno, str(node.values[0].value)))
    return out


def test_redis_keys_are_spelled_only_in_hot_keys() -> None:
    found = []
    for path in _python_files():
        if path == KEYS_MODULE:
            continue
        tree = ast.parse(path.read_text(), str(path))
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef
                                    | ast.AsyncFunctionDef)
                      and n.body and isinstance(n.body[0], ast.Expr)}
        for node in ast.walk(tree):
            if id(node) in docstrings:
                continue
            for line, text in _string_parts(node) if isinstance(
                    node, ast.Constant | ast.JoinedStr) else []:
                if text.startswith("sc:"):
                    found.append(f"{path.relative_to(ROOT)}:{line}: {text!r}")
    assert found == [], "Redis key literals outside hot/keys.py:\n" + "\n".join(found)


def test_the_core_never_imports_prefect() -> None:
    core = ROOT / "src" / "stratacrawl"
    offenders = []
    for path in sorted(core.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names
                          if n == "prefect" or n.startswith("prefect.")]
    assert offenders == []
