#!/usr/bin/env bash
# Run by Snakemake inside the new ltopd-cuda environment, from its working directory: the repository
# root (where the Snakefile is). Installs the pipeline package and its dependencies from there.
set -euo pipefail
test -f pyproject.toml || { echo "post-deploy: run snakemake from the repository root" >&2; exit 1; }
pip install -e '.[pipeline]'
