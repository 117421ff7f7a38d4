"""Which folders ship, under which package names (the rest of the metadata is pyproject.toml).

Every folder under these roots ships, found when the wheel is built, with every file in it that
is not Python bytecode: a new subpackage, SQL file, migration, template or static asset needs no
edit here. tests/py/test_wheel.py and scripts/test's wheel step check the built wheel.
"""

from pathlib import Path

from setuptools import setup

ROOTS = {
    "pgbus": "pgbus",
    "pgbus.web": "web",
    "pgbus.mcp": "mcp_server",
    "pgbus.sql": "sql",
    "pgbus.migrations": "migrations",
}
SKIP = {"__pycache__"}


def folders(root: str) -> list[Path]:
    base = Path(root)
    if not base.is_dir():
        return []
    found = [base]
    for path in sorted(base.rglob("*")):
        if path.is_dir() and not SKIP & set(path.relative_to(base).parts):
            found.append(path)
    return found


packages: list[str] = []
package_dir: dict[str, str] = {}
package_data: dict[str, list[str]] = {}
for name, root in ROOTS.items():
    for folder in folders(root):
        rel = folder.relative_to(root).parts
        package = ".".join((name, *rel))
        packages.append(package)
        package_dir[package] = folder.as_posix()
        # Data files only: the .py modules ship as modules (py.typed, .sql, templates, assets).
        package_data[package] = [
            f.name
            for f in sorted(folder.iterdir())
            if f.is_file() and f.suffix not in (".py", ".pyc", ".pyo")
        ]

setup(packages=packages, package_dir=package_dir, package_data=package_data)
