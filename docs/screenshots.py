"""The screenshots under docs/images/, taken in headless Chromium as a user would see the pages.

    python docs/screenshots.py readme                           # the rendered README, with its figure
    python docs/screenshots.py mlflow --store runs/default/mlruns.db
        # the experiment's first page and one trained student's logged-model page, from `mlflow ui`

The README is rendered with markdown-it (CommonMark and GitHub's tables) on a GitHub-like page, its
images read from the repository. MLflow's pages come from the real `mlflow ui` on the run's store
(SQLite), given time to render (`--virtual-time-budget`). Each PNG is written to a temp name and
renamed: a failed shot leaves the old one.
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
CSS = """body{font:15px/1.5 -apple-system,'Segoe UI',Helvetica,Arial,sans-serif;max-width:900px;margin:24px auto;
color:#1f2328;padding:0 16px}code,pre{font-family:ui-monospace,monospace;font-size:12px;background:#f6f8fa}
pre{padding:12px;overflow:auto;border-radius:6px}table{border-collapse:collapse}td,th{border:1px solid #d0d7de;
padding:4px 10px}h1,h2{border-bottom:1px solid #d8dee4;padding-bottom:.3em}img{max-width:100%}"""


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if path := shutil.which(name):
            return path
    sys.exit("docs/screenshots.py: no Chromium on PATH (apt install chromium)")


def shoot(url: str, out: Path, width: int, height: int, wait_ms: int = 0) -> None:
    """Chromium's headless screenshot of ``url`` at width x height, renamed onto ``out``."""
    tmp = out.with_name(f".{out.name}.tmp.png")
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           f"--window-size={width},{height}", f"--screenshot={tmp}"]
    if wait_ms:
        cmd.append(f"--virtual-time-budget={wait_ms}")
    subprocess.run([*cmd, url], check=True, capture_output=True, timeout=180)
    os.replace(tmp, out)
    print(f"wrote {out.relative_to(ROOT)} ({width}x{height})")


def readme(height: int) -> None:
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark").enable("table").render((ROOT / "README.md").read_text())
    with tempfile.NamedTemporaryFile("w", suffix=".html", dir=ROOT, delete=False) as fh:
        fh.write(f"<!doctype html><meta charset=utf-8><style>{CSS}</style>{body}")
    try:  # written beside the README, so its relative image paths resolve
        shoot(Path(fh.name).as_uri(), IMAGES / "readme.png", 1000, height)
    finally:
        os.unlink(fh.name)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def mlflow_pages(store: Path) -> None:
    from mlflow import MlflowClient

    uri = f"sqlite:///{store.resolve()}"
    client = MlflowClient(tracking_uri=uri)
    exp = next(e for e in client.search_experiments() if e.name != "Default")
    models = client.search_logged_models(experiment_ids=[exp.experiment_id], max_results=50)
    student = next((m for m in models if "ltopd" in m.name), models[0] if models else None)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri, "--host", "127.0.0.1",
                               "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                urllib.request.urlopen(base, timeout=2)
                break
            except OSError:
                time.sleep(1)
        # the page Table 2's summary links (MLflow 3.18 opens an experiment on its GenAI overview
        # unless the URL names the workflow)
        view = "workflowType=machine_learning"
        shoot(f"{base}/#/experiments/{exp.experiment_id}/runs?{view}", IMAGES / "mlflow-experiment.png", 1600, 1000,
              20000)
        if student is not None:
            shoot(f"{base}/#/experiments/{exp.experiment_id}/models/{student.model_id}?{view}",
                  IMAGES / "mlflow-student-model.png", 1600, 1000, 20000)
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("readme", "mlflow"))
    ap.add_argument("--store", type=Path, default=Path("runs/default/mlruns.db"), help="the run's MLflow store")
    ap.add_argument("--height", type=int, default=2400, help="the README shot's height in pixels")
    args = ap.parse_args()
    IMAGES.mkdir(parents=True, exist_ok=True)
    if args.what == "readme":
        readme(args.height)
    else:
        mlflow_pages(args.store)


if __name__ == "__main__":
    main()
