"""`infill serve`'s Ray options without Ray: a clear line and a non-zero exit, nothing started."""

from __future__ import annotations

import os
import subprocess
import sys


def serve(args: list[str], tmp_path, hide_ray: bool = False) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    if hide_ray:  # as if infill[ray] were not installed: `import ray` fails
        shim = tmp_path / "no-ray" / "ray"
        shim.mkdir(parents=True)
        (shim / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'ray'\", name='ray')\n")
        env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "no-ray"), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "infill.cli", "serve", *args], env=env, capture_output=True,
                          text=True, timeout=120)


def test_serve_ray_without_the_extra_says_what_to_install(tmp_path):
    done = serve(["--ray", "--port", "0"], tmp_path, hide_ray=True)
    assert done.returncode == 2
    assert "pip install 'infill[ray]'" in done.stderr


def test_ray_options_need_ray(tmp_path):
    done = serve(["--replicas", "2", "--port", "0"], tmp_path)
    assert done.returncode == 2
    assert "--replicas need(s) --ray" in done.stderr
    done = serve(["--ray", "--replicas", "2", "--autoscale", "1:3"], tmp_path)
    assert done.returncode == 2 and "not allowed with argument" in done.stderr
