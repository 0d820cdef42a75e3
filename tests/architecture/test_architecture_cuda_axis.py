"""--cuda is read in one function: buildspec/build_spec.cuda_axis splits the value (repeated flags,
"12.4,12.6", the config file's string or list), checks the X.Y form and normalises it against the
CUDA table; the settings cascade calls it once and every later reader (build_spec, the defaults,
the Jetson profiles, planning) takes the resolved tuple as it is. A second reader that splits or
normalises the settings' `cuda` again is how the value came to be parsed four times, with four
chances to disagree. Sources are read with ast (nothing is imported).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "pipeline" / "condapipe"
AXIS = "cuda_axis"  # the one function that reads the text
READERS = {"_as_list", "_unique", "split", "normalize_cuda", "match", "fullmatch", AXIS}


def _is_cuda_entry(node: ast.AST) -> bool:
    """`x.get("cuda")` or `x["cuda"]`: the settings' (or a config's) CUDA entry."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "cuda"
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and bool(node.args)
        and isinstance(node.args[0], ast.Constant)
        and node.args[0].value == "cuda"
    )


def cuda_text_readers(source: str) -> list[str]:
    """Functions of `source` that split, match or normalise a `cuda` entry, or use the X.Y form."""
    found = []
    for func in ast.walk(ast.parse(source)):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or func.name == AXIS:
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.Name) and node.id == "_CUDA_FORM":
                found.append(f"{func.name} line {node.lineno}: uses the X.Y form")
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name == AXIS and func.name == "resolve_settings":
                continue  # the cascade's one call
            if name in READERS and any(_is_cuda_entry(a) for a in ast.walk(node) if a is not node):
                found.append(f"{func.name} line {node.lineno}: {ast.unparse(node)}")
    return sorted(set(found))


def test_the_scan_sees_a_second_reader() -> None:
    assert cuda_text_readers('def f(s):\n    return _unique(_as_list(s.get("cuda")))\n')
    assert cuda_text_readers('def f(s):\n    return [normalize_cuda(c) for c in s["cuda"].split(",")]\n')
    assert cuda_text_readers("def f(t):\n    return _CUDA_FORM.match(t)\n")
    assert not cuda_text_readers('def f(s):\n    return list(s.get("cuda") or ())\n')
    assert not cuda_text_readers("def cuda_axis(v):\n    return _CUDA_FORM.match(v)\n")


def test_only_cuda_axis_reads_the_cuda_text() -> None:
    offences = {
        str(p.relative_to(PACKAGE_DIR)): cuda_text_readers(p.read_text(encoding="utf-8"))
        for p in sorted(PACKAGE_DIR.rglob("*.py"))
    }
    assert {k: v for k, v in offences.items() if v} == {}
    axis = [p for p in PACKAGE_DIR.rglob("*.py") if f"def {AXIS}(" in p.read_text(encoding="utf-8")]
    assert [p.relative_to(PACKAGE_DIR).as_posix() for p in axis] == ["buildspec/build_spec.py"]
