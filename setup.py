"""Maps the top-level folders into the ``tilegen`` package (see pyproject.toml for metadata)."""

from setuptools import find_packages, setup

MAPPING = {
    "tilegen": "tilegen",
    "tilegen.runtime": "runtime",
    "tilegen.generated": "generated",
    "tilegen.generator": "generator",
}

packages, package_dir = [], {}
for pkg, folder in MAPPING.items():
    packages.append(pkg)
    package_dir[pkg] = folder
    for sub in find_packages(folder):
        packages.append(f"{pkg}.{sub}")

setup(packages=packages, package_dir=package_dir)
