"""The launcher's parts that need no cluster: secret env shipping and scrubbing, auth, step groups."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from marin_assets.execution.secrets import StreamScrubber
from marin_assets.run import ray_run
from marin_assets.run.job_entry import ENV_MODULE_VAR, secret_values

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_job_entry_sets_the_env_and_scrubs_it_from_the_output(tmp_path):
    shipped = {"MY_TOKEN": "tok-123456", "OTHER": "visible?", "MARIN_PREFIX": "/data/marin"}
    module_dir = ray_run.write_env_module(shipped, str(tmp_path))
    assert oct(os.stat(Path(module_dir, "env.json")).st_mode & 0o777) == "0o600"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO_ROOT}", ENV_MODULE_VAR: Path(module_dir).name}
    script = "import os, sys; e = os.environ; print('token', e['MY_TOKEN'], e['OTHER'], e['MARIN_PREFIX']); sys.exit(4)"
    result = subprocess.run(
        [sys.executable, "-m", "marin_assets.run.job_entry", "--", sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 4  # the command's status passes through
    assert result.stdout.strip() == "token *** *** /data/marin"  # a prefix is configuration, not a secret


def test_auth_header_from_token_file_and_disabled_mode(tmp_path, monkeypatch):
    token = tmp_path / "auth_token"
    token.write_text("abc123\n")
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(token))
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert ray_run.auth_headers() == {"Authorization": "Bearer abc123"}
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    assert ray_run.auth_headers() == {}


def test_default_address_prefers_the_jobs_api(monkeypatch):
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.1:6379")  # a GCS address is no Jobs API URL
    assert ray_run.default_address() == ray_run.DEFAULT_ADDRESS
    monkeypatch.setenv("RAY_ADDRESS", "http://head:8265")
    assert ray_run.default_address() == "http://head:8265"


def test_listed_job_hides_env_values():
    info = SimpleNamespace(
        submission_id="raysubmit_1",
        status="JobStatus.RUNNING",
        entrypoint="python x.py",
        runtime_env={"env_vars": {"WANDB_API_KEY": "k-999", "MARIN_JOB_ENV_MODULE": "m"}, "working_dir": "gcs://p"},
        metadata={},
    )
    shown = json.dumps(ray_run.redact_job(info))
    assert "k-999" not in shown and "WANDB_API_KEY" in shown and '"RUNNING"' in shown


def test_step_groups_of_an_experiment_come_from_its_steps():
    groups = ray_run.step_dependency_groups(["python", "-m", "marin_assets.experiments.curation"], str(REPO_ROOT))
    assert groups == ["curation"]
    assert ray_run.step_dependency_groups(["bash", "-c", "true"], str(REPO_ROOT)) == []


def test_runtime_env_has_working_dir_excludes_and_env_module(tmp_path):
    module_dir = ray_run.write_env_module({"K": "value-xyz-77"}, str(tmp_path))
    env = ray_run.build_runtime_env(str(REPO_ROOT), ["curation"], module_dir)
    assert env["working_dir"] == str(REPO_ROOT) and ".venv" in env["excludes"]
    assert env["py_modules"] == [module_dir] and env["env_vars"][ENV_MODULE_VAR] == Path(module_dir).name
    # The project's interpreter first on the job's PATH (Ray expands ${PATH} on the node).
    assert env["env_vars"]["PATH"] == f"{Path(sys.executable).parent}:${{PATH}}"
    assert "value-xyz-77" not in json.dumps(env)
    # Installed requirements are not reinstalled on the cluster (same image).
    assert "pip" not in env


def test_command_line_needs_a_command_or_a_subcommand(capsys):
    with pytest.raises(SystemExit):
        ray_run.main(["--no_wait"])
    assert "after '--'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        ray_run.main(["logs"])


def test_options_may_follow_or_precede_the_job_id():
    for argv in (["logs", "--follow", "J1"], ["logs", "J1", "--follow"], ["--follow", "logs", "J1"]):
        args, command = ray_run.parse_command_line(argv)
        assert (args.action, args.follow, command) == (["logs", "J1"], True, []), argv
    args, command = ray_run.parse_command_line(["stop", "--no_wait", "J2", "--address", "http://h:8265"])
    assert (args.action, args.no_wait, args.address) == (["stop", "J2"], True, "http://h:8265")
    args, command = ray_run.parse_command_line(["-e", "K", "V", "--no_wait", "--", "python", "x.py", "--dry_run"])
    assert (args.env, args.no_wait, command) == ([["K", "V"]], True, ["python", "x.py", "--dry_run"])


def test_env_as_key_equals_value_or_key_value():
    argv = ["-e", "A=1", "-e", "B", "x=y", "--env", "C=p=q", "--env=D=", "-e", "E", "2", "--", "python", "x.py"]
    args, command = ray_run.parse_command_line(argv)
    assert args.env == [["A", "1"], ["B", "x=y"], ["C", "p=q"], ["D", ""], ["E", "2"]]
    assert command == ["python", "x.py"]
    # After `--` nothing is rewritten: the command's own `-e K=V` stays.
    assert ray_run.parse_command_line(["--", "python", "-e", "K=V"])[1] == ["python", "-e", "K=V"]
    # A token that does not start with a variable name and `=` is a KEY, followed by its VALUE.
    assert ray_run.parse_command_line(["-e", "not-a-name=1", "v", "list"])[0].env == [["not-a-name=1", "v"]]


def test_list_leaves_out_ray_client_sessions_unless_all(monkeypatch, capsys):
    jobs = [
        SimpleNamespace(submission_id="raysubmit_A", type="SUBMISSION", status="RUNNING", entrypoint="python a.py"),
        SimpleNamespace(submission_id=None, job_id="02000000", type="JobType.DRIVER", status="RUNNING"),
        SimpleNamespace(
            submission_id="marin-20261125-1-ab", type="SUBMISSION", status="SUCCEEDED", metadata={"marin_driver": "1"}
        ),
    ]
    monkeypatch.setattr(ray_run, "make_client", lambda address: SimpleNamespace(list_jobs=lambda: jobs))
    assert ray_run.main(["list", "--address", "http://h:8265"]) == 0
    out = capsys.readouterr().out
    assert "raysubmit_A" in out and "02000000" not in out and "marin-20261125" not in out
    assert "2 Ray Client sessions not shown" in out
    assert ray_run.main(["list", "--all", "--address", "http://h:8265"]) == 0
    out = capsys.readouterr().out
    assert "02000000" in out and "marin-20261125" in out and "not shown" not in out


PEM = (
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj\n"
    "MzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n"
    "-----END PRIVATE KEY-----\n"
)
SERVICE_ACCOUNT = json.dumps(
    {"type": "service_account", "client_email": "svc@proj.iam.gserviceaccount.com", "private_key": PEM}, indent=2
)
PEM_LINE = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"


def _scrubbed(env: dict[str, str], text: str, chunk: int) -> str:
    scrubber = StreamScrubber(secret_values(env))
    data = text.encode()
    out = b"".join(scrubber.feed(data[i : i + chunk]) for i in range(0, len(data), chunk)) + scrubber.flush()
    return out.decode()


@pytest.mark.parametrize("chunk", [1, 7, 64, 100000])
def test_multi_line_and_escaped_secrets_are_scrubbed_in_any_chunking(chunk):
    env = {"TLS_KEY": PEM, "GOOGLE_SA_JSON": SERVICE_ACCOUNT, "API_TOKEN": "tok'en\"42/x", "MARIN_PREFIX": "gs://b/m"}
    printed = [
        f"key follows\n{PEM}done",  # the value whole, across lines
        repr(PEM),
        json.dumps(PEM),
        json.dumps({"cfg": SERVICE_ACCOUNT}),  # the JSON value escaped inside other JSON
        SERVICE_ACCOUNT,
        repr({"k": SERVICE_ACCOUNT}),
        json.loads(SERVICE_ACCOUNT)["private_key"],  # the key decoded out of the JSON: its lines
        repr("tok'en\"42/x"),
        repr("it's tok'en\"42/x"),
        json.dumps("tok'en\"42/x"),
        "prefix is gs://b/m",
    ]
    out = _scrubbed(env, "\n".join(printed), chunk)
    for leaked in ("MIIEvQIBADAN", "MzEfYyjiWA4R4", "tok'en", "tok\\'en", "proj.iam"):
        assert leaked not in out, (leaked, chunk)
    assert "***" in out and "key follows" in out and "prefix is gs://b/m" in out  # config values stay readable
    # Nothing else is lost or reordered: the text with every secret form removed is unchanged.
    assert out.replace("***", "") == _scrubbed(env, "\n".join(printed), 100000).replace("***", "")


def test_stream_scrubber_holds_back_only_a_possible_secret_start():
    scrubber = StreamScrubber(secret_values({"K": "supersecret"}))
    assert scrubber.feed(b"hello\n") == b"hello\n"  # nothing that could start a secret: out at once
    assert scrubber.feed(b"value: sup") == b"value: "  # "sup" may be the start of the secret
    assert scrubber.feed(b"ersecret!\n") == b"***!\n"
    assert scrubber.feed(b"sup") == b"" and scrubber.flush() == b"sup"  # end of stream: released


def test_job_entry_scrubs_a_multi_line_secret_and_reports_a_signal_as_128_plus_n(tmp_path):
    module_dir = ray_run.write_env_module({"TLS_KEY": PEM}, str(tmp_path))
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}:{REPO_ROOT}", ENV_MODULE_VAR: Path(module_dir).name}
    script = (
        "import os, sys, json; k = os.environ['TLS_KEY']; sys.stdout.write(k); print(repr(k)); "
        "print(json.dumps(k)); sys.stdout.flush(); os.kill(os.getpid(), 9)"
    )
    result = subprocess.run(
        [sys.executable, "-m", "marin_assets.run.job_entry", "--", sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 137  # SIGKILL, as a shell reports it
    assert "PRIVATE KEY" not in result.stdout and "MIIEv" not in result.stdout
    assert result.stdout.count("***") >= 3


def test_address_precedence_and_ray_client_addresses(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "ray://10.1.2.3:10001")
    monkeypatch.delenv("RAY_API_SERVER_ADDRESS", raising=False)
    args, _ = ray_run.parse_command_line(["--address", "http://127.0.0.1:9999", "list"])
    assert args.address == "http://127.0.0.1:9999"  # --address wins over $RAY_ADDRESS
    args, _ = ray_run.parse_command_line(["list"])
    assert ray_run.jobs_api_url(args.address) == "http://10.1.2.3:8265"  # ray:// -> its dashboard
    # The deployment's own dashboard port when $RAY_API_SERVER_ADDRESS names the same host.
    monkeypatch.setenv("RAY_API_SERVER_ADDRESS", "http://10.1.2.3:31234")
    assert ray_run.jobs_api_url("ray://10.1.2.3:10001") == "http://10.1.2.3:31234"
    assert ray_run.jobs_api_url("ray://other:10001") == "http://other:8265"
    assert ray_run.jobs_api_url("127.0.0.1:8265") == "http://127.0.0.1:8265"
    assert ray_run.jobs_api_url("https://ray.example.org/") == "https://ray.example.org"
    with pytest.raises(ray_run.RayRunError):
        ray_run.jobs_api_url("grpc://x:1")


def test_an_unreachable_cluster_is_one_line_and_exit_2(monkeypatch, capsys):
    from marin_resources.ray_head import _free_port

    port = _free_port()  # nothing listens there
    monkeypatch.setenv("RAY_ADDRESS", "ray://127.0.0.1:1")  # must not be what is tried
    # The ray:// address maps to the dashboard port of $RAY_API_SERVER_ADDRESS (same host): a dead one.
    monkeypatch.setenv("RAY_API_SERVER_ADDRESS", f"http://127.0.0.1:{port}")
    assert ray_run.main(["--address", "ray://127.0.0.1:10001", "list"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err
    assert err.startswith(f"ray_run: cannot use the Ray Jobs API at http://127.0.0.1:{port}: ")
    assert ray_run.main(["--address", f"http://127.0.0.1:{port}", "logs", "J1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"127.0.0.1:{port}" in err


def test_list_table_and_exit_codes():
    jobs = [
        SimpleNamespace(
            submission_id="raysubmit_A",
            status="JobStatus.FAILED",
            driver_exit_code=3,
            entrypoint="python -m marin_assets.run.job_entry -- python -c 'import sys; sys.exit(3)'",
            start_time=1_700_000_000_000,
            end_time=1_700_000_065_000,
            runtime_env={"env_vars": {"WANDB_API_KEY": "k-999"}},
        ),
        SimpleNamespace(submission_id="raysubmit_BB", status="RUNNING", entrypoint="python x.py", start_time=None),
    ]
    lines = ray_run.jobs_table(jobs).splitlines()
    assert lines[0].split() == ["SUBMISSION", "ID", "STATUS", "EXIT", "STARTED", "(UTC)", "DURATION", "COMMAND"]
    assert lines[1].split()[:6] == ["raysubmit_A", "FAILED", "3", "2023-11-14", "22:13:20", "0:01:05"]
    assert lines[1].endswith("python -c 'import sys; sys.exit(3)'")  # the user's command, not the wrapper
    assert lines[2].split()[:3] == ["raysubmit_BB", "RUNNING", "-"]
    assert lines[1].index("FAILED") == lines[2].index("RUNNING")  # aligned columns
    assert "k-999" not in "\n".join(lines)
    assert [ray_run.command_status(s, c) for s, c in [("SUCCEEDED", 0), ("FAILED", 3), ("FAILED", None)]] == [0, 3, 1]
    assert ray_run.command_status("FAILED", 300) == 1 and ray_run.command_status("STOPPED", -15) == 1
