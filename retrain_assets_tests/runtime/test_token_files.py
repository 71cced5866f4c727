"""The services' tokens where a user finds them: `up`'s owner-only files, `retrain-assets token`."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from retrain_assets.cli import main
from retrain_assets.runtime.token_files import current_token, write_token_files

CLI = str(Path(sys.executable).parent / "retrain-assets")


def test_the_files_are_the_owners_only_and_the_command_prefers_the_environment(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("RETRAIN_HOME", str(tmp_path))
    monkeypatch.delenv("RETRAIN_SERVE_TOKEN", raising=False)
    monkeypatch.delenv("RETRAIN_GPU_TOKEN", raising=False)
    assert current_token("serve")[0] == "dev-token"  # nothing written: the dev default
    folder = write_token_files({"RETRAIN_SERVE_TOKEN": "s-123", "RETRAIN_GPU_TOKEN": "g-456"})
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    for name in ("serve", "gpu"):
        assert stat.S_IMODE((folder / name).stat().st_mode) == 0o600
    assert main(["token", "serve"]) == 0
    out = capsys.readouterr()
    assert out.out == "s-123\n" and str(folder / "serve") in out.err
    assert current_token("gpu") == ("g-456", str(folder / "gpu"))
    write_token_files({"RETRAIN_SERVE_TOKEN": "s-789", "RETRAIN_GPU_TOKEN": "g"})  # next `up`
    assert current_token("serve")[0] == "s-789"
    monkeypatch.setenv("RETRAIN_SERVE_TOKEN", "from-env")
    assert current_token("serve") == ("from-env", "$RETRAIN_SERVE_TOKEN")
    with pytest.raises(ValueError, match="no token for 'mlflow'"):
        current_token("mlflow")


@pytest.mark.system
def test_up_writes_the_tokens_it_gave_its_services_and_names_them(shared_platform):
    folder = shared_platform.home / "tokens"
    assert f"tokens        {folder}/serve" in shared_platform.output.read_text()
    serve = (folder / "serve").read_text().strip()
    assert serve == shared_platform.serve_token()
    assert (folder / "gpu").read_text().strip() == shared_platform.gpu_token()
    assert stat.S_IMODE((folder / "serve").stat().st_mode) == 0o600
    env = {"RETRAIN_HOME": str(shared_platform.home), "PATH": "/usr/bin:/bin"}
    printed = subprocess.run(
        [CLI, "token", "serve"], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    answer = requests.get(
        f"{shared_platform.serve_url()}/v2",
        headers={"Authorization": f"Bearer {printed}"},
        timeout=30,
    )
    assert answer.status_code == 200 and "binary_tensor_data" in answer.json()["extensions"]
