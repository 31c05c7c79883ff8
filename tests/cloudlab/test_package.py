"""The lab stands outside the product: the pipeline never imports it, nor matplotlib."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: Modules only the lab may load: its own package and its figures' library (the `lab` extra).
LAB_ONLY = ("cloudlab", "matplotlib")


def _lab_modules(names: list[str]) -> list[str]:
    return sorted(n for n in names if n.split(".")[0] in LAB_ONLY)


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_importing_the_product_loads_no_lab_module() -> None:
    code = (
        "import sys\n"
        "import cloudcore, pipeline, pipeline.cli, pipeline.run\n"
        "print('\\n'.join(sys.modules))\n"
    )
    done = _python("-c", code)
    assert done.returncode == 0, done.stderr
    assert "pipeline.run" in done.stdout.splitlines()
    assert _lab_modules(done.stdout.splitlines()) == []


def test_the_pipeline_command_loads_no_lab_module() -> None:
    # -X importtime lists every module the command imports, one per line, on stderr.
    done = _python("-X", "importtime", "-m", "pipeline", "--help")
    assert done.returncode == 0, done.stderr
    assert "python -m pipeline" in done.stdout and "experiment" not in done.stdout
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()]
    assert "pipeline.cli" in imported
    assert _lab_modules(imported) == []


def test_no_module_of_the_pipeline_imports_the_lab() -> None:
    # Also the imports inside functions, which the two tests above never run.
    found = []
    for path in sorted((ROOT / "pipeline").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
            ):
                names = [str(node.args[0].value)]
            else:
                continue
            found += [f"{path.relative_to(ROOT)}: {n}" for n in names if n in _lab_modules(names)]
    assert found == []


def test_the_lab_command_lists_its_subcommands() -> None:
    done = _python("-m", "cloudlab", "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: python -m cloudlab")
    assert "experiment" in done.stdout and "report" in done.stdout


def test_the_lab_command_reports_a_config_error_in_one_line() -> None:
    done = _python("-m", "cloudlab", "-q", "experiment", "missing.yaml")
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1
